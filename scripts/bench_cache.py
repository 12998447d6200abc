#!/usr/bin/env python3
"""The embedding cache as it grows: bytes per entry, what status pays to count it, and a lookup
by key, at --sizes entries (an import of 30+30 MB of chats makes ~500k).

    python scripts/bench_cache.py [--sizes 10000,100000,300000] [--runs 7]

Baseline in the same run: the cache as memfs made it before (SQLite's 4 KB pages, counted
through the table, read through SQLite's page cache); the other side is ``Store`` as it opens a
new cache now.  Physical limit beside: the entries' own bytes (the vector, the key), and a
plain ``read`` of the cache file from the kernel's page cache.  Medians of --runs; each count
from a connection that has just seen another connection write (as a mount's status follows its
embedder's writes).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
from benchdata import median_ms

MODEL = "all-MiniLM-L6-v2-int8+once"
DIMS = 384
OLD_TABLE = ("CREATE TABLE IF NOT EXISTS embedding_cache(provider TEXT NOT NULL, model TEXT NOT NULL, "
             "hash TEXT NOT NULL, dims INTEGER NOT NULL, vector BLOB NOT NULL, created_at REAL NOT NULL, "
             "PRIMARY KEY(provider, model, hash)) WITHOUT ROWID")


def rows(begin: int, end: int) -> list[tuple]:
    vector = os.urandom(DIMS * 4)
    return [("local", MODEL, hashlib.sha256(str(i).encode()).hexdigest(), DIMS, vector, time.time())
            for i in range(begin, end)]


def fill(conn: apsw.Connection, table: str, size: int) -> None:
    for begin in range(0, size, 2000):
        with conn:
            conn.executemany(f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?)", rows(begin, min(size, begin + 2000)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000,300000")
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    from memfs.index.storage.sqlite.store import Store

    print(f"{'entries':>8} | {'bytes/entry':>11} {'before':>7} {'limit':>6} | {'count ms':>8} {'before':>7} "
          f"{'read file':>9} | {'lookup of 64 ms':>15} {'before':>7}")
    for size in (int(x) for x in args.sizes.split(",")):
        tmp = Path(tempfile.mkdtemp(prefix="memfs-cache-"))
        try:
            old_path = tmp / "old.embcache.sqlite"
            old = apsw.Connection(str(old_path))
            old.execute("PRAGMA page_size=4096")
            old.execute("PRAGMA journal_mode=WAL")
            old.execute(OLD_TABLE)
            fill(old, "embedding_cache", size)
            old.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            store = Store(tmp / "new.sqlite", tmp / "new.embcache.sqlite")
            fill(store.conn, "cache.embedding_cache", size)
            store.conn.execute("PRAGMA cache.wal_checkpoint(TRUNCATE)")
            new_path = tmp / "new.embcache.sqlite"
            writer = apsw.Connection(str(new_path))  # another connection's write, before each count
            old_writer = apsw.Connection(str(old_path))
            extra = iter(range(size, size + 10 * args.runs))

            def touch(conn: apsw.Connection, table: str) -> None:
                conn.execute(f"INSERT INTO {table} VALUES (?, ?, ?, ?, ?, ?)", rows(next(extra), next(extra) + 1)[0])

            def count_new() -> None:
                touch(writer, "embedding_cache")
                store.counts()["cached_embeddings"]

            def count_old() -> None:
                touch(old_writer, "embedding_cache")
                old.execute("SELECT count(*) FROM embedding_cache").fetchone()

            def read_file() -> None:
                with open(new_path, "rb") as f:
                    while f.read(1 << 20):
                        pass

            new_count = median_ms(count_new, args.runs)
            old_count = median_ms(count_old, args.runs)
            raw_read = median_ms(read_file, args.runs)
            keys = [hashlib.sha256(str(i).encode()).hexdigest() for i in range(0, size, max(1, size // 64))][:64]
            new_lookup = median_ms(lambda: store.cached_vectors("local", MODEL, keys), args.runs)
            marks = ",".join("?" * len(keys))
            old_lookup = median_ms(lambda: old.execute(f"SELECT hash, vector FROM embedding_cache WHERE provider = ? AND "
                                                   f"model = ? AND hash IN ({marks})", ("local", MODEL, *keys)).fetchall(),
                               args.runs)
            entries = store.counts()["cached_embeddings"]
            new_bytes = sum(p.stat().st_size for p in tmp.glob("new.embcache.sqlite*")) / entries
            old_bytes = sum(p.stat().st_size for p in tmp.glob("old.embcache.sqlite*")) / entries
            own = DIMS * 4 + 64 + len(MODEL) + len("local") + 8 + 8
            print(f"{size:>8} | {new_bytes:>11.0f} {old_bytes:>7.0f} {own:>6} | {new_count:>8.2f} {old_count:>7.2f} "
                  f"{raw_read:>9.2f} | {new_lookup:>15.2f} {old_lookup:>7.2f}", flush=True)
            for conn in (writer, old_writer, old):
                conn.close()
            store.close()
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
