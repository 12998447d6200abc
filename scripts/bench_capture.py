#!/usr/bin/env python3
"""Issue #43's measures of `memfs import` and `memfs hook`, each beside its baseline in the same run.

    python scripts/bench_capture.py [--mb 20] [--runs 30] [--cold-runs 8] [--only import,hooks,recall]

- import: MB/s of `memfs import RUNTIME FILE --no-index` per format, on files of about --mb MB
  made here from this repository's fixtures (tests/data/transcripts: each session repeated with
  new ids and words), against a plain copy of the same file into the workspace;
- hooks: wall time (process start to exit, as a runtime sees it) of `memfs hook` for SessionStart,
  UserPromptSubmit (recall.on_prompt on), PreCompact and Stop, p50 and p95, with `memfs serve`
  running and with no daemon at all (then the context comes too late and is not added: counted);
- recall: how often recall adds something on prompts about the memory and on prompts that are not.
  With ../shared/bench present: its seven real sessions imported, their 49 questions as related
  prompts (and whether the evidence is in what was added), LoCoMo questions as unrelated ones;
  else the fixtures and made-up prompts.  The data there is read, never copied.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "transcripts"
SHARED = ROOT.parent / "shared" / "bench"
MEMFS = [sys.executable, "-m", "memfs"]
WORDS = ("kettle thermostat gasket descaler firmware element relay sensor board valve pump filter spout handle base lid "
         "boil cutoff limit scope trace margin rating voltage courier dock return warranty batch lot test soak cycle").split()


def env_for(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    return {**env, "MEMFS_STATE_DIR": str(tmp / "state"), "MEMFS_DAEMON_ON_DEMAND": "false"}


def memfs(*args: str, env: dict[str, str], stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*MEMFS, *args], check=False, input=stdin, capture_output=True, env=env, timeout=3600)


def words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


# --- inputs of each format, about --mb MB --------------------------------------------------------

def _jsonl_repeated(src: Path, dst: Path, mb: int, rewrite) -> None:
    """The fixture's complete lines again and again, each copy through ``rewrite(record, n, rng)``."""
    lines = [json.loads(x) for x in src.read_text(encoding="utf-8").splitlines() if x.strip() and x.strip().endswith("}")]
    rng = random.Random(7)
    with open(dst, "w", encoding="utf-8") as out:
        n = 0
        while out.tell() < mb << 20:
            out.writelines(json.dumps(rewrite(json.loads(json.dumps(rec)), n, rng), ensure_ascii=False) + "\n"
                           for rec in lines)
            n += 1


def _claude(rec: dict, n: int, rng: random.Random) -> dict:
    if "uuid" in rec:
        rec["uuid"] = f"{rec['uuid']}-{n}"
    msg = rec.get("message")
    if isinstance(msg, dict):
        if isinstance(msg.get("id"), str):
            msg["id"] = f"{msg['id']}-{n}"
        if isinstance(msg.get("content"), str):
            msg["content"] += " " + words(rng, 30)
        elif isinstance(msg.get("content"), list):
            for block in msg["content"]:
                if isinstance(block, dict):
                    if block.get("type") == "text":
                        block["text"] += " " + words(rng, 30)
                    for key in ("id", "tool_use_id"):
                        if isinstance(block.get(key), str):
                            block[key] = f"{block[key]}-{n}"
    return rec


def _codex(rec: dict, n: int, rng: random.Random) -> dict:
    payload = rec.get("payload")
    if isinstance(payload, dict) and rec.get("type") != "session_meta":
        for key in ("call_id", "id"):
            if isinstance(payload.get(key), str):
                payload[key] = f"{payload[key]}-{n}"
        if isinstance(payload.get("message"), str):
            payload["message"] += f" {n} " + words(rng, 30)
        for block in payload.get("content") or []:
            if isinstance(block, dict) and isinstance(block.get("text"), str) and not block["text"].startswith("<"):
                block["text"] += f" {n} " + words(rng, 30)
    return rec if rec.get("type") != "session_meta" or n == 0 else {"type": "turn_context", "payload": {}}


def _gemini(rec: dict, n: int, rng: random.Random) -> dict:
    if isinstance(rec.get("id"), str) and "type" in rec:
        rec["id"] = f"{rec['id']}-{n}"
        if isinstance(rec.get("content"), str):
            rec["content"] += " " + words(rng, 30)
    return rec if "$rewindTo" not in rec else {"$set": {}}


