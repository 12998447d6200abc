#!/usr/bin/env python3
"""Reads and fresh writes behind an embedding backlog, on a real mount with the real model.

    python scripts/bench_index.py [--passages 3000] [--runs 10]

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


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--passages", type=int, default=3000)
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args()

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
