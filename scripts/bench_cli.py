#!/usr/bin/env python3
"""The CLI as a new process in four situations, and how long unmounting takes.

    python scripts/bench_cli.py [--runs 10] [--load 0]

Measured in one run, medians of --runs: wall time of the `memfs` console script (`memfs --help`,
`status`, `search <q>`, `get`, `context`, `history`, `index`, `sync < msg`) as new processes:
  first      nothing set up, no daemon running: the command starts one on demand (it is stopped
             again after each run, so every run is a first call)
  later      nothing set up, after a first call: the daemon it started answers
  mount up   a mount of the workspace answers
  no daemon  `--no-daemon`: the command answers in its own process (the baseline: each other
             column is also printed as a ratio to it)
and of one MCP `memory_search` round trip (a client session already open, as an agent has it;
its own process keeps the index when nothing else does).  `python -c pass`, the floor of any
Python command here, is measured in the same run.  Then `memfs umount`, median and max of --runs
mounts, with nothing pending and right after a 2,000-line write (its passages still waiting for
embeddings).  --load N runs N busy loops beside it all.

The workspace is one real LoCoMo conversation (its daily logs), indexed before timing.
"""

from __future__ import annotations

import argparse
import json
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
# The console script, as a user runs it (`python -m memfs` takes the same way in: memfs.quickcli).
SCRIPT = Path(sys.executable).parent / "memfs"
MEMFS = [str(SCRIPT)] if SCRIPT.exists() else [sys.executable, "-m", "memfs"]
HEAVY = ("click", "pydantic", "numpy")
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


def commands(ws: Path, *extra: str) -> dict[str, tuple[list[str], bytes | None]]:
    day = sorted((ws / "memory").glob("*.md"))[0].relative_to(ws).as_posix()
    return {
        "--help": ([*MEMFS, *extra, "--help"], None),
        "status": ([*MEMFS, *extra, "status", "-w", str(ws)], None),
        "search": ([*MEMFS, *extra, "search", "when did she go to the support group", "-w", str(ws)], None),
        "get": ([*MEMFS, *extra, "get", day, "--lines", "40", "-w", str(ws)], None),
        "context": ([*MEMFS, *extra, "context", "-w", str(ws)], None),
        "history": ([*MEMFS, *extra, "history", "MEMORY.md", "-w", str(ws)], None),
        "index": ([*MEMFS, *extra, "index", "-w", str(ws)], None),
        "sync < msg": ([*MEMFS, *extra, "sync", "-w", str(ws)], b""),
    }


def heavy_imports(argv: list[str], env: dict[str, str]) -> list[str]:
    """The heavy modules a command imports (none, when the daemon answers its fast path)."""
    out = subprocess.run([sys.executable, "-X", "importtime", *argv] if argv[0] == str(SCRIPT)
                         else [argv[0], "-X", "importtime", *argv[1:]], env=env, capture_output=True, text=True)
    names = {line.rsplit("|", 1)[1].strip() for line in out.stderr.splitlines() if line.startswith("import time:")}
    return sorted({name.split(".")[0] for name in names if name.split(".")[0] in HEAVY})