def _aider(dst: Path, mb: int) -> None:
    text = (DATA / "aider.chat.history.md").read_text(encoding="utf-8")
    rng = random.Random(7)
    with open(dst, "w", encoding="utf-8") as out:
        while out.tell() < mb << 20:
            out.write(text.replace("\n#### ", f"\n#### {words(rng, 12)} ") + "\n")


def _chatgpt(dst: Path, mb: int) -> None:
    rng = random.Random(7)
    with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("conversations.json", "w") as out:
        out.write(b"[")
        n, size = 0, 0
        while size < mb << 20:
            mapping = {"root": {"id": "root", "message": None, "parent": None, "children": ["m0"]}}
            for i in range(12):
                mapping[f"m{i}"] = {"id": f"m{i}", "parent": "root" if i == 0 else f"m{i - 1}",
                                    "children": [f"m{i + 1}"] if i < 11 else [],
                                    "message": {"id": f"c{n}-m{i}", "author": {"role": "user" if i % 2 == 0 else "assistant"},
                                                "create_time": 1.7e9 + n, "recipient": "all", "metadata": {},
                                                "content": {"content_type": "text", "parts": [words(rng, 120)]}}}
            conv = json.dumps({"id": f"conv-{n}", "title": f"Chat {n}", "create_time": 1.7e9 + n,
                               "current_node": "m11", "mapping": mapping}).encode()
            out.write((b"," if n else b"") + conv)
            size += len(conv)
            n += 1
        out.write(b"]")


def inputs(folder: Path, mb: int) -> list[tuple[str, str, Path]]:
    folder.mkdir(parents=True, exist_ok=True)
    made = [("claude-code", "Claude Code JSONL", folder / "claude.jsonl"), ("codex", "Codex rollout JSONL", folder / "codex.jsonl"),
            ("gemini", "Gemini CLI JSONL", folder / "gemini.jsonl"), ("aider", "aider Markdown", folder / ".aider.chat.history.md"),
            ("chatgpt", "ChatGPT export zip", folder / "export.zip")]
    _jsonl_repeated(DATA / "claude-code.jsonl", made[0][2], mb, _claude)
    _jsonl_repeated(DATA / "codex-new.jsonl", made[1][2], mb, _codex)
    _jsonl_repeated(DATA / "gemini-chat.jsonl", made[2][2], mb, _gemini)
    _aider(made[3][2], mb)
    _chatgpt(made[4][2], mb)
    return made


def bench_import(tmp: Path, mb: int) -> None:
    print(f"\n## import: `memfs import RUNTIME FILE --no-index` against a plain copy (files of about {mb} MB)\n")
    print("| format | MB read | import s | import MB/s | copy MB/s | import / copy | sessions | messages |")
    print("|---|---|---|---|---|---|---|---|")
    env = env_for(tmp)
    for runtime, label, path in inputs(tmp / "in", mb):
        ws = tmp / f"ws-{runtime}"
        memfs("init", str(ws), env=env)
        size = path.stat().st_size if path.suffix != ".zip" else zipfile.ZipFile(path).getinfo("conversations.json").file_size
        began = time.perf_counter()
        dest = ws / "sessions" / "copied" / path.name
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, dest)
        os.sync()
        copy_s = time.perf_counter() - began
        dest.unlink()
        began = time.perf_counter()
        done = memfs("import", runtime, str(path), "-w", str(ws), "--no-index", "--json", env=env)
        import_s = time.perf_counter() - began
        if done.returncode:
            print(f"| {label} | import failed: {done.stderr.decode()[-200:]} |")
            continue
        report = json.loads(done.stdout)
        mbs = size / 1e6
        print(f"| {label} | {mbs:.1f} | {import_s:.2f} | {mbs / import_s:.1f} | {mbs / copy_s:.0f} | "
              f"{copy_s / import_s:.3f} | {report['sessions']:,} | {report['messages_new']:,} |")


# --- hooks ---------------------------------------------------------------------------------------

def _hook(runtime: str, event: str, payload: dict, ws: Path, env: dict[str, str]) -> tuple[float, bytes]:
    began = time.perf_counter()
    done = subprocess.run([*MEMFS, "hook", runtime, event, "-w", str(ws)], check=False, input=json.dumps(payload).encode(),
                          capture_output=True, env=env, timeout=30)
    took = time.perf_counter() - began
    assert done.returncode == 0 and not done.stderr, done.stderr
    return took, done.stdout


