#!/usr/bin/env python3
"""Latency of the virtual files on a workspace of 1,000 memory files.

    python scripts/bench_virtual.py [--files 1000] [--queries 30]

Builds a workspace of --files daily logs from the LoCoMo dev set's real dialogue turns, mounts it
(local provider), lets it embed everything, then times with `cat`:
- `cat search/<q>.md` cold (a query not asked before) and cached (the same query again);
- `cat context/main.md`;
- baselines in the same run: `cat` of a real file of the same size through the mount and in a
  native directory, and `memfs search` as a separate command (a process that loads the model).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo-dev"


def turns(dev: Path) -> list[str]:
    out = []
    for path in sorted(dev.glob("conv-*/memory/*.md")):
        block: list[str] = []
        for line in path.read_text().splitlines():
            if line.startswith("## ") and block:
                out.append("\n".join(block).strip())
                block = []
            if not line.startswith("# "):
                block.append(line)
        if block:
            out.append("\n".join(block).strip())
    return [t for t in out if t]


def questions(dev: Path) -> list[str]:
    qs = [q["question"] for p in sorted(dev.glob("conv-*/qa.json")) for q in json.loads(p.read_text())]
    random.Random(3).shuffle(qs)
    return qs


def cat_ms(path: Path) -> tuple[float, int]:
    started = time.perf_counter()
    out = subprocess.run(["cat", str(path)], capture_output=True, check=True)
    return (time.perf_counter() - started) * 1000, len(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=30)
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="memfs-vbench-"))
    ws, mnt, state, native = tmp / "ws", tmp / "mnt", tmp / "state", tmp / "native"
    for d in (ws / "memory", mnt, native):
        d.mkdir(parents=True)
    env = {**os.environ, "MEMFS_STATE_DIR": str(state)}
    memfs = [sys.executable, "-m", "memfs"]
    subprocess.run([*memfs, "init", str(ws)], env=env, check=True, capture_output=True)
    all_turns = turns(args.dev)
    per_file = max(1, len(all_turns) // args.files)
    day0 = time.mktime((2024, 1, 1, 12, 0, 0, 0, 0, 0))
    for i in range(args.files):
        date = time.strftime("%Y-%m-%d", time.localtime(day0 + i * 86400))
        body = "\n\n".join(all_turns[i * per_file : (i + 1) * per_file])
        (ws / "memory" / f"{date}.md").write_text(f"# {date}\n\n{body}\n")
    today = time.strftime("%Y-%m-%d")
    (ws / "memory" / f"{today}.md").write_text("# today\n\n" + "\n\n".join(all_turns[:40]) + "\n")

    started = time.perf_counter()
    subprocess.run([*memfs, "index", "-w", str(ws)], env=env, check=True, capture_output=True)
    index_s = time.perf_counter() - started
    subprocess.run([*memfs, "mount", str(ws), str(mnt)], env=env, check=True, capture_output=True)
    try:
        qs = questions(args.dev)[: args.queries]
        cold, cached, sizes = [], [], []
        for q in qs:
            path = mnt / "search" / f"{q.replace('/', ' ')}.md"
            ms, size = cat_ms(path)
            cold.append(ms)
            sizes.append(size)
            cached.append(cat_ms(path)[0])
        context = [cat_ms(mnt / "context" / "main.md")[0] for _ in range(20)]
        size = int(statistics.median(sizes))
        (ws / "same-size.txt").write_bytes(b"x" * size)
        (native / "same-size.txt").write_bytes(b"x" * size)
        real_mnt = [cat_ms(mnt / "same-size.txt")[0] for _ in range(20)]
        real_native = [cat_ms(native / "same-size.txt")[0] for _ in range(20)]
        cli = []
        for q in qs[:5]:
            t0 = time.perf_counter()
            subprocess.run([*memfs, "search", q, "-w", str(ws)], env=env, check=True, capture_output=True)
            cli.append((time.perf_counter() - t0) * 1000)
    finally:
        subprocess.run([*memfs, "umount", str(mnt)], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    base = statistics.median(real_native)
    print(f"workspace: {args.files + 1} memory files, indexed in {index_s:.0f} s; {len(qs)} LoCoMo questions")
    rows = [
        ("cat search/<q>.md, cold", cold),
        ("cat search/<q>.md, cached", cached),
        ("cat context/main.md", context),
        ("cat same-size real file, mount", real_mnt),
        ("cat same-size real file, native", real_native),
        ("memfs search (new process)", cli),
    ]
    print(f"{'what':<34} {'p50':>9} {'p95':>9} {'p50 / native cat':>17}")
    for name, values in rows:
        values = sorted(values)
        p95 = values[min(len(values) - 1, int(0.95 * len(values)))]
        print(f"{name:<34} {statistics.median(values):>7.1f}ms {p95:>7.1f}ms {statistics.median(values) / base:>16.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
