#!/usr/bin/env python3
"""What choosing a background call's passages costs as the backlog grows: the embedding queue's
"written lately" part (Store.pending_chunks with written_since), on a real index of a sync file,
a transcript and a daily log of --mb MB each (scripts/bench_import.py's data), nothing embedded.

    python scripts/bench_queue.py [--mb 1,3,10,30] [--runs 7]
    python scripts/bench_queue.py --files 100,1000,10000 [--runs 7]

Baseline in the same run: the query memfs used before, which sorted every waiting chunk by its
file's time; both must choose the same chunks in the same order.  Medians of --runs.

``--files``: the end of an import of many files (a sync file's messages go to the day files of
their dates: 742 of them for 30 MB of LoCoMo chats): N daily logs, every one embedded but the
oldest.  Baseline: probing each recent file for waiting chunks from Python, as memfs did before.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench_index  # noqa: E402
import bench_write  # noqa: E402

SORT_ALL = ("SELECT c.id, c.path, c.start_line, c.end_line, c.hash, c.text, c.jsonl FROM chunks c "
            "INDEXED BY chunks_pending CROSS JOIN files f ON f.path = c.path "
            "WHERE c.embedded = 0 AND f.mtime >= ? ORDER BY f.mtime DESC, c.id DESC LIMIT ?")
TAKE = 33  # what a call of 64 passages asks for (Indexer.embed_pending: take // 2 + 1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", default="1,3,10,30")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--files", default="", help="day files (the end of an import of many files)")
    args = parser.parse_args()
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="memfs-queue-run-"))
    if args.files:
        return many_files([int(x) for x in args.files.split(",")], args.runs)
    print(f"{'MB per file':>11} {'waiting chunks':>15} {'sort all, ms':>13} {'file by file, ms':>17} {'ratio':>7}")
    for mb in (int(x) for x in args.mb.split(",")):
        tmp = Path(tempfile.mkdtemp(prefix="memfs-queue-"))
        try:
            ws = tmp / "ws"
            for kind in ("sync", "session", "md"):
                rel, data, _ = bench_write.made(kind, mb << 20, f"queue{kind}", distinct=True)
                (ws / rel).parent.mkdir(parents=True, exist_ok=True)
                (ws / rel).write_bytes(data)
            memory = bench_index._memory(ws, "main", tmp / "state", **{"index.max_file_mb": "100",
                                                                         "embedding.service": "false"})
            memory.reconcile()
            store = memory.store
            waiting = store.conn.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]
            since = time.time() - 2 * 86400
            old, new = [], []
            for _ in range(args.runs):
                began = time.perf_counter()
                before = store.conn.execute(SORT_ALL, (since, TAKE)).fetchall()
                old.append(time.perf_counter() - began)
                began = time.perf_counter()
                now = store.pending_chunks(TAKE, written_since=since)
                new.append(time.perf_counter() - began)
            assert [r[0] for r in before] == [c.id for c in now], "the two queries chose differently"
            memory.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        a, b = statistics.median(old) * 1000, statistics.median(new) * 1000
        print(f"{mb:>11} {waiting:>15} {a:>13.1f} {b:>17.2f} {a / b:>6.0f}x", flush=True)
    return 0


def probed_one_by_one(store, since: float, limit: int) -> list[tuple]:
    """The baseline: every recent file probed for waiting chunks, from Python."""
    found: list[tuple] = []
    files = store.conn.execute("SELECT path FROM files WHERE mtime >= ? ORDER BY mtime DESC, path", (since,))
    for (path,) in files.fetchall():
        found += store.conn.execute("SELECT id FROM chunks INDEXED BY chunks_waiting WHERE path = ? AND embedded = 0 "
                                    "ORDER BY id DESC LIMIT ?", (path, limit - len(found))).fetchall()
        if len(found) >= limit:
            break
    return found


def many_files(counts: list[int], runs: int) -> int:
    print(f"{'day files':>10} {'one by one, ms':>15} {'in SQL, ms':>11} {'ratio':>7}")
    for count in counts:
        tmp = Path(tempfile.mkdtemp(prefix="memfs-queue-"))
        try:
            logs = tmp / "ws" / "memory"
            logs.mkdir(parents=True)
            first = 738000  # a date ordinal (2021-07-15): the files' days run on from it
            for n in range(count):
                day = date.fromordinal(first + n).isoformat()
                (logs / f"{day}.md").write_text(f"# {day}\n\n- Note {n}: the ferry leaves at nine.\n")
            memory = bench_index._memory(tmp / "ws", "main", tmp / "state", **{"embedding.service": "false"})
            memory.reconcile()
            store = memory.store
            oldest = store.conn.execute("SELECT path FROM files ORDER BY mtime, path LIMIT 1").fetchone()[0]
            store.conn.execute("UPDATE chunks SET embedded = 1 WHERE path != ?", (oldest,))
            since = time.time() - 2 * 86400
            old, new = [], []
            try:
                for _ in range(runs):
                    began = time.perf_counter()
                    before = probed_one_by_one(store, since, TAKE)
                    old.append(time.perf_counter() - began)
                    began = time.perf_counter()
                    now = store.pending_chunks(TAKE, written_since=since)
                    new.append(time.perf_counter() - began)
                assert [r[0] for r in before] == [c.id for c in now] and now, "the two chose differently"
            finally:
                memory.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
        a, b = statistics.median(old) * 1000, statistics.median(new) * 1000
        print(f"{count:>10} {a:>15.2f} {b:>11.2f} {a / b:>6.0f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