def settle(ws: Path, env: dict[str, str]) -> None:
    """Wait until the daemon has embedded what the runs before left pending (the first calls'
    and --no-daemon's syncs): a steady state, not its start-up work, is what the columns compare."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        out = subprocess.run([*MEMFS, "status", "--json", "-w", str(ws)], env=env, capture_output=True, text=True)
        if out.returncode == 0 and json.loads(out.stdout)["pending"] == 0:
            return
        time.sleep(0.5)


def stop_daemons(ws: Path, env: dict[str, str]) -> None:
    from memfs.serve import ondemand

    ondemand.stop(ws.resolve(), "main", env)


def time_commands(ws: Path, env: dict[str, str], runs: int, *extra: str, first: bool = False) -> dict[str, float]:
    """Medians per command; ``first``: no daemon before each run (the one it starts is stopped)."""
    out = {}
    for name, (argv, data) in commands(ws, *extra).items():
        samples = []
        for i in range(runs):
            if first:
                stop_daemons(ws, env)
            payload = (SYNC % (time.time_ns() + i, i)).encode() if data is not None else None
            samples.append(wall(argv, env, payload))
        out[name] = statistics.median(samples)
    if first:
        stop_daemons(ws, env)
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
    # As installed: pip compiles a wheel's modules, an editable install (and a checkout edited
    # since) would compile them again in every command when PYTHONDONTWRITEBYTECODE is set.
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(__file__).resolve().parent.parent / "memfs")],
                   check=False, capture_output=True)
    loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for loop in loops:
        loop.start()
    tmp = Path(tempfile.mkdtemp(prefix="memfs-clibench-"))
    ws, mnt = tmp / "ws", tmp / "mnt"
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    env["MEMFS_STATE_DIR"] = str(tmp / "state")
    try:
        shutil.copytree(sorted(args.dev.glob("conv-*"))[0] / "memory", ws / "memory")
        (ws / "MEMORY.md").write_text("# Memory\n- The user is allergic to penicillin.\n")
        mnt.mkdir()
        subprocess.run([*MEMFS, "index", "--no-daemon", "-w", str(ws)], env=env, check=True, capture_output=True)
        floor = statistics.median(wall([sys.executable, "-c", "pass"], env) for _ in range(args.runs))

        alone = time_commands(ws, env, args.runs, "--no-daemon")
        first = time_commands(ws, env, args.runs, first=True)
        wall([*MEMFS, "status", "-w", str(ws)], env)  # starts the daemon the later calls ask
        settle(ws, env)
        later = time_commands(ws, env, args.runs)
        fast_path = {name: heavy_imports(commands(ws)[name][0], env) for name in ("status", "search", "get",
                                                                                  "context")}
        stop_daemons(ws, env)
        mcp_alone = mcp_round_trip(ws, env, args.runs)
        mount(ws, mnt, env)
        try:
            settle(ws, env)
            mounted = time_commands(ws, env, args.runs)
            mcp_mounted = mcp_round_trip(ws, env, args.runs)
        finally:
            subprocess.run([*MEMFS, "umount", str(mnt)], env=env, capture_output=True)
        idle = umount_times(ws, mnt, env, args.runs, pending=False)
        busy_umount = umount_times(ws, mnt, env, args.runs, pending=True)
    finally:
        for loop in loops:
            loop.terminate()
        stop_daemons(ws, env)
        subprocess.run(["fusermount3", "-u", "-z", str(tmp / "mnt")], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"medians of {args.runs}, {args.load} busy loops beside; `python -c pass`: {floor * 1000:.0f} ms; "
          "ratios against --no-daemon")
    print(f"{'command':<12} {'first':>14} {'later':>14} {'mount up':>14} {'no daemon':>10}")
    for name in alone:
        cells = " ".join(f"{col[name] * 1000:>6.0f}ms {col[name] / alone[name]:>4.2f}x" for col in (first, later, mounted))
        print(f"{name:<12} {cells} {alone[name] * 1000:>8.0f}ms")
    print("later calls import " + "; ".join(f"{name}: {', '.join(mods) or 'no click, pydantic nor numpy'}"
                                            for name, mods in fast_path.items()))
    print(f"MCP memory_search round trip: {mcp_alone * 1000:.0f} ms (no daemon: the MCP server keeps the index), "
          f"{mcp_mounted * 1000:.0f} ms (mount up)")
    print(f"memfs umount, nothing pending:     median {statistics.median(idle) * 1000:.0f} ms, "
          f"max {max(idle) * 1000:.0f} ms")
    print(f"memfs umount, right after a write: median {statistics.median(busy_umount) * 1000:.0f} ms, "
          f"max {max(busy_umount) * 1000:.0f} ms (what was pending is embedded at the next start)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
