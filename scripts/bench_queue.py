#!/usr/bin/env python3
"""What choosing a background call's passages costs as the backlog grows: the embedding queue's
"written lately" part (Store.pending_chunks with written_since), on a real index of a sync file,
a transcript and a daily log of --mb MB each (scripts/bench_import.py's data), nothing embedded.

    python scripts/bench_queue.py [--mb 1,3,10,30] [--runs 7]

Baseline in the same run: the query memfs used before, which sorted every waiting chunk by its
file's time; both must choose the same chunks in the same order.  Medians of --runs.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
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
    args = parser.parse_args()
    os.environ.setdefault("XDG_RUNTIME_DIR", tempfile.mkdtemp(prefix="memfs-queue-run-"))
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


if __name__ == "__main__":
    sys.exit(main())
