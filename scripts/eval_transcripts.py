#!/usr/bin/env python3
"""Abstention on real chats: the transcripts-dev set (real coding-agent sessions, with questions)
searched as memfs's session transcripts, each question asked of its own session's memory and of
another session's.

    python scripts/eval_transcripts.py ../shared/bench/transcripts-dev [--set KEY=VALUE ...]

Each session's user and assistant messages (decoded by the set's own verify.py, tool output left
out) are written as an OpenClaw transcript, ``sessions/<name>.jsonl``; nothing of the set is
copied anywhere else.  Three measures, n=6 at the default min_score (and at 0 where said):

- visible@6 (all sessions in one memory, as the set's measure.py): an evidence string is shown;
- answered@own: the question asked of its own session's memory alone, an evidence string shown;
- fp_rate: the question asked of the next session's memory (manifest order, the last asks the
  first): the share that gets any result.  These are other people's projects: nothing there
  answers the question.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

from memfs.config import load_config, parse_override
from memfs.memory import Memory


def norm(text: str) -> str:
    return re.sub(r"\s+", " ", text.replace("`", "").replace("*", "")).strip().lower()


def write_session(folder: Path, name: str, messages: list[tuple[str, str]]) -> None:
    start = dt.datetime(2025, 10, 1, tzinfo=dt.timezone.utc)
    lines = [json.dumps({"type": "session", "id": name, "timestamp": start.isoformat()})]
    for number, (role, text) in enumerate(messages):
        when = (start + dt.timedelta(minutes=number)).isoformat()
        lines.append(json.dumps({"type": "message", "timestamp": when,
                                 "message": {"role": "assistant" if role in ("assistant", "gemini") else "user",
                                             "content": text}}))
    (folder / "sessions").mkdir(parents=True, exist_ok=True)
    (folder / "sessions" / f"{name}.jsonl").write_text("\n".join(lines) + "\n")


def open_memory(ws: Path, agent: str, state: Path, overrides: list[tuple[str, str]]) -> Memory:
    cfg = load_config(workspace=ws, agent=agent, env={}, overrides=[("state_dir", str(state)), *overrides])
    memory = Memory(cfg)
    memory.rebuild()
    return memory


def shown(memory: Memory, question: str, evidence: list[str], min_score: float | None = None) -> tuple[bool, bool]:
    """(any result, an evidence string visible in the top 6)."""
    results = memory.search(question, max_results=6, min_score=min_score).results
    text = norm(" ".join(f"{r.snippet} {r.chat_title}" for r in results))
    return bool(results), any(norm(e) in text for e in evidence)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dev", type=Path, help="the transcripts-dev folder")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memfs-eval-state")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sys.path.insert(0, str(args.dev.resolve()))
    import verify  # the set's own decoders

    overrides = [parse_override(o) for o in args.overrides]
    manifest = json.loads((args.dev / "manifest.json").read_text())
    questions = [json.loads(line) for line in (args.dev / "questions.jsonl").read_text().splitlines() if line.strip()]
    decoders = {"claude-code": verify.units_claude, "codex": verify.units_codex, "gemini": verify.units_gemini}
    names = [Path(m["file"]).stem for m in manifest]
    totals: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for entry, name in zip(manifest, names):
            messages = [(role, text) for _, role, text in decoders[entry["runtime"]](str(args.dev / entry["file"]))
                        if text.strip()]
            write_session(root / name, name, messages)
            write_session(root / "all", name, messages)
        memories = {name: open_memory(root / name, "eval", args.cache, overrides) for name in [*names, "all"]}
        try:
            for q in questions:
                own = Path(q["file"]).stem
                stranger = names[(names.index(own) + 1) % len(names)]
                _, visible = shown(memories["all"], q["question"], q["evidence"])
                _, visible0 = shown(memories["all"], q["question"], q["evidence"], 0.0)
                _, answered = shown(memories[own], q["question"], q["evidence"])
                any_result, _ = shown(memories[stranger], q["question"], q["evidence"])
                for key, value in (("visible@6", visible), ("visible@6_min0", visible0), ("answered@own", answered),
                                   ("fp_rate", any_result)):
                    totals.setdefault(key, []).append(float(value))
        finally:
            for memory in memories.values():
                memory.close()
    summary = {key: round(statistics.fmean(values), 3) for key, values in totals.items()}
    summary["questions"] = len(questions)
    if args.json:
        print(json.dumps(summary))
    else:
        print(" ".join(f"{k}={v}" for k, v in summary.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
