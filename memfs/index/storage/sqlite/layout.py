"""The SQLite index's layout: its tables' versions and indexes, the columns its queries read, its
connection (sqlite-vec loaded, WAL, memory-mapped), and the small helpers every part of the store
shares (:mod:`memfs.index.storage.sqlite.store` and its mixins)."""

from __future__ import annotations

import importlib.util
import logging
import os
from collections.abc import Callable
from pathlib import Path

import apsw

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.index.storage.records import (
    JSONL_KINDS_SQL,
    PROVISIONAL_HASH,
)
from memfs.index.storage.sharedwork import SharedWork
from memfs.index.storage.sqlite.unitrows import HASH_SQL, TEXT_SQL, ChunkLines, pack_hash
from memfs.index.storage.vectors import VectorMatrix, pack_unit_vector
from memfs.index.text.keywords import FTS_TOKENIZER
from memfs.userdirs import private_file

log = logging.getLogger(__name__)


SCHEMA_VERSION = "8"  # 2: private chunks apart; 3: units; 4: warnings, appends to JSONL re-chunk the tail;
# 5: a unit's reading (twins of facts); 6: a JSONL chunk's chat (id and title); 7: a unit's text as a
# span of its chunk's, its hash as bytes (memfs.index.storage.sqlite.unitrows), which an index of 6 gets when opened;
# 8: chunk vectors packed as units' are, in a plain table (chunk_vectors, not sqlite-vec's float32
# chunks_vec), and the index is the embedding cache of what it holds (memfs.index.storage.sqlite.reuse).
# An index of 7 keeps its layout, and is served as it is, until `memfs index --rebuild` makes it anew.
LEGACY_SCHEMA = "7"
SERVED_SCHEMAS = (LEGACY_SCHEMA, SCHEMA_VERSION)
CACHE_PAGE = 16_384  # bytes a page of a new embedding cache (see Store.__init__)
# From this many vectors on, KNN runs on an in-memory matrix instead of sqlite-vec's scan (at 1k
# chunks sqlite-vec's KNN and exact similarities took ~5 ms a search, the matrix 0.1 ms; loading
# it reads 1.5 MB).  Below, a one-shot process would read every vector for a search or two.
MATRIX_MIN_VECTORS = 1_000
VEC_KNN_MAX = 4096  # sqlite-vec's largest k
# The keyword index keeps no copy of the text it indexes (contentless: chunks.text is the text;
# search reads only rowids and bm25, never the body), which saved ~1.9 KB of ~17 KB per chunk.
# Rows are still deleted one by one (contentless_delete, SQLite 3.43+).  An index made with a
# content table answers the same SQL, so it keeps working as it is.
FTS_OPTIONS = f"tokenize='{FTS_TOKENIZER}', content='', contentless_delete=1"


def _varint(data: bytes) -> int | None:
    """SQLite's variable-length integer at the start of ``data`` (FTS5 records use it)."""
    value = 0
    for position, byte in enumerate(data[:9]):
        if position == 8:
            return (value << 8) | byte
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value
    return None



# chunks.embedded of a provisional chunk (0: waiting for its vector, 1: has it): a big write's
# keyword rows, there until its exact chunks replace them (memfs.index.bigwrites); never embedded.
PROVISIONAL = 2
# The files whose chunks are provisional, oldest first; every search asks (to say a big write is
# still being chunked).  Literal, so SQLite uses the partial index files_provisional (a scan of
# every file cost ~4-7 ms a search at 100k chunks, ~6,000 files here).
_PROVISIONAL = f"substr(hash, 1, {len(PROVISIONAL_HASH)}) = '{PROVISIONAL_HASH}'"
_PROVISIONAL_FILES = f"SELECT path FROM files WHERE {_PROVISIONAL}{{scope}} ORDER BY indexed_at"
# The same files with the lines their provisional chunks hold, and whether they are JSONL (what a
# search needs for the estimate of the passages they will add: memfs.index.embedding.backlog.still_to_chunk).
_PROVISIONAL_LINES = (f"SELECT path, kind IN ({JSONL_KINDS_SQL}), (SELECT coalesce(sum(c.end_line - c.start_line + 1), 0) "
                      f"FROM chunks c WHERE c.path = f.path AND c.embedded = {PROVISIONAL}) "
                      f"FROM files f WHERE {_PROVISIONAL}{{scope}} ORDER BY indexed_at")

