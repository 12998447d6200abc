#!/usr/bin/env python3
"""Reads and fresh writes behind an embedding backlog, on a real mount with the real model; or,
with --work, how much the embedding model reads and how fast the indexing pipeline embeds.

    python scripts/bench_index.py [--passages 3000] [--runs 10]
    python scripts/bench_index.py --work [--runs 3] [--load 2] [--conv conv-26 ...] [--reading late] [--ratio-only]

--work, on the LoCoMo dev set's text (its Markdown daily logs and its sync JSONL copies, each
conversation its own workspace):

- work ratio: word pieces the model reads ([CLS] and [SEP] counted: they are computed like any
  piece; padding reported apart) per word piece indexed (each line of the files once, as
  memfs.index.embedding.workratio defines it), measured by the local provider itself while
  Memory.embed_pending embeds everything, in this process, with an empty embedding cache.
- raw model: LocalProvider in this process reading the same text once, its lines packed into
  windows as long as the model reads (254 pieces and [CLS]/[SEP]), in calls of 64 windows:
  word pieces read per second, and pieces of text per second.
- pipeline: Memory.embed_pending as a mount's background embedder calls it (each call sized by
  embedder.CallSize from the last one's rate; and, for comparison, every call of embedder.BATCH
  passages, as the embedder called it before), through the embedding service as the default config uses it (a
  private service started for the run), and as `memfs index` calls it (commands.INDEX_BATCH):
  pieces of text indexed per second, from an empty cache, the files already keyword-indexed.
Raw and pipeline alternate, --runs times each; medians.  --load N runs N busy loops meanwhile.

Mounts an empty workspace and times, with nothing pending, `cat search/<q>.md` (a LoCoMo question
not asked before, median of --runs) and `stat` of another.  Then it copies the LoCoMo dev set's
daily logs (real dialogue) through the mount until at least --passages passages wait for their
vectors, and times the same reads during that backlog.  Last, it writes a note to today's daily log
and times how long until a search finds it by meaning (no word in common with the query), saying
how many passages were still waiting then.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo-dev"
NOTE = "The plumber comes on Thursday morning to fix the leaking kitchen sink.\n"
QUERY = "appointment to repair a dripping faucet"


def questions(dev: Path) -> list[str]:
    return [q["question"].replace("/", " ") for p in sorted(dev.glob("conv-*/qa.json"))
            for q in json.loads(p.read_text())]


def status(mnt: Path) -> dict[str, str]:
    text = (mnt / ".memfs" / "status").read_text()
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


def pending(mnt: Path) -> int:
    return int(status(mnt)["pending"].split()[0])


def renders(mnt: Path) -> tuple[int, float]:
    found = re.match(r"\s*(\d+) search file rendering\(s\), the longest waited ([\d.]+) ms", status(mnt)["searches"])
    assert found, status(mnt)
    return int(found.group(1)), float(found.group(2))


def timed(command: list[str]) -> tuple[float, bytes]:
    began = time.perf_counter()
    out = subprocess.run(command, capture_output=True, check=True)
    return (time.perf_counter() - began) * 1000, out.stdout


def reads(mnt: Path, qs: list[str]) -> dict[str, object]:
    """cat of a new query, stat of another: their latencies, and renders per cat."""
    cats, stats, per_cat = [], [], []
    for q in qs:
        before = renders(mnt)[0]
        ms, out = timed(["cat", str(mnt / "search" / f"{q}.md")])
        per_cat.append(renders(mnt)[0] - before)
        cats.append(ms)
        stats.append(timed(["stat", str(mnt / "search" / f"{q} (stat).md")])[0])
    return {"cat": cats, "stat": stats, "renders": per_cat, "last": out.decode()}


def _workspaces(dev: Path, root: Path, convs: list[str], files: int) -> list[tuple[str, Path]]:
    """(agent, workspace) per conversation and copy: md (memory/*.md) and jsonl (clawgpt-memory),
    the first ``files`` files of each (all: 0)."""
    out = []
    for source, folder in (("md", "memory"), ("jsonl", "clawgpt-memory")):
        for conv in sorted(p for p in dev.iterdir() if p.is_dir() and p.name.startswith("conv-")):
            if convs and conv.name not in convs:
                continue
            ws = root / source / conv.name
            (ws / folder).mkdir(parents=True)
            for path in sorted((conv / folder).iterdir())[: files or None]:
                shutil.copy(path, ws / folder / path.name)
            out.append((f"{conv.name}-{source}", ws))
    return out


def _memory(ws: Path, agent: str, state: Path, provider: object = None, **settings: str):
    from memfs.config import load_config
    from memfs.memory import Memory

    overrides = [("state_dir", str(state)), *settings.items()]
    return Memory(load_config(workspace=ws, agent=agent, env={}, overrides=overrides), provider=provider)


def _indexed(ws: Path, tokenizer: object) -> tuple[int, list[str]]:
    from memfs.index.embedding.workratio import indexed_texts, pieces

    texts = []
    for path in sorted(p for p in ws.rglob("*") if p.is_file()):
        texts += indexed_texts(path.relative_to(ws).as_posix(), path.read_text())
    return pieces(tokenizer, texts), texts


def _windows(texts: list[str], tokenizer: object, body: int) -> list[str]:
    """The lines packed into texts of at most ``body`` pieces (a longer line alone)."""
    out, current, size = [], [], 0
    for text, encoded in zip(texts, tokenizer.encode_batch(texts, add_special_tokens=False)):
        n = len(encoded.ids) + 1
        if current and size + n > body:
            out.append("\n".join(current))
            current, size = [], 0
        current.append(text)
        size += n
    if current:
        out.append("\n".join(current))
    return out


def work(args: argparse.Namespace) -> int:
    from memfs import embedder
    from memfs.commands import INDEX_BATCH
    from memfs.index.embedding.providers import LocalProvider

    reading = "once" if args.read_once else args.reading
    extra = {"once": {"embedding.read_once": "true"}, "whole": {"embedding.late_chunking": "off"},
             "late": {"embedding.late_chunking": "all"}, "default": {}}[reading]
    print(f"reading: {reading} {extra or '(the defaults)'}")
    tmp = Path(tempfile.mkdtemp(prefix="memfs-work-"))
    runtime = tmp / "run"
    runtime.mkdir(mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)  # a service of this run's code, asked by nothing else
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.load)]
    try:
        spaces = _workspaces(args.dev, tmp / "ws", args.conv, args.files)
        counter = LocalProvider()
        indexed = {source: 0 for source in ("md", "jsonl")}
        read = {source: 0 for source in ("md", "jsonl")}
        padding = {source: 0 for source in ("md", "jsonl")}
        all_texts: list[str] = []
        for agent, ws in spaces:
            source = agent.rsplit("-", 1)[1]
            n, texts = _indexed(ws, counter.tokenizer)
            indexed[source] += n
            all_texts += texts
            memory = _memory(ws, agent, tmp / "state-work", counter, **{"embedding.service": "false"}, **extra)
            before, pad = counter.pieces_read, counter.padding_read
            memory.reconcile()
            memory.embed_pending()
            read[source] += counter.pieces_read - before
            padding[source] += counter.padding_read - pad
            memory.close()
        print("embedding work on LoCoMo dev (word pieces the model reads, [CLS]/[SEP] included, per word piece "
              "indexed; padding apart):")
        for source in ("md", "jsonl"):
            print(f"  {source:<6} indexed {indexed[source]:>8} read {read[source]:>8} ratio "
                  f"{read[source] / max(1, indexed[source]):.3f}  (padding {padding[source] / max(1, indexed[source]):.3f})")
        total_i, total_r = sum(indexed.values()), sum(read.values())
        print(f"  {'both':<6} indexed {total_i:>8} read {total_r:>8} ratio {total_r / max(1, total_i):.3f}")

        if args.ratio_only:
            return 0
        windows = _windows(all_texts, counter.tokenizer, counter.max_pieces - 2)
        raw, background, fixed, bulk = [], [], [], []
        for run in range(args.runs):
            began, before = time.perf_counter(), counter.pieces_read
            for start in range(0, len(windows), 64):
                counter.embed(windows[start : start + 64])
            seconds = time.perf_counter() - began
            raw.append(((counter.pieces_read - before) / seconds, total_i / seconds))
            for label, out in (("background", background), ("fixed", fixed), ("index", bulk)):
                seconds = 0.0
                for agent, ws in spaces:
                    memory = _memory(ws, agent, tmp / f"state-{label}-{run}", **extra)
                    memory.provider.embed(["warm up"])  # the service started and its model loaded
                    memory.reconcile()
                    size = embedder.CallSize(INDEX_BATCH if label == "index" else embedder.BATCH)
                    began = time.perf_counter()
                    while True:  # as BackgroundEmbedder._embed_all sizes its calls (memfs index: fixed)
                        call = time.perf_counter()
                        done = memory.embed_pending(limit=size.passages)
                        if not done:
                            break
                        if label == "background":
                            size.measured(done, time.perf_counter() - call)
                    seconds += time.perf_counter() - began
                    assert memory.pending == 0, (agent, memory.pending)
                    memory.close()
                out.append(total_i / seconds)
            print(f"  run {run + 1}: raw {raw[-1][0]:.0f} pieces read/s ({raw[-1][1]:.0f} text pieces/s); pipeline "
                  f"{background[-1]:.0f} (background calls), {fixed[-1]:.0f} (calls of {embedder.BATCH}), {bulk[-1]:.0f} "
                  f"(memfs index) indexed pieces/s; ratios {background[-1] / raw[-1][1]:.2f}, "
                  f"{fixed[-1] / raw[-1][1]:.2f}, {bulk[-1] / raw[-1][1]:.2f}", flush=True)
        raw_read = statistics.median(r[0] for r in raw)
        raw_text = statistics.median(r[1] for r in raw)
        print(f"throughput, median of {args.runs} runs, {args.load} busy loops beside:")
        print(f"  raw model:  {raw_read:.0f} word pieces read/s = {raw_text:.0f} pieces of text/s")
        for label, values in (("background", background), (f"background, calls of {embedder.BATCH}", fixed),
                              ("memfs index", bulk)):
            value = statistics.median(values)
            ratios = [v / r[1] for v, r in zip(values, raw)]
            print(f"  pipeline ({label}): {value:.0f} indexed pieces/s = {value / raw_text:.2f} of the raw model "
                  f"(each run's ratio: median {statistics.median(ratios):.2f}, {min(ratios):.2f}-{max(ratios):.2f})")
    finally:
        for process in busy:
            process.kill()
            process.wait()
        _stop_service()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


def _stop_service() -> None:
    """The run's own embedding service (its runtime folder is the run's) is stopped by its pid."""
    import signal

    from memfs.config import EmbeddingConfig
    from memfs.index.embedding.client import service_record

    record = service_record(EmbeddingConfig())
    if record and "pid" in record:
        os.kill(int(record["pid"]), signal.SIGTERM)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--passages", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=None)
    parser.add_argument("--work", action="store_true", help="work ratio and throughput (see above)")
    parser.add_argument("--load", type=int, default=0, help="--work: busy loops beside it")
    parser.add_argument("--conv", action="append", default=[], help="--work: only these conversations")
    parser.add_argument("--files", type=int, default=0, help="--work: only the first N files of each copy")
    parser.add_argument("--read-once", action="store_true", help="--work: with embedding.read_once on")
    parser.add_argument("--reading", choices=("default", "whole", "late", "once"), default="default",
                        help="--work: how the model reads chunks and units (whole: embedding.late_chunking = "
                             "false; late: true; once: embedding.read_once = true, as --read-once)")
    parser.add_argument("--ratio-only", action="store_true", help="--work: the work ratio only, no throughput")
    args = parser.parse_args()
    if args.work:
        args.runs = args.runs or 3
        return work(args)
    args.runs = args.runs or 10

    tmp = Path(tempfile.mkdtemp(prefix="memfs-ibench-"))
    ws, mnt, state = tmp / "ws", tmp / "mnt", tmp / "state"
    mnt.mkdir(parents=True)
    env = {**os.environ, "MEMFS_STATE_DIR": str(state), "MEMFS_DAEMON_ON_DEMAND": "false"}
    memfs = [sys.executable, "-m", "memfs"]
    subprocess.run([*memfs, "init", str(ws)], env=env, check=True, capture_output=True)
    subprocess.run([*memfs, "mount", str(ws), str(mnt)], env=env, check=True, capture_output=True)
    qs = questions(args.dev)
    try:
        (mnt / "memory" / "warm-up.md").write_text("# warm-up\n\nThe model is loaded.\n")
        while pending(mnt):
            time.sleep(0.1)
        idle = reads(mnt, qs[: args.runs])
        copied = 0
        for source in sorted(args.dev.glob("conv-*/memory/*.md")):
            target = mnt / "memory" / source.parent.parent.name / source.name
            target.parent.mkdir(exist_ok=True)
            shutil.copyfile(source, target)
            copied += 1
            if pending(mnt) >= args.passages:
                break
        backlog = pending(mnt)
        busy = reads(mnt, qs[args.runs : 2 * args.runs])
        longest_wait = renders(mnt)[1]
        today = time.strftime("%Y-%m-%d")
        began = time.perf_counter()
        with open(mnt / "memory" / f"{today}.md", "a") as note:
            note.write(NOTE)
        found_s, left = None, None
        query = mnt / "search" / "min=0,n=3" / f"{QUERY}.json"
        while time.perf_counter() - began < 600:
            answer = json.loads(query.read_text())
            if any(r["path"] == f"memory/{today}.md" and r["vector_score"] > 0 for r in answer["results"]):
                found_s, left = time.perf_counter() - began, answer["pending"]
                break
            time.sleep(0.2)
        info = status(mnt)
    finally:
        subprocess.run([*memfs, "umount", str(mnt)], env=env, capture_output=True, check=False)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"backlog: {backlog} passages waiting after copying {copied} LoCoMo daily logs through the mount")
    print(f"{'what':<40} {'nothing pending':>16} {'during backlog':>16}")
    for name in ("cat", "stat"):
        print(f"{name + ' search/<new q>.md, median ms':<40} {statistics.median(idle[name]):>16.1f} "
              f"{statistics.median(busy[name]):>16.1f}")
    print(f"{'renders per cat (max)':<40} {max(idle['renders']):>16} {max(busy['renders']):>16}")
    print(f"longest wait for vectors of any read: {longest_wait:g} ms")
    note_line = [line for line in str(busy["last"]).splitlines() if line.startswith("> pending:")]
    print(f"a read during the backlog says: {note_line[0] if note_line else '(nothing)'}")
    if found_s is None:
        print("a note written behind the backlog was not found by meaning within 600 s")
    else:
        print(f"a note written behind the backlog was found by meaning after {found_s:.2f} s, "
              f"with {left} of {backlog} passages still waiting")
    print(f"status then: pending:{info['pending']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
