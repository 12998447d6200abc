#!/usr/bin/env python3
"""Resident memory of 1, 3 and 5 mounts, with the per-user embedding service and without it.

    python scripts/bench_memory.py [--mounts 1,3,5] [--load 0]

Each mount is a workspace made from workspace_template/ plus one real LoCoMo conversation's
daily logs, mounted with `memfs mount`, fully embedded, then asked a `search/` question so the
query is embedded too.  Measured: the resident memory (VmRSS) of every memfs process summed (the
mounts' daemons and, with the service, the embedding service), and the proportional set size
(PSS, shared pages split between the processes that map them), for N mounts, and the ratio to
one mount measured in the same run.  The physical floor, measured in the same run: one bare
Python process with the model loaded and used (`model alone`), and one mount's daemon without
any model (`mount, no model`, from the service run).  With `embedding.service = false` (the
baseline) every mount loads its own model.

The service's runtime folder is private to this run (XDG_RUNTIME_DIR), so a service already
running for the user is neither used nor disturbed.  --load N runs N busy loops beside it all.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEV = ROOT.parent / "shared" / "bench" / "locomo-dev"
MEMFS = [sys.executable, "-m", "memfs"]
MODEL_ALONE = """
import sys
from memfs.index.embedding.providers import LocalProvider
p = LocalProvider()
p.embed([open(f).read()[:3000] for f in sys.argv[1:]] * 4)
for line in open('/proc/self/status'):
    if line.startswith('VmRSS'):
        print(line.split()[1])
"""


def busy() -> None:
    while True:
        pass


def rss_kb(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of a process in KiB."""
    rss = pss = 0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1])
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                pss = int(line.split()[1])
    except OSError:
        pass
    return rss, pss


def processes_under(base: Path) -> dict[int, str]:
    """memfs processes whose command line names a path under ``base`` (mounts name their
    workspace, the service its runtime folder)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        text = b" ".join(argv).decode(errors="replace")
        if str(base) in text and "memfs" in text:
            found[int(entry.name)] = "service" if "embedservice" in text else "mount"
    return found


def workspace(base: Path, index: int) -> Path:
    ws = base / f"ws{index}"
    shutil.copytree(ROOT / "workspace_template", ws)
    conv = sorted(p for p in DEV.iterdir() if p.is_dir())[index % 5]
    for day in sorted((conv / "memory").glob("*.md"))[:6]:
        shutil.copy(day, ws / "memory" / day.name)
    return ws


def wait_embedded(ws: Path, env: dict[str, str], timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        out = subprocess.run([*MEMFS, "status", "--json", "-w", str(ws)], env=env, capture_output=True, text=True)
        if out.returncode == 0 and json.loads(out.stdout).get("pending") == 0:
            return
        time.sleep(0.5)
    raise SystemExit(f"{ws} still has passages pending after {timeout} s")


def measure(base: Path, count: int, service: bool) -> dict[str, float]:
    run = base / f"{'svc' if service else 'own'}-{count}"
    run.mkdir()
    runtime = run / "rt"
    runtime.mkdir(mode=0o700)
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")},
           "MEMFS_STATE_DIR": str(run / "state"), "XDG_RUNTIME_DIR": str(runtime),
           "MEMFS_EMBEDDING_SERVICE": "true" if service else "false", "MEMFS_NO_DAEMON": "1"}
    mounts = []
    try:
        for i in range(count):
            ws, mnt = workspace(run, i), run / f"mnt{i}"
            mnt.mkdir()
            subprocess.run([*MEMFS, "mount", str(ws), str(mnt)], env=env, check=True, capture_output=True)
            mounts.append(mnt)
        for i, mnt in enumerate(mounts):
            wait_embedded(run / f"ws{i}", env)
            (mnt / "search" / "when did she go to the support group.md").read_text()
        time.sleep(1.0)
        procs = processes_under(run)
        sizes = {pid: rss_kb(pid) for pid in procs}
        mounts_only = [sizes[p] for p, kind in procs.items() if kind == "mount"]
        return {"rss_mb": sum(r for r, _ in sizes.values()) / 1024, "pss_mb": sum(p for _, p in sizes.values()) / 1024,
                "processes": len(procs), "mount_rss_mb": sum(r for r, _ in mounts_only) / 1024 / max(1, len(mounts_only))}
    finally:
        for mnt in mounts:
            subprocess.run([*MEMFS, "umount", str(mnt)], env=env, capture_output=True)
        for pid, kind in processes_under(run).items():
            if kind == "service":
                os.kill(pid, 15)


THROUGHPUT = """
import json, statistics, sys, time
from memfs.config import EmbeddingConfig
from memfs.index.embedding.choice import make_provider
texts = json.loads(open(sys.argv[1]).read())
service = make_provider(EmbeddingConfig())
here = make_provider(EmbeddingConfig(service=False))
service.embed(texts[:8]); here.embed(texts[:8])
out = {"here": [], "service": []}
for _ in range(3):
    for name, provider in (("here", here), ("service", service)):
        started = time.perf_counter()
        provider.embed(texts)
        out[name].append(len(texts) / (time.perf_counter() - started))