_LATE_INDEXES = {
    "chunks_day": "CREATE INDEX IF NOT EXISTS chunks_day ON chunks(last_day)",
    # A file's waiting chunks, the last first: the embedding queue's "written lately" part
    # (pending_chunks) reads a few of them per call instead of sorting every waiting chunk.
    "chunks_waiting": "CREATE INDEX IF NOT EXISTS chunks_waiting ON chunks(path, id) WHERE embedded = 0",
    "files_problems": "CREATE INDEX IF NOT EXISTS files_problems ON files(path) WHERE error != '' OR warning != ''",
    "files_provisional": f"CREATE INDEX IF NOT EXISTS files_provisional ON files(indexed_at) WHERE {_PROVISIONAL}",
}
# What status counts the embedding cache by: the table's own b-tree holds the vectors (WITHOUT
# ROWID), and a count read every one (~50 ms at 200k entries, twice a second under a progress
# display while the model waited on the store's lock); 10 ms at 300k through this, mapped
# (scripts/bench_cache.py: 79 ms before). On ``dims``, which a
# row holds before its vector: building it on a cache made before reads no overflow page.
_CACHE_INDEXES = {
    "embedding_cache_counted": "CREATE INDEX IF NOT EXISTS cache.embedding_cache_counted ON embedding_cache(dims)",
}


# The cache of an index of schema 8: vectors the index does not hold (a text read for a heading, a
# passage since edited away), packed as the index keeps its own (``dims + 4`` bytes), the hash as
# its 32 bytes.  Beside, not in, ``embedding_cache`` (float32, every vector made), which an index of
# schema 7 keeps using: the cache file is shared by every workspace of its user, and an earlier
# memfs reading a packed vector there as float32 would store a wrong one.
VECTOR_CACHE = """CREATE TABLE IF NOT EXISTS cache.vector_cache(
    provider TEXT NOT NULL, model TEXT NOT NULL, hash BLOB NOT NULL, vector BLOB NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY(provider, model, hash)) WITHOUT ROWID"""
LEGACY_CACHE = """CREATE TABLE IF NOT EXISTS cache.embedding_cache(
    provider TEXT NOT NULL, model TEXT NOT NULL, hash TEXT NOT NULL,
    dims INTEGER NOT NULL, vector BLOB NOT NULL, created_at REAL NOT NULL,
    PRIMARY KEY(provider, model, hash)) WITHOUT ROWID"""
# Finding a vector the index holds by its text's hash (schema 8; an index of 7 gets them when a
# rebuild reads its vectors): on the hash's first 8 bytes (16 hex digits of a chunk's hash), a
# third of the size of an index of the whole hash, and only of the rows that have a vector.
HASH_INDEXES = {
    "chunks_hash": "CREATE INDEX IF NOT EXISTS chunks_hash ON chunks(substr(hash, 1, 16)) WHERE embedded = 1",
    "units_hash": "CREATE INDEX IF NOT EXISTS units_hash ON units(substr(hash, 1, 8)) WHERE vector IS NOT NULL",
}
# The write-ahead logs of the index and its cache cut back to this after a checkpoint: a 30 MB
# import left 52 MB of WAL beside the index and 32 MB beside the cache for as long as the mount ran
# (SQLite keeps a WAL at its largest size unless told).
JOURNAL_LIMIT = 4 << 20

