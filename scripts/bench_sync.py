#!/usr/bin/env python3
"""Sync ingest throughput: 10,000 ClawGPT messages, half of them duplicates.

    python scripts/bench_sync.py [--messages 10000] [--batch 100]

The messages are real LoCoMo dialogue turns (with their own ids and timestamps), sent as
[CLAWGPT-SYNC] envelopes of --batch messages, every message twice (so half are duplicates).
Measured in one run: writing each envelope into clawgpt-memory/ on a memfs mount (validated,
deduplicated, routed, indexed at close; local provider), piping each through `memfs sync` (one
process per message, as an agent would) with no daemon and with `memfs serve` answering,
`memfs sync` in-process calls (no process start), and the baseline: appending the same
envelopes' lines to a file in a native directory.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from memfs.config import load_config
from memfs.memory import Memory

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo-dev"


def real_messages(dev: Path, n: int) -> list[dict]:
    out = []
    for path in sorted(dev.glob("conv-*/clawgpt-memory/*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    while len(out) < n:  # fewer real turns than asked: repeat them under new ids
        out += [{**m, "id": f"{m['id']}-r{len(out)}"} for m in out[: n - len(out)]]
    return out[:n]


def envelopes(messages: list[dict], batch: int) -> list[bytes]:
    half = messages[: len(messages) // 2]
    stream = half + half  # every id twice: half of all messages are duplicates
    random.Random(5).shuffle(stream)
    return [("[CLAWGPT-SYNC]\n" + json.dumps({"messages": stream[i : i + batch], "deviceId": "bench",
                                              "syncedAt": 0})).encode()
            for i in range(0, len(stream), batch)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--messages", type=int, default=10_000)
    parser.add_argument("--batch", type=int, default=100)
    parser.add_argument("--cli-batches", type=int, default=10, help="`memfs sync` processes to time")
    args = parser.parse_args()
    batches = envelopes(real_messages(args.dev, args.messages), args.batch)
    total = sum(b.count(b'"id"') for b in batches)
    tmp = Path(tempfile.mkdtemp(prefix="memfs-sbench-"))
    env = {**os.environ, "MEMFS_STATE_DIR": str(tmp / "state")}
    memfs = [sys.executable, "-m", "memfs"]
    results: dict[str, float] = {}
    try:
        native = tmp / "native"
        native.mkdir()
        started = time.perf_counter()
        for data in batches:
            lines = [json.dumps(m) for m in json.loads(data.split(b"\n", 1)[1])["messages"]]
            with open(native / "all.jsonl", "a") as f:
                f.write("\n".join(lines) + "\n")
        results["native append (no validation, no dedup)"] = total / (time.perf_counter() - started)

        ws, mnt = tmp / "ws", tmp / "mnt"
        (ws / "clawgpt-memory").mkdir(parents=True)
        mnt.mkdir()
        subprocess.run([*memfs, "mount", str(ws), str(mnt)], env=env, check=True, capture_output=True)
        try:
            started = time.perf_counter()
            for i, data in enumerate(batches):
                with open(mnt / "clawgpt-memory" / f"inbox-{i}", "wb") as f:
                    f.write(data)
            results["through the mount"] = total / (time.perf_counter() - started)
        finally:
            subprocess.run([*memfs, "umount", str(mnt)], env=env, capture_output=True)
        stored = sum(len(p.read_text().splitlines()) for p in (ws / "clawgpt-memory").glob("*.jsonl"))

        ws2 = tmp / "ws2"
        ws2.mkdir()
        memory = Memory(load_config(workspace=ws2, agent="cli", env={}, overrides=[("state_dir", str(tmp / "state"))]))
        started = time.perf_counter()
        for data in batches:
            memory.ingest_sync(data)
        results["Memory.ingest_sync in one process"] = total / (time.perf_counter() - started)
        memory.close()

        ws3 = tmp / "ws3"
        ws3.mkdir()
        chosen = batches[: args.cli_batches]
        count = sum(b.count(b'"id"') for b in chosen)
        started = time.perf_counter()
        for data in chosen:
            subprocess.run([*memfs, "sync", "-w", str(ws3)], input=data, env={**env, "MEMFS_NO_DAEMON": "1"},
                           check=True, capture_output=True)
        results[f"memfs sync, no daemon, a process per message ({args.batch}/message)"] = \
            count / (time.perf_counter() - started)

        ws4 = tmp / "ws4"
        ws4.mkdir()
        server = subprocess.Popen([*memfs, "serve", str(ws4)], env=env, stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline and not list((tmp / "state" / "run").glob("*.json")):
                time.sleep(0.1)
            started = time.perf_counter()
            for data in chosen:
                out = subprocess.run([*memfs, "-v", "sync", "-w", str(ws4)], input=data, env=env, check=True,
                                     capture_output=True)
                assert b"answered by the daemon" in out.stderr, out.stderr
            results[f"memfs sync, daemon up, a process per message ({args.batch}/message)"] = \
                count / (time.perf_counter() - started)
        finally:
            server.terminate()
            server.wait(timeout=60)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    base = results["native append (no validation, no dedup)"]
    print(f"{total} messages in {len(batches)} sync messages of {args.batch}; half are duplicates; "
          f"stored through the mount: {stored} (expected {total // 2})")
    for name, rate in results.items():
        print(f"{name:<55} {rate:>10.0f} messages/s  ({rate / base:.3f} of native)")
    return 0 if stored == total // 2 else 1


if __name__ == "__main__":
    sys.exit(main())