print(json.dumps({k: statistics.median(v) for k, v in out.items()}))
"""


def throughput(base: Path) -> dict[str, float]:
    """Texts per second embedded by the model in this process (the physical limit) and through
    the service, interleaved rounds of the same 256 real passages."""
    texts = []
    for day in sorted(DEV.glob("*/memory/*.md")):
        body = day.read_text()
        texts += [body[i : i + 1200] for i in range(0, len(body), 1200)]
    corpus = base / "texts.json"
    corpus.write_text(json.dumps(texts[:256]))
    runtime = base / "rt-throughput"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    try:
        out = subprocess.run([sys.executable, "-c", THROUGHPUT, str(corpus)], capture_output=True, text=True,
                             check=True, env=env)
    finally:
        for pid, kind in processes_under(runtime).items():
            if kind == "service":
                os.kill(pid, 15)
    return json.loads(out.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mounts", default="1,3,5")
    parser.add_argument("--load", type=int, default=0)
    args = parser.parse_args()
    counts = [int(c) for c in args.mounts.split(",")]
    loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for loop in loops:
        loop.start()
    base = Path(tempfile.mkdtemp(prefix="memfs-bench-mem-"))
    try:
        days = sorted((sorted(p for p in DEV.iterdir() if p.is_dir())[0] / "memory").glob("*.md"))[:6]
        alone = subprocess.run([sys.executable, "-c", MODEL_ALONE, *map(str, days)], capture_output=True, text=True,
                               check=True)
        model_mb = int(alone.stdout.split()[-1]) / 1024
        print(f"load {args.load}; model alone (one process, model loaded and used): {model_mb:.0f} MB RSS")
        rate = throughput(base)
        print(f"embedding 256 passages: {rate['here']:.1f} texts/s in this process (the model's own speed), "
              f"{rate['service']:.1f} through the service ({rate['service'] / rate['here']:.2f}x)")
        results = {}
        for service in (True, False):
            for count in counts:
                results[(service, count)] = measure(base, count, service)
        print(f"{'mounts':>6} | {'service: RSS MB':>15} {'x one':>6} {'PSS MB':>7} {'procs':>5} {'per mount':>9} | "
              f"{'own model: RSS MB':>17} {'x one':>6} {'PSS MB':>7}")
        for count in counts:
            s, o = results[(True, count)], results[(False, count)]
            s1, o1 = results[(True, counts[0])], results[(False, counts[0])]
            print(f"{count:>6} | {s['rss_mb']:>15.0f} {s['rss_mb'] / s1['rss_mb']:>6.2f} {s['pss_mb']:>7.0f} "
                  f"{s['processes']:>5} {s['mount_rss_mb']:>9.0f} | {o['rss_mb']:>17.0f} {o['rss_mb'] / o1['rss_mb']:>6.2f} "
                  f"{o['pss_mb']:>7.0f}")
        last = counts[-1]
        print(f"{last} mounts with the service use {results[(True, last)]['rss_mb'] / results[(False, last)]['rss_mb']:.2f}x "
              f"the memory of {last} mounts each with its own model")
    finally:
        for loop in loops:
            loop.terminate()
        shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
