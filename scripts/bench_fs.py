#!/usr/bin/env python3
"""The filesystem workload on a native directory and on a memfs mount, in one run, as ratios.

    python scripts/bench_fs.py [--files 2000] [--appends 5000] [--repeat 3]

Workload (each step timed, median of --repeat runs): create 2,000 files of 2 KiB; 5,000
open/append/close; stat of all; read of all; grep -r; ls -lR; a large sequential read (256 MiB,
first read through the mount and a re-read).  The mount runs with indexing on (local provider); the
workload files are plain files, and a second part measures memory files: 2 KiB appends to daily
logs, and the time from close() to the text being found by a search from another connection
(keyword side; then the vector side once embedded).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from memfs.config import load_config
from memfs.memory import Memory


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def workload(root: Path, files: int, appends: int) -> dict[str, float]:
    data = os.urandom(1024).hex().encode()[:2048]
    base = root / "bench"
    if base.exists():
        shutil.rmtree(base)
    (base / "sub").mkdir(parents=True)
    paths = [base / ("sub" if i % 2 else "") / f"f{i:05d}.txt" for i in range(files)]
    out: dict[str, float] = {}

    def create() -> None:
        for p in paths:
            with open(p, "wb") as handle:
                handle.write(data)

    def append() -> None:
        for i in range(appends):
            fd = os.open(paths[i % files], os.O_WRONLY | os.O_APPEND)
            os.write(fd, b"appended line of text\n")
            os.close(fd)

    def stat_all() -> None:
        for p in paths:
            os.lstat(p)

    def read_all() -> None:
        for p in paths:
            with open(p, "rb") as handle:
                handle.read()

    out["create"] = timed(create)
    out["append"] = timed(append)
    out["stat-all"] = timed(stat_all)
    out["read-all"] = timed(read_all)
    out["grep -r"] = timed(lambda: subprocess.run(["grep", "-r", "-c", "zzz-not-there", str(base)],
                                                  capture_output=True))
    out["ls -lR"] = timed(lambda: subprocess.run(["ls", "-lR", str(base)], capture_output=True))
    return out


def big_read(root: Path, size_mb: int) -> dict[str, float]:
    big = root / "big.bin"
    block = os.urandom(1 << 20)
    with open(big, "wb") as handle:
        for _ in range(size_mb):
            handle.write(block)

    def read() -> None:
        with open(big, "rb", buffering=0) as handle:
            while handle.read(1 << 20):
                pass

    first = timed(read)
    second = timed(read)
    big.unlink()
    return {"big read (first)": size_mb / first, "big read (again)": size_mb / second}


def memory_part(mnt: Path, ws: Path, state: Path, appends: int) -> dict[str, list[float]]:
    memory = Memory(load_config(workspace=ws, agent="main", env={}, overrides=[("state_dir", str(state))]))
    keyword, vector, append_s = [], [], []
    try:
        log = mnt / "memory" / "2026-11-22.md"
        for i in range(appends):
            token = f"marker{i:05d}zq"
            text = f"\n## 10:{i % 60:02d} - Entry {i}\n{token} " + ("lorem ipsum dolor sit amet " * 70)[:1900] + "\n"
            started = time.perf_counter()
            with open(log, "a") as handle:
                handle.write(text)
            closed = time.perf_counter()
            append_s.append(closed - started)
            while not memory.search(token, wait_ms=0).results:
                pass
            keyword.append(time.perf_counter() - closed)
            while memory.pending:
                time.sleep(0.002)
            vector.append(time.perf_counter() - closed)
    finally:
        memory.close()
    return {"append": append_s, "keyword": keyword, "vector": vector}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--appends", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big-mb", type=int, default=256)
    parser.add_argument("--memory-appends", type=int, default=40)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="mount setting, e.g. --set mount.watch=false")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="memfs-bench-"))
    native, ws, mnt, state = tmp / "native", tmp / "ws", tmp / "mnt", tmp / "state"
    for d in (native, ws / "memory", mnt):
        d.mkdir(parents=True)
    env = {**os.environ, "MEMFS_STATE_DIR": str(state)}
    extra = [arg for o in args.overrides for arg in ("--set", o)]
    out = subprocess.run([sys.executable, "-m", "memfs", "mount", str(ws), str(mnt), *extra], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return 1
    try:
        runs: dict[str, dict[str, list[float]]] = {"native": {}, "memfs": {}}
        for _ in range(args.repeat):
            for name, root in (("native", native), ("memfs", mnt)):
                for metric, seconds in workload(root, args.files, args.appends).items():
                    runs[name].setdefault(metric, []).append(seconds)
        big = {"native": big_read(native, args.big_mb), "memfs": big_read(mnt, args.big_mb)}
        mem = memory_part(mnt, ws, state, args.memory_appends)
    finally:
        subprocess.run([sys.executable, "-m", "memfs", "umount", str(mnt)], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{args.files} files of 2 KiB, {args.appends} appends, median of {args.repeat} runs")
    print(f"{'metric':<12} {'native':>10} {'memfs':>10} {'ratio':>8}")
    for metric in runs["native"]:
        n = statistics.median(runs["native"][metric])
        m = statistics.median(runs["memfs"][metric])
        print(f"{metric:<12} {n * 1000:>8.1f}ms {m * 1000:>8.1f}ms {m / n:>7.1f}x")
    for metric in big["native"]:
        n, m = big["native"][metric], big["memfs"][metric]
        print(f"{metric:<18} native {n:>7.0f} MB/s  memfs {m:>7.0f} MB/s  memfs/native {m / n:.2f}")
    ms = {k: sorted(v) for k, v in mem.items()}

    def p(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1000

    print(f"memory-file 2 KiB append (open+write+close, indexed at close): p50 {p(ms['append'], .5):.1f} ms, "
          f"p95 {p(ms['append'], .95):.1f} ms")
    print(f"close() -> searchable by keyword: p50 {p(ms['keyword'], .5):.1f} ms, p95 {p(ms['keyword'], .95):.1f} ms")
    print(f"close() -> vector side embedded: p50 {p(ms['vector'], .5):.1f} ms, p95 {p(ms['vector'], .95):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
