#!/usr/bin/env python3
"""Big writes through a real mount: how fast a large memory file is copied in and keyword-indexed
before close() returns, and what an append to a large transcript costs.

    python scripts/bench_write.py [--sizes 1,10,30] [--runs 3] [--load 0] [--kinds sync,session,md]

For each kind (a ClawGPT sync file ``clawgpt-memory/YYYY-MM-DD.jsonl``, a session transcript
``sessions/x.jsonl``, a daily log ``memory/YYYY-MM-DD.md``) and size, made from real LoCoMo text
(scripts/bigwrites.py), a fresh workspace is mounted and the file is copied in with ``cp``; the
time is until ``cp`` returns (its close() returns after the file is indexed), then a real search
(``memfs search``, another process) must find a word that only the file's last line holds.  The
baseline, in the same mount and run: ``cp`` of the same bytes to a file that is not memory.
Then 1 KiB appends (open, write, close) to a transcript of each size: the time and the bytes the
daemon read (``rchar`` of /proc/<pid>/io) per append.  Medians of --runs; ``--load N`` runs N
busy loops beside it all.  Embedding is off (``embedding.provider=none``) so the background
embedder does not compete with the copies; keyword indexing is what close() waits for.
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bigwrites  # noqa: E402

MEMFS = [sys.executable, "-m", "memfs"]
MARK = "Xylophonist"


def busy() -> None:
    while True:
        pass


def made(kind: str, size: int, tag: str, distinct: bool = False) -> tuple[str, bytes, str]:
    """(path in the workspace, bytes, a word only the last line holds).  ``distinct``: each
    round's text tagged (bigwrites), so no text repeats within the file."""
    word = f"{MARK}{tag}"
    if kind == "sync":
        data = bigwrites.sync_lines(size, tag=tag, distinct=distinct)
        last = json.loads(data.rstrip(b"\n").rsplit(b"\n", 1)[-1])
        extra = {**last, "id": f"{last['id']}-last", "content": f"The {word} played at the end."}
        return "clawgpt-memory/2023-05-08.jsonl", data + json.dumps(extra).encode() + b"\n", word
    if kind == "session":
        data = bigwrites.transcript(size, distinct=distinct)
        extra = {"type": "message", "id": "last", "message": {"role": "user", "content": f"The {word} again."}}
        return "sessions/import.jsonl", data + json.dumps(extra).encode() + b"\n", word
    data = bigwrites.daily_log(size)
    return "memory/2023-05-08.md", data + f"The {word} closed the day.\n".encode(), word


