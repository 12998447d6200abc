#!/usr/bin/env python3
"""What keeping every version of the memory files costs, on real mounts, in one run.

    python scripts/bench_history.py [--ops 200] [--appends 1000] [--load 0]

1. Cost per memory-file close, history on vs off (two mounts of the same kind of workspace, the
   one with ``--set history.enabled=false`` the baseline): open/append 2 KiB/close on a 60 KB
   daily log, and open/rewrite whole/close of a 20 KB MEMORY.md.  Medians of --ops; --load N
   runs N busy loops beside it all.
2. Storage over --appends appends of 2 KiB to one daily log: the history's content bytes and
   its SQLite file, against the log's own size; and, measured the same way, what a git
   repository's object store would hold for the same versions (``git hash-object -w`` of each,
   loose objects as git writes them before a gc), the alternative the issue names.
3. ``cat history/...`` latency: open+read of a version through the mount (the newest of the
   1,000-append log, at the end of its chain; a MEMORY.md rewrite), against reading the live
   file through the same mount, and ``cat`` as a new process.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

MEMFS = [sys.executable, "-m", "memfs"]


def busy() -> None:
    while True:
        pass


def mount(ws: Path, mnt: Path, env: dict[str, str], *extra: str) -> None:
    out = subprocess.run([*MEMFS, "mount", str(ws), str(mnt), "--set", "embedding.provider=none", *extra],
                         env=env, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(out.stderr)


def umount(mnt: Path, env: dict[str, str]) -> None:
    subprocess.run([*MEMFS, "umount", str(mnt)], env=env, capture_output=True)


def workspace(root: Path) -> Path:
    ws = root / "ws"
    (ws / "memory").mkdir(parents=True)
    line = "- the ferry to Hydra leaves at 09:15 from Piraeus gate E8, bring the blue bag\n"
    (ws / "memory" / "2026-11-22.md").write_text(line * (60_000 // len(line)))
    (ws / "MEMORY.md").write_text("# Memory\n" + line * (20_000 // len(line)))
    return ws


def close_costs(mnt: Path, ops: int) -> dict[str, float]:
    log, memory_md = mnt / "memory" / "2026-11-22.md", mnt / "MEMORY.md"
    chunk = ("- appended note " + "x" * 2000 + "\n").encode()
    rewrite = memory_md.read_bytes()
    append_s, rewrite_s = [], []
    for i in range(ops):
        started = time.perf_counter()
        with open(log, "ab") as handle:
            handle.write(chunk)
        append_s.append(time.perf_counter() - started)
        body = rewrite.replace(b"09:15", f"{i % 24:02d}:15".encode(), 1)
        started = time.perf_counter()
        with open(memory_md, "wb") as handle:
            handle.write(body)
        rewrite_s.append(time.perf_counter() - started)
        if i % 50 == 49:  # keep the log near 60 KB: the cost asked for is at that size
            with open(log, "r+b") as handle:
                handle.truncate(60_000)
    return {"append 2 KiB to a 60 KB log": statistics.median(append_s),
            "rewrite a 20 KB MEMORY.md": statistics.median(rewrite_s)}


def timed_reads(path: Path, times: int = 30) -> tuple[float, float]:
    """(median open+read in this process, median ``cat`` as a new process) of ``path``."""
    reads, cats = [], []
    for _ in range(times):
        started = time.perf_counter()
        path.read_bytes()
        reads.append(time.perf_counter() - started)
    for _ in range(max(5, times // 3)):
        started = time.perf_counter()
        subprocess.run(["cat", str(path)], stdout=subprocess.DEVNULL, check=True)
        cats.append(time.perf_counter() - started)
    return statistics.median(reads), statistics.median(cats)


def memory_md_reads(mnt: Path) -> dict[str, tuple[float, float]]:
    """A MEMORY.md version from the middle of the rewrites, against the live file."""
    folder = mnt / "history" / "MEMORY.md"
    names = sorted(p for p in os.listdir(folder) if p != "diff")
    return {"version": timed_reads(folder / names[len(names) // 2]), "live": timed_reads(mnt / "MEMORY.md")}


def git_objects_bytes(versions: list[bytes], root: Path) -> int:
    repo = root / "git"
    subprocess.run(["git", "init", "-q", "--bare", str(repo)], check=True)
    for data in versions:
        subprocess.run(["git", "--git-dir", str(repo), "hash-object", "-w", "--stdin"], input=data,
                       check=True, capture_output=True)
    return sum(p.stat().st_size for p in (repo / "objects").rglob("*") if p.is_file())


def storage(root: Path, appends: int, env: dict[str, str]) -> dict[str, float]:
    ws = root / "grow"
    (ws / "memory").mkdir(parents=True)
    mnt = root / "grow-mnt"
    mnt.mkdir()
    mount(ws, mnt, env)
    log = mnt / "memory" / "2026-11-22.md"
    versions = []
    text = b""
    try:
        for i in range(appends):
            chunk = f"\n## {i % 24:02d}:{i % 60:02d} - entry {i}\n".encode() + os.urandom(700).hex().encode()[:2000] + b"\n"
            with open(log, "ab") as handle:
                handle.write(chunk)
            text += chunk
            versions.append(text)
        listed = sorted(p for p in os.listdir(mnt / "history" / "memory" / "2026-11-22.md") if p != "diff")
        newest = mnt / "history" / "memory" / "2026-11-22.md" / listed[-1]
        reads = []
        for _ in range(30):
            started = time.perf_counter()
            data = newest.read_bytes()
            reads.append(time.perf_counter() - started)
        assert data == text, "the newest version is not the log"
        live = []
        for _ in range(30):
            started = time.perf_counter()
            log.read_bytes()
            live.append(time.perf_counter() - started)
        cat = []
        for _ in range(10):
            started = time.perf_counter()
            subprocess.run(["cat", str(newest)], stdout=subprocess.DEVNULL, check=True)
            cat.append(time.perf_counter() - started)
    finally:
        umount(mnt, env)
    from memfs.config import load_config
    from memfs.memory import Memory

    memory = Memory(load_config(workspace=ws, agent="main", env={}, overrides=[
        ("state_dir", env["MEMFS_STATE_DIR"]), ("embedding.provider", "none")]))
    try:
        history = memory.history
        assert history is not None
        content = history.store.size_bytes()
        history.store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        on_disk = history.store.file_bytes()
        kept = len(history.versions("memory/2026-11-22.md"))
    finally:
        memory.close()
    git = git_objects_bytes(versions, root)
    return {"log": len(text), "content": content, "file": on_disk, "git": git, "kept": kept,
            "read_newest": statistics.median(reads), "read_live": statistics.median(live),
            "cat_newest": statistics.median(cat)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ops", type=int, default=200)
    parser.add_argument("--appends", type=int, default=1000)
    parser.add_argument("--load", type=int, default=0, help="busy loops running beside the benchmark")
    args = parser.parse_args()
    loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for loop in loops:
        loop.start()
    root = Path(tempfile.mkdtemp(prefix="memfs-bench-history-"))
    env = {**os.environ, "MEMFS_STATE_DIR": str(root / "state")}
    try:
        costs = {}
        for label, extra in (("off", ("--set", "history.enabled=false")), ("on", ())):
            base = root / label
            ws = workspace(base)
            mnt = base / "mnt"
            mnt.mkdir()
            mount(ws, mnt, env, *extra)
            try:
                costs[label] = close_costs(mnt, args.ops)
                if label == "on":
                    memory_md = memory_md_reads(mnt)
            finally:
                umount(mnt, env)
        grown = storage(root, args.appends, env)
    finally:
        for loop in loops:
            loop.terminate()
        shutil.rmtree(root, ignore_errors=True)

    print(f"{args.load} busy loops beside; medians of {args.ops} operations")
    print(f"{'close of a memory file':<30} {'history off':>12} {'history on':>12} {'ratio':>7}")
    for metric in costs["off"]:
        off, on = costs["off"][metric], costs["on"][metric]
        print(f"{metric:<30} {off * 1000:>10.2f}ms {on * 1000:>10.2f}ms {on / off:>6.2f}x")
    version, live = memory_md["version"], memory_md["live"]
    print(f"cat history/MEMORY.md/<version> (20 KB, stored whole): open+read {version[0] * 1000:.2f} ms vs the live "
          f"file {live[0] * 1000:.2f} ms ({version[0] / live[0]:.1f}x); `cat` as a new process "
          f"{version[1] * 1000:.1f} ms vs {live[1] * 1000:.1f} ms ({version[1] / live[1]:.2f}x)")
    log = grown["log"]
    print(f"{args.appends} appends of 2 KiB to one daily log ({log / 1e6:.2f} MB at the end, "
          f"{grown['kept']} versions kept):")
    print(f"  history content {grown['content'] / 1e6:.2f} MB = {grown['content'] / log:.2f}x the log; "
          f"its SQLite file {grown['file'] / 1e6:.2f} MB = {grown['file'] / log:.2f}x")
    print(f"  git objects for the same versions {grown['git'] / 1e6:.1f} MB = {grown['git'] / log:.1f}x the log")
    print(f"read the newest version (a chain of {args.appends}) through history/: "
          f"{grown['read_newest'] * 1000:.2f} ms; the live file through the mount {grown['read_live'] * 1000:.2f} ms "
          f"({grown['read_newest'] / grown['read_live']:.1f}x); `cat` as a new process {grown['cat_newest'] * 1000:.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