_INDEX_TABLES = frozenset({"meta", "files", "chunks", "chunks_fts", "chunks_fts_vocab", "units", "private_fts",
                           "private_fts_vocab"})


class StoreError(RuntimeError):
    pass




def _nearest(matrix: VectorMatrix, query: Callable[[], np.ndarray | None], k: int,
             include_private: bool, share: SharedWork) -> tuple[np.ndarray | None, list[tuple[int, float]]]:
    vector = query()
    return vector, ([] if vector is None else matrix.knn(vector, k, include_private, share))


# A unit row as StoredUnit holds it: its text from its chunk's (a span) or its own (see
# memfs.index.storage.sqlite.unitrows); read with ``units u CROSS JOIN chunks c ON c.id = u.chunk_id``.
_UNIT_COLUMNS = f"u.id, u.chunk_id, u.start_line, u.end_line, {HASH_SQL}, {TEXT_SQL}, u.context, u.vector, u.reading"
# The same with the hash as stored, for StoredUnit.from_rows: SQLite's lower(hex()) took a third of
# reading a search's ~900 units (1.1 of 3.0 ms for 480 at 100k chunks), bytes.hex() a few us.
_UNITS_AS_STORED = f"u.id, u.chunk_id, u.start_line, u.end_line, u.hash, {TEXT_SQL}, u.context, u.vector, u.reading"
# The same with the span in place of the text, for a reader that has the chunks' texts.
_UNITS_WITH_SPANS = ("u.id, u.chunk_id, u.start_line, u.end_line, u.hash, u.text, u.context, u.vector, u.reading, "
                     "u.text_start, u.text_end, u.text_gaps")


def _unit_row(lines: ChunkLines | None, chunk_id: int, start_line: int, end_line: int, digest: str, text: str,
              context: str, vector: bytes | None, reading: str) -> tuple[object, ...]:
    """A unit's row from ``chunk_id`` on: its text as a span of its chunk's when it is one."""
    span = lines.span(start_line, end_line, text) if lines is not None else None
    return (chunk_id, start_line, end_line, pack_hash(digest), "" if span else text, context, vector, reading,
            *(span or (None, None, 0)))




half = pack_unit_vector  # a unit's float32 vector as units.vector stores it (the name is from float16 days)



def _vec0_path() -> str:
    """The sqlite-vec extension the package ships, found without importing the package (its
    __init__ imports numpy, which reading commands never need)."""
    spec = importlib.util.find_spec("sqlite_vec")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("sqlite-vec is not installed: pip install sqlite-vec")
    return os.path.join(list(spec.submodule_search_locations)[0], "vec0")

# The index file is read through a memory map as large as the file (SQLite maps at most this much):
# a search reads FTS5's posting lists and its candidates' rows straight from the kernel's page
# cache instead of copying each page through SQLite's 2 MB page cache (at 100k chunks the keyword
# side took 15.6-18.9 ms read by pread, 10.5-11.5 ms mapped).  The mapped pages are the kernel's
# page cache, counted in the process's RSS as file pages (RssFile) while it touches them, and given
# back under memory pressure like any cached file.  The cost: a disk error while reading a mapped
# page ends the process (SIGBUS) where a read would have failed with EIO; the index is a local file
# (WAL mode already needs one).  The embedding cache (attached as ``cache``) is mapped too: status
# counts its entries, which through SQLite's page cache re-read each page of its index (31-44 ms
# at 326k entries, twice a second under a progress display), 5.5-9 ms mapped.
MMAP_BYTES = 1 << 40


def _connect(path: Path) -> apsw.Connection:
    private_file(path)  # the index holds MEMORY.md's text: this user's alone (its -wal and -shm follow)
    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    conn.load_extension(_vec0_path())
    conn.enable_load_extension(False)
    conn.setbusytimeout(10_000)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"PRAGMA main.journal_size_limit={JOURNAL_LIMIT}")
    conn.execute(f"PRAGMA main.mmap_size={MMAP_BYTES}")
    return conn