def _quantiles(values: list[float]) -> str:
    values = sorted(values)
    p95 = values[min(len(values) - 1, round(0.95 * (len(values) - 1)))]
    return f"{statistics.median(values) * 1000:.0f} | {p95 * 1000:.0f} | {max(values) * 1000:.0f}"


def _settled(ws: Path, event: str) -> None:
    """Wait until the workers of the runs so far are done: cold runs must not pile up."""
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        busy = subprocess.run(["pgrep", "-f", f"memfs hook claude-code {event} -w {ws}"], check=False,
                              capture_output=True).stdout
        if not busy.strip():
            return
        time.sleep(0.1)


def bench_hooks(tmp: Path, runs: int, cold_runs: int) -> None:
    ws = tmp / "ws-hooks"
    env = env_for(tmp)
    memfs("init", str(ws), env=env)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The kettle's spare gasket is in drawer nine.\n")
    memfs("import", "claude-code", str(DATA / "claude-code.jsonl"), "-w", str(ws), env=env)
    config = tmp / "recall.toml"
    config.write_text("[recall]\non_prompt = true\n")
    env = {**env, "MEMFS_CONFIG": str(config)}
    session = tmp / "session.jsonl"
    shutil.copyfile(DATA / "claude-code.jsonl", session)
    events = [("SessionStart", {"session_id": "s", "source": "startup", "hook_event_name": "SessionStart"}),
              ("UserPromptSubmit", {"session_id": "s", "prompt": "where did we put the spare gasket for the kettle?",
                                    "hook_event_name": "UserPromptSubmit"}),
              ("PreCompact", {"session_id": "s", "transcript_path": str(session), "trigger": "auto"}),
              ("Stop", {"session_id": "s", "transcript_path": str(session)})]
    print("\n## hooks: `memfs hook claude-code EVENT`, wall time from process start to exit (ms)\n")
    print("| event | daemon | runs | p50 | p95 | max | context added |")
    print("|---|---|---|---|---|---|---|")
    proc = subprocess.Popen([*MEMFS, "serve", str(ws)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 120
        while f"pid {proc.pid}" not in memfs("status", "-w", str(ws), env=env).stdout.decode():
            if time.monotonic() > deadline:
                raise SystemExit("memfs serve did not come up")
            time.sleep(0.2)
        memfs("search", "warm the model up", "-w", str(ws), env=env)
        # Baselines in the same run: the interpreter alone, and the CLI's quickest daemon answer.
        for label, argv in (("python -c pass (the interpreter alone)", [sys.executable, "-c", "pass"]),
                            ("memfs context (the CLI's fast path)", [*MEMFS, "context", "-w", str(ws)])):
            times = []
            for _ in range(runs):
                began = time.perf_counter()
                subprocess.run(argv, check=False, capture_output=True, env=env, timeout=30)
                times.append(time.perf_counter() - began)
            print(f"| {label} | memfs serve | {runs} | {_quantiles(times)} | |")
        for event, payload in events:
            times, added = [], 0
            for n in range(runs):
                if event in ("PreCompact", "Stop"):  # a transcript that grew since the last capture
                    with open(session, "a") as out:
                        out.write(json.dumps({"type": "user", "uuid": f"bench-{event}-{n}", "sessionId": "s", "isSidechain": False,
                                              "message": {"role": "user", "content": f"note {n}: {words(random.Random(n), 20)}"}}) + "\n")
                took, out = _hook("claude-code", event, payload, ws, env)
                times.append(took)
                added += bool(out)
            print(f"| {event} | memfs serve | {runs} | {_quantiles(times)} | {added}/{runs} |")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
    for event, payload in events:
        times, added = [], 0
        for _ in range(cold_runs):
            took, out = _hook("claude-code", event, payload, ws, env)
            times.append(took)
            added += bool(out)
            _settled(ws, event)
        print(f"| {event} | none | {cold_runs} | {_quantiles(times)} | {added}/{cold_runs} |")


# --- recall on prompts -------------------------------------------------------------------------

def _prompts() -> tuple[list[tuple[str, list[str]]], dict[str, list[str]], list[tuple[str, str]], str]:
    """(related prompts with their evidence, unrelated prompts by kind, files to import, where they came from)."""
    dev = SHARED / "transcripts-dev"
    if (dev / "questions.jsonl").exists() and (SHARED / "locomo-dev").is_dir():
        manifest = json.loads((dev / "manifest.json").read_text())
        # Every other session in memory; the others' questions are coding prompts the memory knows
        # nothing about.
        kept = {m["file"] for i, m in enumerate(manifest) if i % 2 == 0}
        files = [(m["runtime"], str(dev / m["file"])) for m in manifest if m["file"] in kept]
        questions = [json.loads(x) for x in (dev / "questions.jsonl").read_text().splitlines() if x.strip()]
        related = [(q["question"], q["evidence"]) for q in questions if q["file"] in kept]
        locomo = []
        for qa in sorted((SHARED / "locomo-dev").glob("conv-*/qa.json")):
            locomo += [q["question"] for q in json.loads(qa.read_text())[:30] if isinstance(q.get("question"), str)]
        unrelated = {"coding, other projects": [q["question"] for q in questions if q["file"] not in kept],
                     "everyday life (LoCoMo)": locomo}
        return related, unrelated, files, (f"{len(files)} of the real sessions of shared/bench/transcripts-dev in memory; "
                                           "the other sessions' questions and LoCoMo questions as unrelated prompts")
    related = [("Why did the kettle keep heating after it boiled dry?", ["DRY_LIMIT_C"]),
               ("Which loom command did we run in the Codex session?", ["loom"])]
    unrelated = {"made up": ["What is a good recipe for lemon drizzle cake?", "Explain the difference between TCP and UDP.",
                             "Who won the 1998 football world cup?", "Translate 'good morning' into Portuguese."]}
    files = [("claude-code", str(DATA / "claude-code.jsonl")), ("codex", str(DATA / "codex-new.jsonl"))]
    return related, unrelated, files, "the fixtures and made-up prompts (no shared/bench here)"


def bench_recall(tmp: Path) -> None:
    from memfs.capture import recall
    from memfs.config import load_config
    from memfs.memory import Memory

    related, unrelated, files, source = _prompts()
    ws = tmp / "ws-recall"
    env = env_for(tmp)
    memfs("init", str(ws), env=env)
    for runtime, path in files:
        memfs("import", runtime, path, "-w", str(ws), "--no-index", env=env)
    done = memfs("index", "-w", str(ws), env=env)
    assert done.returncode == 0, done.stderr
    cfg = load_config(workspace=ws, env={"MEMFS_STATE_DIR": str(tmp / "state")}, overrides=[("recall.on_prompt", "true")])
    memory = Memory(cfg)
    try:
        def ask(prompt: str) -> str:
            return recall.answer(memory, cfg, {"prompt": prompt}).stdout

        def norm(s: str) -> str:
            return " ".join(s.replace("`", "").replace("*", "").lower().split())

        got = [ask(q) for q, _ in related]
        found = sum(any(norm(e)[:80] in norm(text) for e in evidence) for text, (_, evidence) in zip(got, related))
        noise = {kind: [ask(q) for q in prompts] for kind, prompts in unrelated.items()}
    finally:
        memory.close()
    print(f"\n## recall (recall.on_prompt = true, search.min_score {cfg.search.min_score}, max_tokens "
          f"{cfg.recall.max_tokens}) on {source}\n")
    print("| prompts | n | something added | evidence in what was added |")
    print("|---|---|---|---|")
    print(f"| about the memory | {len(related)} | {sum(map(bool, got)) / len(related):.3f} | {found / len(related):.3f} |")
    for kind, said in noise.items():
        print(f"| unrelated: {kind} | {len(said)} | {sum(map(bool, said)) / len(said):.3f} | |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=20)
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--cold-runs", type=int, default=8)
    parser.add_argument("--only", default="import,hooks,recall")
    args = parser.parse_args()
    only = set(args.only.split(","))
    with tempfile.TemporaryDirectory(prefix="bench-capture-") as name:
        tmp = Path(name)
        print(f"# bench_capture ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
        if "import" in only:
            bench_import(tmp, args.mb)
        if "hooks" in only:
            bench_hooks(tmp, args.runs, args.cold_runs)
        if "recall" in only:
            bench_recall(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