class Mount:
    def __init__(self, root: Path, name: str, env: dict[str, str]) -> None:
        self.ws, self.mnt, self.env = root / f"ws-{name}", root / f"mnt-{name}", env
        for folder in ("memory", "sessions", "clawgpt-memory", "other"):
            (self.ws / folder).mkdir(parents=True)
        self.mnt.mkdir()
        out = subprocess.run([*MEMFS, "mount", str(self.ws), str(self.mnt), "--set", "embedding.provider=none",
                              "--set", "index.max_file_mb=100"], env=env, capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(out.stderr)
        self.pid = next(json.loads(p.read_text())["pid"] for p in (Path(env["MEMFS_STATE_DIR"]) / "mounts").glob("*.json")
                        if json.loads(p.read_text())["mountpoint"] == str(self.mnt))

    def close(self) -> None:
        subprocess.run([*MEMFS, "umount", str(self.mnt)], env=self.env, capture_output=True)

    def found(self, word: str) -> list[str]:
        out = subprocess.run([*MEMFS, "search", "--json", word, "-w", str(self.ws)], env=self.env,
                             capture_output=True, text=True)
        return [r["path"] for r in json.loads(out.stdout)["results"]] if out.returncode == 0 else []

    def cpu(self) -> float:
        """The daemon's user and system CPU seconds so far."""
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def settled(self) -> None:
        """Wait until no big write's exact chunks are owed (an older memfs owes none)."""
        while True:
            out = subprocess.run([*MEMFS, "status", "--json", "-w", str(self.ws)], env=self.env,
                                 capture_output=True, text=True)
            if out.returncode != 0 or not json.loads(out.stdout).get("provisional"):
                return
            time.sleep(0.2)

    def rchar(self) -> int:
        for line in Path(f"/proc/{self.pid}/io").read_text().splitlines():
            if line.startswith("rchar:"):
                return int(line.split()[1])
        return 0


def cp(source: Path, target: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["cp", str(source), str(target)], check=True)
    return time.perf_counter() - started


def copies(root: Path, env: dict[str, str], kinds: list[str], sizes: list[int], runs: int) -> list[dict]:
    rows = []
    for kind in kinds:
        for size in sizes:
            times, base, found = [], [], True
            cpus: list[float] = []
            full: list[float] = []
            full_cpus: list[float] = []
            for run in range(runs):
                rel, data, word = made(kind, size << 20, f"{kind[0]}{size}r{run}")
                source = root / "source"
                source.write_bytes(data)
                mount = Mount(root, f"{kind}-{size}-{run}", env)
                try:
                    base.append(cp(source, mount.mnt / "other" / f"plain-{run}.bin"))
                    before = mount.cpu()
                    started = time.perf_counter()
                    times.append(cp(source, mount.mnt / rel))
                    cpus.append(mount.cpu() - before)
                    found = found and bool(mount.found(word))
                    mount.settled()
                    full.append(time.perf_counter() - started)
                    full_cpus.append(mount.cpu() - before)
                finally:
                    mount.close()
                    shutil.rmtree(mount.ws, ignore_errors=True)
            mb = len(data) / 1e6
            rows.append({"kind": kind, "MB": round(mb, 1), "copy_s": statistics.median(times),
                         "MB_per_s": mb / statistics.median(times), "plain_copy_s": statistics.median(base),
                         "plain_MB_per_s": mb / statistics.median(base), "last_line_found": found,
                         "daemon_cpu_s": statistics.median(cpus), "cpu_s_per_MB": statistics.median(cpus) / mb,
                         "fully_indexed_s": statistics.median(full), "fully_indexed_cpu_s": statistics.median(full_cpus),
                         "loadavg_1m": os.getloadavg()[0]})
            print(json.dumps(rows[-1]), flush=True)
    return rows


def appends(root: Path, env: dict[str, str], sizes: list[int], runs: int) -> list[dict]:
    rows = []
    mount = Mount(root, "appends", env)
    try:
        for size in sizes:
            target = mount.mnt / "sessions" / f"t{size}.jsonl"
            target.write_bytes(bigwrites.transcript(size << 20))
            piece = bigwrites.session_records(1024, start_round=900)
            times, read = [], []
            for _ in range(max(runs, 5)):
                before = mount.rchar()
                started = time.perf_counter()
                with open(target, "ab") as out:
                    out.write(piece)
                times.append(time.perf_counter() - started)
                read.append(mount.rchar() - before)
            rows.append({"transcript_MB": size, "append_bytes": len(piece), "append_ms": statistics.median(times) * 1000,
                         "daemon_bytes_read": int(statistics.median(read))})
            print(json.dumps(rows[-1]), flush=True)
    finally:
        mount.close()
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1,10,30", help="MB, comma-separated")
    parser.add_argument("--kinds", default="sync,session,md")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--load", type=int, default=0, help="busy loops running beside it all")
    parser.add_argument("--no-appends", action="store_true")
    parser.add_argument("--no-copies", action="store_true")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for loop in loops:
        loop.start()
    root = Path(tempfile.mkdtemp(prefix="memfs-wbench-"))
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")},
           "MEMFS_STATE_DIR": str(root / "state"), "MEMFS_DAEMON_ON_DEMAND": "false"}
    try:
        rows = [] if args.no_copies else copies(root, env, args.kinds.split(","), sizes, args.runs)
        append_rows = [] if args.no_appends else appends(root, env, sizes, args.runs)
    finally:
        for loop in loops:
            loop.terminate()
        shutil.rmtree(root, ignore_errors=True)
    # The machine's load average beside the result: wall times on a shared machine say little
    # without it; the daemon's CPU seconds until close() returned say more.
    loadavg = " ".join(f"{x:.2f}" for x in os.getloadavg())
    print(f"\nload {args.load}, medians of {args.runs}; load average now {loadavg}")
    print(f"{'kind':<8} {'MB':>6} {'copy s':>8} {'MB/s':>7} {'daemon cpu s':>13} {'plain s':>8} {'plain MB/s':>11} found")
    for r in rows:
        print(f"{r['kind']:<8} {r['MB']:>6} {r['copy_s']:>8.2f} {r['MB_per_s']:>7.2f} {r['daemon_cpu_s']:>13.2f} "
              f"{r['plain_copy_s']:>8.3f} {r['plain_MB_per_s']:>11.0f} {r['last_line_found']}")
    for r in append_rows:
        print(f"append {r['append_bytes']} B to a {r['transcript_MB']} MB transcript: {r['append_ms']:.1f} ms, "
              f"daemon read {r['daemon_bytes_read']:,} bytes")
    return 0 if all(r["last_line_found"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
