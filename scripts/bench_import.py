#!/usr/bin/env python3
"""Issue #20's import case end to end, on a real mount with the real model: a ClawGPT sync file
and a session transcript of --mb MB each (real LoCoMo dialogue, scripts/bigwrites.py) copied into
a fresh workspace.

    python scripts/bench_import.py [--mb 30] [--kinds sync,session,md] [--load 0] [--every 10]

Reported: each copy's time (``cp`` returns once its close() has keyword-indexed the file) and
whether a word only its last line holds is found by ``memfs search`` right after; reads during the
backlog (``cat search/<new q>.md`` and ``stat`` of another, every --every seconds, with what the
status said was waiting); and the time until every passage has its vector, as indexed pieces of
text per second against the physical limit measured in the same run: the raw model
(LocalProvider in this process, no mount running) reading the same files' text packed into full
windows, in calls of 64, for about --raw-s seconds before the copies and again after the backlog.
The service the mount embeds through is the run's own (a private runtime folder), stopped at the
end.  ``--load N`` runs N busy loops beside it all.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_index  # noqa: E402
import bench_write  # noqa: E402

MEMFS = [sys.executable, "-m", "memfs"]


def raw_rate(texts: list[str], seconds: float) -> float:
    """Pieces of text per second the model alone reads, the texts packed into full windows."""
    from memfs.index.embedding.providers import LocalProvider
    from memfs.index.embedding.workratio import pieces

    model = LocalProvider()
    windows = bench_index._windows(texts, model.tokenizer, model.max_pieces - 2)
    model.embed(windows[:2])  # loaded and warm
    done, began = 0, time.perf_counter()
    while time.perf_counter() - began < seconds and done < len(windows):
        done += len(model.embed(windows[done : done + 64]))
    elapsed = time.perf_counter() - began
    return pieces(model.tokenizer, windows[:done]) / elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=int, default=30)
    parser.add_argument("--kinds", default="sync,session")
    parser.add_argument("--load", type=int, default=0)
    parser.add_argument("--every", type=float, default=10.0, help="seconds between reads during the backlog")
    parser.add_argument("--raw-s", type=float, default=20.0, help="seconds of the raw model, before and after")
    parser.add_argument("--dev", type=Path, default=bench_index.DEV)
    args = parser.parse_args()
    qs = bench_index.questions(args.dev)
    if not qs:
        raise SystemExit(f"no LoCoMo questions under {args.dev} (--dev)")

    from memfs.index.embedding.providers import LocalProvider
    from memfs.index.embedding.workratio import indexed_texts, pieces

    tmp = Path(tempfile.mkdtemp(prefix="memfs-import-"))
    runtime = tmp / "run"
    runtime.mkdir(mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)
    env = {**os.environ, "MEMFS_STATE_DIR": str(tmp / "state"), "MEMFS_DAEMON_ON_DEMAND": "false"}
    ws, mnt = tmp / "ws", tmp / "mnt"
    mnt.mkdir()
    busy = [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(args.load)]
    try:
        files: list[tuple[str, str, Path, str]] = []
        texts: list[str] = []
        for kind in args.kinds.split(","):
            # each round's text tagged, so the embedding cache answers for none of it
            rel, data, word = bench_write.made(kind, args.mb << 20, f"import{kind}", distinct=True)
            source = tmp / f"source-{kind}"
            source.write_bytes(data)
            files.append((kind, rel, source, word))
            texts += indexed_texts(rel, data.decode())
        indexed = pieces(LocalProvider().tokenizer, texts)
        raw_before = raw_rate(texts, args.raw_s)
        at_raw = indexed / raw_before
        print(f"{args.kinds} of {args.mb} MB each: {indexed} pieces of text to index; raw model "
              f"{raw_before:.0f} pieces/s (alone, before): {at_raw:.0f} s at its speed", flush=True)
        embedded_s, copied, first, cats, stats, longest = backlog(args, env, ws, mnt, files, qs, deadline=10 * at_raw)
        raw_after = raw_rate(texts, args.raw_s)
    finally:
        for process in busy:
            process.kill()
            process.wait()
        shutil.rmtree(tmp, ignore_errors=True)
    raw = statistics.median([raw_before, raw_after])
    print(f"copies: {copied:.1f} s in all; {first} passages waiting after them")
    if cats:
        print(f"reads during the backlog ({len(cats)} each): cat search/<new q>.md median {statistics.median(cats):.0f} "
              f"ms, max {max(cats):.0f}; stat median {statistics.median(stats):.0f} ms, max {max(stats):.0f}; the "
              f"longest wait for vectors of any read {longest:g} ms")
    if embedded_s is None:
        print(f"NOT fully embedded within {10 * at_raw:.0f} s (ten times the raw model's time)")
        return 1
    print(f"fully embedded {embedded_s:.0f} s after the first copy began: {indexed / embedded_s:.0f} indexed pieces/s; "
          f"raw model alone {raw_before:.0f} before, {raw_after:.0f} after: {indexed / embedded_s / raw:.2f} of it, "
          f"{args.load} busy loops beside")
    return 0


def backlog(args: argparse.Namespace, env: dict[str, str], ws: Path, mnt: Path,
            files: list[tuple[str, str, Path, str]], qs: list[str], deadline: float
            ) -> tuple[float | None, float, int, list[float], list[float], float]:
    """Mount, copy the files in, read during the backlog until it is done (or ``deadline`` s):
    (seconds until fully embedded or None, seconds of the copies, passages waiting after them,
    cat ms, stat ms, the longest wait for vectors of any read)."""
    mounted = False
    try:
        subprocess.run([*MEMFS, "init", str(ws)], env=env, check=True, capture_output=True)
        out = subprocess.run([*MEMFS, "mount", str(ws), str(mnt), "--set", "index.max_file_mb=100"], env=env,
                             capture_output=True, text=True)
        if out.returncode != 0:
            raise SystemExit(out.stderr)
        mounted = True
        (mnt / "memory" / "warm-up.md").write_text("# warm-up\n\nThe model is loaded.\n")
        while bench_index.pending(mnt):
            time.sleep(0.1)
        began = time.perf_counter()
        for kind, rel, source, word in files:
            (mnt / rel).parent.mkdir(parents=True, exist_ok=True)
            copy_s = bench_write.cp(source, mnt / rel)
            at = time.perf_counter()
            found = subprocess.run([*MEMFS, "search", "--json", word, "-w", str(ws)], env=env, capture_output=True,
                                   text=True)
            # a sync file's messages go to the day files of their dates: any result holding the word
            hit = found.returncode == 0 and bool(json.loads(found.stdout)["results"])
            mb = source.stat().st_size / 1e6
            print(f"  {kind}: {mb:.1f} MB copied in {copy_s:.2f} s ({mb / copy_s:.1f} MB/s); its last line found by "
                  f"keyword: {hit} ({(time.perf_counter() - at) * 1000:.0f} ms for `memfs search`)", flush=True)
        copied = time.perf_counter() - began
        cats: list[float] = []
        stats: list[float] = []
        first = waiting = bench_index.pending(mnt)
        while waiting and time.perf_counter() - began < deadline:
            q = qs[len(cats) % len(qs)] + f" ({len(cats)})"
            cats.append(bench_index.timed(["cat", str(mnt / "search" / f"{q}.md")])[0])
            stats.append(bench_index.timed(["stat", str(mnt / "search" / f"{q} (stat).md")])[0])
            print(f"  {time.perf_counter() - began:7.0f} s: {waiting} passages waiting; cat {cats[-1]:.0f} ms, "
                  f"stat {stats[-1]:.0f} ms", flush=True)
            until = time.perf_counter() + args.every
            while (waiting := bench_index.pending(mnt)) and time.perf_counter() < until:
                time.sleep(0.5)
        embedded_s = None if waiting else time.perf_counter() - began
        return embedded_s, copied, first, cats, stats, bench_index.renders(mnt)[1]
    finally:
        if mounted:
            subprocess.run([*MEMFS, "umount", str(mnt)], env=env, capture_output=True, check=False)
        try:
            bench_index._stop_service()
        except ProcessLookupError:
            pass


if __name__ == "__main__":
    sys.exit(main())
