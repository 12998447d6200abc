#!/usr/bin/env python3
"""The CLI as a new process, with a mount of the workspace up (a daemon answers) and without, and
how long unmounting takes.

    python scripts/bench_cli.py [--runs 10] [--load 0]

Measured in one run, medians of --runs: wall time of `memfs --help`, `status`, `search <q>`,
`get`, `context`, `sync < msg` as new processes, and of one MCP `memory_search` round trip (a
client session already open, as an agent has it); the baseline is `python -c pass` measured in
the same run (the floor of any Python command here), printed as a ratio.  Then `memfs umount`,
median and max of --runs mounts, with nothing pending and right after a 2,000-line write (its
passages still waiting for embeddings).  --load N runs N busy loops beside it all.

The workspace is one real LoCoMo conversation (its daily logs), indexed before timing.
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

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo-dev"
MEMFS = [sys.executable, "-m", "memfs"]
SYNC = ('[CLAWGPT-SYNC] {"messages": [{"id": "bench-%d", "chatId": "c1", "chatTitle": "Bench", "role": "user", '
        '"content": "Remember the ferry to Hydra, run %d", "timestamp": 1793613600000}]}')


def busy() -> None:
    while True:
        pass


def wall(argv: list[str], env: dict[str, str], input: bytes | None = None) -> float:
    started = time.perf_counter()
    out = subprocess.run(argv, env=env, input=input, capture_output=True)
    took = time.perf_counter() - started
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed: {out.stderr.decode(errors='replace')[-400:]}")
    return took


def commands(ws: Path) -> dict[str, tuple[list[str], bytes | None]]:
    day = sorted((ws / "memory").glob("*.md"))[0].relative_to(ws).as_posix()
    return {
        "--help": ([*MEMFS, "--help"], None),
        "status": ([*MEMFS, "status", "-w", str(ws)], None),
        "search": ([*MEMFS, "search", "when did she go to the support group", "-w", str(ws)], None),
        "get": ([*MEMFS, "get", day, "--lines", "40", "-w", str(ws)], None),
        "context": ([*MEMFS, "context", "-w", str(ws)], None),
        "sync < msg": ([*MEMFS, "sync", "-w", str(ws)], b""),
    }


def time_commands(ws: Path, env: dict[str, str], runs: int) -> dict[str, float]:
    out = {}
    for name, (argv, data) in commands(ws).items():
        samples = []
        for i in range(runs):
            payload = (SYNC % (time.time_ns() + i, i)).encode() if data is not None else None
            samples.append(wall(argv, env, payload))
        out[name] = statistics.median(samples)
    return out


def mcp_round_trip(ws: Path, env: dict[str, str], runs: int) -> float:
    import anyio
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "memfs", "mcp", "-w", str(ws)], env=env)
    samples: list[float] = []

    async def main() -> None:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    await session.call_tool("memory_search", {"query": "warm up"})
                    for _ in range(runs):
                        started = time.perf_counter()
                        result = await session.call_tool("memory_search", {"query": "when did she go to the support group"})
                        samples.append(time.perf_counter() - started)
                        assert not result.is_error

    anyio.run(main)
    return statistics.median(samples)


def mount(ws: Path, mnt: Path, env: dict[str, str]) -> None:
    subprocess.run([*MEMFS, "mount", str(ws), str(mnt)], env=env, check=True, capture_output=True)


def umount_times(ws: Path, mnt: Path, env: dict[str, str], runs: int, pending: bool) -> list[float]:
    samples = []
    for i in range(runs):
        mount(ws, mnt, env)
        time.sleep(1.0)  # settled: reconciliation done, nothing pending
        if pending:
            lines = "".join(f"## 11:{n % 60:02d}\nRun {i}, note {n}: the draft mentions item {n * 7}.\n"
                            for n in range(2000))
            (mnt / "memory" / f"2030-01-{i + 1:02d}.md").write_text(lines)
        samples.append(wall([*MEMFS, "umount", str(mnt)], env))
        if pending:
            (ws / "memory" / f"2030-01-{i + 1:02d}.md").unlink()
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--load", type=int, default=0, help="busy loops running beside the benchmark")
    args = parser.parse_args()
    loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for loop in loops:
        loop.start()
    tmp = Path(tempfile.mkdtemp(prefix="memfs-clibench-"))
    try:
        ws, mnt = tmp / "ws", tmp / "mnt"
        shutil.copytree(sorted(args.dev.glob("conv-*"))[0] / "memory", ws / "memory")
        (ws / "MEMORY.md").write_text("# Memory\n- The user is allergic to penicillin.\n")
        mnt.mkdir()
        env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
        env["MEMFS_STATE_DIR"] = str(tmp / "state")
        subprocess.run([*MEMFS, "index", "-w", str(ws)], env=env, check=True, capture_output=True)
        floor = statistics.median(wall([sys.executable, "-c", "pass"], env) for _ in range(args.runs))

        cold = time_commands(ws, env, args.runs)
        cold["MCP memory_search"] = mcp_round_trip(ws, env, args.runs)
        mount(ws, mnt, env)
        try:
            warm = time_commands(ws, env, args.runs)
            warm["MCP memory_search"] = mcp_round_trip(ws, env, args.runs)
        finally:
            subprocess.run([*MEMFS, "umount", str(mnt)], env=env, capture_output=True)
        idle = umount_times(ws, mnt, env, args.runs, pending=False)
        busy_umount = umount_times(ws, mnt, env, args.runs, pending=True)
    finally:
        for loop in loops:
            loop.terminate()
        subprocess.run(["fusermount3", "-u", "-z", str(tmp / "mnt")], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"medians of {args.runs}, {args.load} busy loops beside; `python -c pass`: {floor * 1000:.0f} ms")
    print(f"{'command':<20} {'no daemon':>10} {'ratio':>6} {'mount up':>10} {'ratio':>6}")
    for name in cold:
        print(f"{name:<20} {cold[name] * 1000:>8.0f}ms {cold[name] / floor:>5.1f}x {warm[name] * 1000:>8.0f}ms "
              f"{warm[name] / floor:>5.1f}x")
    print(f"memfs umount, nothing pending:     median {statistics.median(idle) * 1000:.0f} ms, "
          f"max {max(idle) * 1000:.0f} ms")
    print(f"memfs umount, right after a write: median {statistics.median(busy_umount) * 1000:.0f} ms, "
          f"max {max(busy_umount) * 1000:.0f} ms (what was pending is embedded at the next start)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
