"""The SQLite index of one (workspace, agent): files, chunks, FTS5 keyword index, sqlite-vec
vectors, and the embedding cache (a separate attached file, so it survives rebuilds of the index).

Chunks of private files (see :mod:`memfs.privacy`) live in their own FTS5 table and their own
partition of the vector table.  A shared search reads only the public ones, so private text
cannot shift its scores either: BM25's term statistics (how rare a word is, how long chunks
are) are those of the public chunks alone.

Only this module writes SQL.  All access goes through one connection guarded by a lock, so the
FUSE daemon's threads and the indexing worker can share a store; other processes (the CLI) read
concurrently through WAL.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import apsw

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.index.storage.records import (
    PROVISIONAL_HASH,
    SCOPED_EXACT,
    CachedVector,
    FileRecord,
    FileRows,
    StoredChunk,
    StoredUnit,
)
from memfs.index.storage.sharedwork import SharedWork, run_shared
from memfs.index.storage.sqlite import topk
from memfs.index.storage.sqlite.unitrows import HASH_SQL, TEXT_SQL, ChunkLines, hash_forms, pack_hash, text_at
from memfs.index.storage.vectors import VectorMatrix, pack_unit_vector
from memfs.index.text.chunking import Chunk
from memfs.index.text.keywords import FTS_TOKENIZER, fts_body, match_expression, phrase_tokens
from memfs.userdirs import private_file
from memfs.workspace import FileKind

log = logging.getLogger(__name__)

_KINDS = {kind.value for kind in FileKind}
_JSONL_KINDS = ", ".join(f"'{kind.value}'" for kind in FileKind if kind.is_jsonl)  # for SQL

SCHEMA_VERSION = "7"  # 2: private chunks apart; 3: units; 4: warnings, appends to JSONL re-chunk the tail;
# 5: a unit's reading (twins of facts); 6: a JSONL chunk's chat (id and title); 7: a unit's text as a
# span of its chunk's, its hash as bytes (memfs.index.storage.sqlite.unitrows), which an index of 6 gets when opened
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
_PROVISIONAL_LINES = (f"SELECT path, kind IN ({_JSONL_KINDS}), (SELECT coalesce(sum(c.end_line - c.start_line + 1), 0) "
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


_INDEX_TABLES = frozenset({"meta", "files", "chunks", "chunks_fts", "chunks_fts_vocab", "units", "private_fts",
                           "private_fts_vocab"})


class StoreError(RuntimeError):
    pass


_FILE_COLUMNS = ("path, kind, hash, mtime, size, chunks, error, private, warning, tail_hash, resume_line, "
                 "resume_offset")


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


def _file_record(row: tuple) -> FileRecord:
    return FileRecord(*row[:7], bool(row[7]), *row[8:])


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
    conn.execute(f"PRAGMA main.mmap_size={MMAP_BYTES}")
    return conn


class Store:
    """One index file (``path``) plus its embedding cache (``cache_path``): the SQLite
    :class:`memfs.index.storage.interface.IndexStore`."""

    backend = "sqlite"
    sees_private = True  # a file of its user's: every row of the index

    def __init__(self, path: Path, cache_path: Path, migrate: bool = True) -> None:
        """``migrate``: an index of an earlier schema that can be brought up to date in place is
        (see :meth:`_migrate`); False when another process may be reading it (Memory knows), and
        it is then ``outdated`` as any earlier index."""
        path.parent.mkdir(parents=True, exist_ok=True)
        self.path = path
        self.cache_path = cache_path
        self.lock = threading.RLock()
        self.conn = _connect(path)
        self._has_vectors = False
        self._writes = 0  # bumped by every transaction of this connection
        self._depth = 0  # transactions open on this connection (a batch holds one)
        self._total: tuple[tuple[int, int], tuple[int, int]] | None = None
        self._vocabulary: tuple[object, dict[tuple[str, str], int]] = (None, {})
        private_file(cache_path)
        self.conn.execute("ATTACH DATABASE ? AS cache", (str(cache_path),))
        # A new cache's pages hold its vectors whole: at 4 KB a 1.6 KB entry of the WITHOUT ROWID
        # table kept 1 KB in its page and the rest on an overflow page of its own (4.8 KB an
        # entry: 1.6 GB at 326k entries, 60% into a 30+30 MB import); 2.2 KB at 16 KB. A cache made before keeps its
        # pages (WAL mode cannot change them). Only for an empty file: the pragma stays with
        # the connection, and a VACUUM of the index would take it too.
        if self.conn.execute("PRAGMA cache.page_count").fetchone()[0] == 0:
            self.conn.execute(f"PRAGMA cache.page_size={CACHE_PAGE}")
        self.conn.execute("PRAGMA cache.journal_mode=WAL")
        self.conn.execute(f"PRAGMA cache.mmap_size={MMAP_BYTES}")
        if migrate:
            self._migrate()
        # An index made by an earlier version is only read until it is rebuilt (Memory does).
        self.outdated = self._schema_found() not in (None, SCHEMA_VERSION)
        if not self.outdated:
            self._create_schema()
            self._day_index()
        self._matrix: VectorMatrix | None = None
        self._matrix_version = -1
        self._knn_pool: ThreadPoolExecutor | None = None  # see nearest_later

    @property
    def location(self) -> str:
        """Where the index is, to tell a person: its file."""
        return str(self.path)

    def close(self) -> None:
        with self.lock:
            if self._knn_pool is not None:
                self._knn_pool.shutdown(wait=True)
                self._knn_pool = None
            self.conn.close()

    # -- schema and metadata -------------------------------------------------------------------

    def _schema_found(self) -> str | None:
        with self.lock:
            if self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone() is None:
                return None
            row = self.conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        return None if row is None else str(row[0])

    def _migrate(self) -> None:
        """Schema 6 to 7 in place (three columns; no row is rewritten, so opening a large index
        stays instant): its unit rows keep their text and hex hashes, which are read as they
        are, and rows written from now on are compact (see :mod:`memfs.index.storage.sqlite.unitrows`).  Only
        with nobody else using the index: a running process of the earlier memfs would read a
        compact row's text as empty."""
        if self._schema_found() != "6":
            return
        with self._writing():
            if self._schema_found() != "6":
                return  # another process migrated it while this one waited for the lock
            columns = {str(r[1]) for r in self.conn.execute("PRAGMA main.table_info(units)")}
            for column, kind in (("text_start", "INTEGER"), ("text_end", "INTEGER"),
                                 ("text_gaps", "INTEGER NOT NULL DEFAULT 0")):
                if column not in columns:
                    self.conn.execute(f"ALTER TABLE units ADD COLUMN {column} {kind}")
            self.conn.execute("UPDATE meta SET value = '7' WHERE key = 'schema'")

    @contextmanager
    def _writing(self) -> Iterator[apsw.Connection]:
        """A write transaction that takes the write lock at once (BEGIN IMMEDIATE): two mounts of
        one workspace write the same index, and a transaction that began as a reader could not
        become a writer once the other one wrote (SQLITE_BUSY_SNAPSHOT, no waiting); this one
        waits for the lock (the busy timeout) instead."""
        with self.lock:
            if self._depth:  # inside a batch (see batch()): part of its transaction
                yield self.conn
                return
            self.conn.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self.conn
            except BaseException:
                self.conn.execute("ROLLBACK")
                raise
            finally:
                self._depth -= 1
            self.conn.execute("COMMIT")

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Many changes as one transaction: a sync batch's hundreds of day files are one commit
        (one flush of the keyword index's segments, not one each, which cost more than the rows)."""
        with self._writing():
            yield

    def settle(self) -> None:
        """The file self-contained (its WAL folded in, no journal beside it), before a rebuild
        swaps it in for the index in use."""
        with self.lock:
            self.conn.execute("PRAGMA main.wal_checkpoint(TRUNCATE)")
            self.conn.execute("PRAGMA main.journal_mode=DELETE")

    def _schema_ready(self) -> bool:
        """Whether every table is there already (read without a write lock, so opening an index
        never waits on a busy, or stopped, writer)."""
        main = {r[0] for r in self.conn.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
        cache = {r[0] for r in self.conn.execute("SELECT name FROM cache.sqlite_master WHERE type = 'table'")}
        return (_INDEX_TABLES <= main and "embedding_cache" in cache
                and self._schema_found() == SCHEMA_VERSION and self.get_meta("generation") is not None)

    def _create_schema(self) -> None:
        if self._schema_ready():
            return
        with self._writing():
            self.conn.execute(
                f"""
                CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
                CREATE TABLE IF NOT EXISTS files(
                    path TEXT PRIMARY KEY, kind TEXT NOT NULL, hash TEXT NOT NULL,
                    mtime REAL NOT NULL, size INTEGER NOT NULL, chunks INTEGER NOT NULL,
                    error TEXT NOT NULL DEFAULT '', indexed_at REAL NOT NULL,
                    private INTEGER NOT NULL DEFAULT 0, warning TEXT NOT NULL DEFAULT '',
                    tail_hash TEXT NOT NULL DEFAULT '', resume_line INTEGER NOT NULL DEFAULT 0,
                    resume_offset INTEGER NOT NULL DEFAULT 0);
                CREATE TABLE IF NOT EXISTS chunks(
                    id INTEGER PRIMARY KEY, path TEXT NOT NULL, start_line INTEGER NOT NULL,
                    end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL,
                    embedded INTEGER NOT NULL DEFAULT 0, private INTEGER NOT NULL DEFAULT 0,
                    jsonl INTEGER NOT NULL DEFAULT 0, first_day TEXT, last_day TEXT,
                    chat_id TEXT NOT NULL DEFAULT '', chat_title TEXT NOT NULL DEFAULT '');
                CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path, start_line);
                CREATE INDEX IF NOT EXISTS chunks_pending ON chunks(id) WHERE embedded = 0;
                CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts USING fts5(body, {FTS_OPTIONS});
                CREATE VIRTUAL TABLE IF NOT EXISTS chunks_fts_vocab USING fts5vocab(chunks_fts, row);
                CREATE TABLE IF NOT EXISTS units(
                    id INTEGER PRIMARY KEY, chunk_id INTEGER NOT NULL, start_line INTEGER NOT NULL,
                    end_line INTEGER NOT NULL, hash TEXT NOT NULL, text TEXT NOT NULL,
                    context TEXT NOT NULL DEFAULT '', vector BLOB, reading TEXT NOT NULL DEFAULT '',
                    text_start INTEGER, text_end INTEGER, text_gaps INTEGER NOT NULL DEFAULT 0);
                CREATE INDEX IF NOT EXISTS units_chunk ON units(chunk_id);
                CREATE INDEX IF NOT EXISTS units_pending ON units(id) WHERE vector IS NULL;
                CREATE VIRTUAL TABLE IF NOT EXISTS private_fts USING fts5(body, {FTS_OPTIONS});
                CREATE VIRTUAL TABLE IF NOT EXISTS private_fts_vocab USING fts5vocab(private_fts, row);
                CREATE TABLE IF NOT EXISTS cache.embedding_cache(
                    provider TEXT NOT NULL, model TEXT NOT NULL, hash TEXT NOT NULL,
                    dims INTEGER NOT NULL, vector BLOB NOT NULL, created_at REAL NOT NULL,
                    PRIMARY KEY(provider, model, hash)) WITHOUT ROWID;
                INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '{SCHEMA_VERSION}');
                INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', '0');
                """
            )

    def _day_index(self) -> None:
        """Indexes added after schema 6 (an index of an earlier memfs gets them here, without a
        rebuild): ``chunks_day`` finds recent passages for the embedding queue; ``files_problems``
        the few files with an error or a warning, which every search reads (at 100k chunks a
        scan of every file cost ~3 ms a search); ``files_provisional`` the files still being
        chunked, which every search asks for too; ``chunks_waiting`` a file's waiting chunks for
        the embedding queue's "written lately" part; and the cache's ``_CACHE_INDEXES``, which a
        cache shared with a busy writer, or read-only, goes without (status then counts it
        slowly) rather than keep the index from opening."""
        with self.lock:
            have = {str(r[0]) for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' UNION "
                                                          "SELECT name FROM cache.sqlite_master WHERE type = 'index'")}
        missing = [sql for name, sql in _LATE_INDEXES.items() if name not in have]
        if missing:
            with self._writing():
                for sql in missing:
                    self.conn.execute(sql)
        for name, sql in _CACHE_INDEXES.items():
            if name not in have:
                try:
                    with self._writing():
                        self.conn.execute(sql)
                except (apsw.BusyError, apsw.ReadOnlyError, apsw.CantOpenError) as exc:
                    log.info("embedding cache %s: index %s not made (%s); status counts it by reading it",
                             self.cache_path, name, exc)

    def get_meta(self, key: str) -> str | None:
        with self.lock:
            row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._writing():
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    @property
    def fingerprint(self) -> dict[str, object] | None:
        raw = self.get_meta("fingerprint")
        return None if raw is None else json.loads(raw)

    def set_fingerprint(self, fingerprint: dict[str, object], dims: int) -> None:
        """Record what built this index and create the vector table for ``dims``."""
        with self._writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('fingerprint', ?)",
                (json.dumps(fingerprint, sort_keys=True),),
            )
            if dims:
                self.conn.execute(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING "
                    f"vec0(private integer partition key, embedding float[{int(dims)}] distance_metric=cosine)"
                )

    @property
    def has_vectors(self) -> bool:
        if self._has_vectors:
            return True  # the vector table, once created, stays for the life of the file
        with self.lock:
            row = self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_vec'").fetchone()
        self._has_vectors = row is not None
        return self._has_vectors

    @property
    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    @property
    def content_generation(self) -> int:
        """Bumped by changes of text (files indexed, moved, removed), not by vectors arriving: a
        reader may reuse a rendering made a moment ago while only vectors came in."""
        return int(self.get_meta("content_generation") or 0)

    @contextmanager
    def transaction(self, vectors_only: bool = False) -> Iterator[apsw.Connection]:
        """One atomic change; bumps the generation so readers know the index moved (and the
        content generation, unless it only adds vectors)."""
        with self._writing():
            self._writes += 1
            yield self.conn
            self.conn.execute(
                "UPDATE meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'generation'"
            )
            if not vectors_only:
                self.conn.execute(
                    "INSERT INTO meta(key, value) VALUES ('content_generation', '1') "
                    "ON CONFLICT(key) DO UPDATE SET value = CAST(value AS INTEGER) + 1")

    # -- files ---------------------------------------------------------------------------------

    def file(self, path: str) -> FileRecord | None:
        with self.lock:
            row = self.conn.execute(
                f"SELECT {_FILE_COLUMNS} FROM files WHERE path = ?", (path,)).fetchone()
        return None if row is None else _file_record(row)

    def paths_under(self, rel: str) -> list[str]:
        """Indexed paths equal to ``rel`` or below it (a range scan on the primary key; '0' is
        the character after '/')."""
        with self.lock:
            rows = self.conn.execute(
                "SELECT path FROM files WHERE path = ? OR (path >= ? AND path < ?) ORDER BY path",
                (rel, rel + "/", rel + "0"),
            ).fetchall()
        return [str(r[0]) for r in rows]

    def problem_files(self) -> dict[str, tuple[str, str]]:
        """path -> (why it is not indexed, what was wrong with it) for every file with either."""
        with self.lock:
            rows = self.conn.execute("SELECT path, error, warning FROM files WHERE error != '' OR warning != ''")
            return {str(r[0]): (str(r[1]), str(r[2])) for r in rows}

    def public_paths(self) -> list[str]:
        with self.lock:
            return [str(r[0]) for r in self.conn.execute("SELECT path FROM files WHERE private = 0")]

    def files(self) -> list[FileRecord]:
        with self.lock:
            rows = self.conn.execute(f"SELECT {_FILE_COLUMNS} FROM files ORDER BY path").fetchall()
        return [_file_record(r) for r in rows]

    def replace_file(
        self,
        record: FileRecord,
        chunks: list[Chunk],
        chunk_hashes: list[str],
        fts_bodies: list[str],
        cached: dict[str, bytes],
        unit_hashes: list[list[str]] | None = None,
        days: list[tuple[str | None, str | None]] | None = None,
        from_line: int | None = None,
        provisional: bool = False,
    ) -> int:
        """Swap a file's chunks (and their units) for new ones in one transaction; returns how
        many still need an embedding (those whose text hash is not in ``cached``).  ``days``:
        each chunk's first and last date (None for undated text).  With ``from_line``, only the
        chunks starting at or after that line are replaced (an append to a JSONL file).
        ``provisional``: chunks cut by :func:`memfs.index.text.chunking.provisional`, the file's own
        lines (a JSONL file's too), stored for the keyword index only: never embedded, no unit
        rows (:meth:`units_of` reads their lines as units)."""
        pending = 0
        private = int(record.private)
        jsonl = int(FileKind(record.kind).is_jsonl) if record.kind in _KINDS and not provisional else 0
        state = PROVISIONAL if provisional else None
        fts = "private_fts" if private else "chunks_fts"
        with self.transaction() as conn:
            if from_line is None:
                self._delete_chunks(conn, record.path)
            else:
                self._delete_chunks(conn, record.path, from_line)
            vec = self.has_vectors
            # Rows go in by executemany, with the ids SQLite itself would give (the largest plus
            # one): a 30 MB file is some 30k chunks and 300k units, and a statement per row cost
            # more than all the rest of indexing it.
            first_id = int(conn.execute("SELECT COALESCE(MAX(id), 0) FROM chunks").fetchone()[0]) + 1
            chunk_rows = []
            unit_rows = []
            vector_rows = []
            for position, (chunk, digest) in enumerate(zip(chunks, chunk_hashes)):
                chunk_id = first_id + position
                vector = cached.get(digest)
                first_day, last_day = days[position] if days else (None, None)
                chunk_rows.append((chunk_id, record.path, chunk.start_line, chunk.end_line, digest, chunk.text,
                                   int(vector is not None) if state is None else state, private, jsonl, first_day, last_day, chunk.chat_id,
                                   chunk.chat_title))
                hashes = unit_hashes[position] if unit_hashes else []
                lines = ChunkLines(chunk.text, chunk.start_line) if chunk.units and hashes else None
                for unit, unit_hash in zip(chunk.units, hashes):
                    unit_vector = cached.get(unit_hash)
                    unit_rows.append(_unit_row(lines, chunk_id, unit.start_line, unit.end_line, unit_hash, unit.text,
                                               unit.context, half(unit_vector) if unit_vector is not None else None,
                                               unit.reading))
                    if unit_vector is None and vec:
                        pending += 1
                if state is not None:
                    continue
                if vector is not None and vec:
                    vector_rows.append((chunk_id, private, vector))
                elif vec:
                    pending += 1
            conn.executemany(
                "INSERT INTO chunks(id, path, start_line, end_line, hash, text, embedded, private, jsonl, "
                "first_day, last_day, chat_id, chat_title) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", chunk_rows)
            conn.executemany(f"INSERT INTO {fts}(rowid, body) VALUES (?, ?)",
                             zip(range(first_id, first_id + len(chunk_rows)), fts_bodies))
            conn.executemany(
                "INSERT INTO units(chunk_id, start_line, end_line, hash, text, context, vector, reading, text_start, "
                "text_end, text_gaps) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", unit_rows)
            for chunk_id, chunk_private, vector in vector_rows:
                conn.execute("INSERT INTO chunks_vec(rowid, private, embedding) VALUES (?, ?, ?)",
                             (chunk_id, chunk_private, vector))
                if self._matrix is not None:
                    self._matrix.add(chunk_id, vector, bool(chunk_private))
            total = int(conn.execute("SELECT count(*) FROM chunks WHERE path = ?", (record.path,)).fetchone()[0])
            conn.execute(
                "INSERT OR REPLACE INTO files(path, kind, hash, mtime, size, chunks, error, indexed_at, private, "
                "warning, tail_hash, resume_line, resume_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (record.path, record.kind, record.hash, record.mtime, record.size, total, record.error,
                 time.time(), private, record.warning, record.tail_hash, record.resume_line, record.resume_offset),
            )
        return pending

    def _delete_chunks(self, conn: apsw.Connection, path: str, from_line: int = 0) -> None:
        rows = conn.execute("SELECT id, private FROM chunks WHERE path = ? AND start_line >= ?",
                            (path, from_line)).fetchall()
        if not rows:
            return
        vec = self.has_vectors
        conn.execute("DELETE FROM units WHERE chunk_id IN (SELECT id FROM chunks WHERE path = ? AND start_line >= ?)",
                     (path, from_line))
        for table, is_private in (("private_fts", True), ("chunks_fts", False)):
            conn.executemany(f"DELETE FROM {table} WHERE rowid = ?",
                             [(chunk_id,) for chunk_id, private in rows if bool(private) == is_private])
        if vec:
            conn.executemany("DELETE FROM chunks_vec WHERE rowid = ?", [(chunk_id,) for chunk_id, _ in rows])
            if self._matrix is not None:
                for chunk_id, _ in rows:
                    self._matrix.remove(chunk_id)
        conn.execute("DELETE FROM chunks WHERE path = ? AND start_line >= ?", (path, from_line))

    # -- copying to and from another store (memfs.index.storage.moving) ------------------------------

    def clear(self) -> None:
        """Every row of the index gone, and its vector table (the next fingerprint sets its
        dimension); the embedding cache, the schema and the workspace it serves stay."""
        with self.transaction() as conn:
            for table in ("units", "chunks", "files"):
                conn.execute(f"DELETE FROM {table}")
            for fts in ("chunks_fts", "private_fts"):
                conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('delete-all')")
            conn.execute("DROP TABLE IF EXISTS chunks_vec")
            conn.execute("DELETE FROM meta WHERE key NOT IN ('schema', 'generation', 'content_generation', "
                         "'workspace')")
            self._has_vectors = False
            self._matrix = None

    def export_files(self, paths: Sequence[str]) -> list[FileRows]:
        """The rows of these files (those indexed), as they are: ids, states, vectors."""
        from memfs.index.storage.records import ChunkRow, FileRows

        found: list[FileRows] = []
        with self.lock:
            vec = self.has_vectors
            for path in paths:
                row = self.conn.execute(f"SELECT {_FILE_COLUMNS}, indexed_at FROM files WHERE path = ?",
                                        (path,)).fetchone()
                if row is None:
                    continue
                rows = self.conn.execute(
                    "SELECT id, path, start_line, end_line, hash, text, embedded, private, jsonl, first_day, last_day, "
                    "chat_id, chat_title FROM chunks WHERE path = ? ORDER BY id", (path,)).fetchall()
                vectors: dict[int, bytes] = {}
                ids = [int(r[0]) for r in rows if r[6] == 1]
                for begin in range(0, len(ids) if vec else 0, 900):
                    part = ids[begin : begin + 900]
                    vectors.update((int(i), bytes(v)) for i, v in self.conn.execute(
                        f"SELECT rowid, embedding FROM chunks_vec WHERE rowid IN ({','.join('?' * len(part))})", part))
                chunks = tuple(ChunkRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], int(r[6]), bool(r[7]), bool(r[8]),
                                        r[9], r[10], r[11], r[12], vectors.get(int(r[0]))) for r in rows)
                units = tuple(StoredUnit(*u) for u in self.conn.execute(
                    f"SELECT {_UNIT_COLUMNS} FROM units u CROSS JOIN chunks c ON c.id = u.chunk_id "
                    "WHERE u.chunk_id IN (SELECT id FROM chunks WHERE path = ?) ORDER BY u.id", (path,)))
                found.append(FileRows(_file_record(row[:-1]), float(row[-1]), chunks, units))
        return found

    def import_files(self, files: Sequence[FileRows]) -> None:
        """Put these files' rows in, ids and vectors as given, in one transaction: each file's
        rows here before are replaced (so importing the same rows again changes nothing).  The
        ids must not belong to another file here (the target of a copy is cleared first)."""
        from memfs.index.storage.records import EMBEDDED, PENDING

        with self.transaction() as conn:
            vec = self.has_vectors
            for rows in files:
                record = rows.record
                self._delete_chunks(conn, record.path)
                conn.execute("DELETE FROM files WHERE path = ?", (record.path,))
                # A vector that did not come along (none in the source) is owed again, not claimed.
                states = [c.state if c.state != EMBEDDED or (vec and c.vector is not None) else PENDING
                          for c in rows.chunks]
                conn.executemany(
                    "INSERT INTO chunks(id, path, start_line, end_line, hash, text, embedded, private, jsonl, "
                    "first_day, last_day, chat_id, chat_title) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(c.id, c.path, c.start_line, c.end_line, c.hash, c.text, state, int(c.private), int(c.jsonl),
                      c.first_day, c.last_day, c.chat_id, c.chat_title) for c, state in zip(rows.chunks, states)])
                fts = "private_fts" if record.private else "chunks_fts"
                conn.executemany(f"INSERT INTO {fts}(rowid, body) VALUES (?, ?)",
                                 [(c.id, fts_body(c.text)) for c in rows.chunks])
                lines = {c.id: ChunkLines(c.text, c.start_line) for c in rows.chunks}
                conn.executemany(
                    "INSERT INTO units(id, chunk_id, start_line, end_line, hash, text, context, vector, reading, "
                    "text_start, text_end, text_gaps) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    [(u.id, *_unit_row(lines.get(u.chunk_id), u.chunk_id, u.start_line, u.end_line, u.hash, u.text,
                                       u.context, u.vector, u.reading)) for u in rows.units])
                conn.executemany("INSERT INTO chunks_vec(rowid, private, embedding) VALUES (?, ?, ?)",
                                 [(c.id, int(c.private), c.vector) for c, state in zip(rows.chunks, states)
                                  if state == EMBEDDED])
                conn.execute(
                    "INSERT INTO files(path, kind, hash, mtime, size, chunks, error, indexed_at, private, warning, "
                    "tail_hash, resume_line, resume_offset) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (record.path, record.kind, record.hash, record.mtime, record.size, record.chunks, record.error,
                     rows.indexed_at, int(record.private), record.warning, record.tail_hash, record.resume_line,
                     record.resume_offset))
            self._matrix = None  # reloaded with the new vectors when next needed

    def cache_entries(self, provider: str, models: Iterable[str], hashes: Iterable[str]) -> list[CachedVector]:
        """The embedding cache's vectors of these text hashes made by ``provider`` under any of
        these model names (the whole key: by provider and hash alone, each call read every entry
        of the provider, ~1 GB at 200k)."""
        from memfs.index.storage.records import CachedVector

        names, wanted = sorted(set(models)), list(dict.fromkeys(hashes))
        found: list[CachedVector] = []
        if not names:
            return found
        with self.lock:
            for begin in range(0, len(wanted), 500):
                part = wanted[begin : begin + 500]
                found += [CachedVector(str(r[0]), str(r[1]), str(r[2]), bytes(r[3])) for r in self.conn.execute(
                    f"SELECT provider, model, hash, vector FROM cache.embedding_cache WHERE provider = ? AND model IN "
                    f"({','.join('?' * len(names))}) AND hash IN ({','.join('?' * len(part))})",
                    (provider, *names, *part))]
        return found

    def put_cache_entries(self, entries: Sequence[CachedVector]) -> None:
        """Add (or replace) embedding cache entries, in one transaction."""
        now = time.time()
        with self._writing() as conn:
            conn.executemany(
                "INSERT OR REPLACE INTO cache.embedding_cache(provider, model, hash, dims, vector, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?)", [(e.provider, e.model, e.hash, len(e.vector) // 4, e.vector, now)
                                               for e in entries])

    def provisional_paths(self, include_private: bool = True) -> list[str]:
        """Files whose chunks are still provisional (their exact chunks are owed)."""
        scope = "" if include_private else " AND private = 0"
        with self.lock:
            rows = self.conn.execute(_PROVISIONAL_FILES.format(scope=scope)).fetchall()
        return [str(r[0]) for r in rows]

    def provisional_lines(self, include_private: bool = True) -> list[tuple[str, int, bool]]:
        """The files of :meth:`provisional_paths`, each with the lines its provisional chunks hold
        and whether it is JSONL: ``(path, lines, jsonl)``.  One query, through files_provisional
        and chunks_path (nothing to read when no big write is being chunked)."""
        scope = "" if include_private else " AND private = 0"
        with self.lock:
            rows = self.conn.execute(_PROVISIONAL_LINES.format(scope=scope)).fetchall()
        return [(str(r[0]), int(r[2]), bool(r[1])) for r in rows]

    def remove_file(self, path: str) -> bool:
        with self.transaction() as conn:
            existed = conn.execute("SELECT 1 FROM files WHERE path = ?", (path,)).fetchone() is not None
            self._delete_chunks(conn, path)
            conn.execute("DELETE FROM files WHERE path = ?", (path,))
        return existed

    def rename_file(self, old: str, new: str, kind: str, private: bool) -> bool:
        """Move a file's chunks to a new path without re-chunking or re-embedding (False when the
        file is not indexed, or when the move changes its privacy: then it is indexed anew)."""
        with self.transaction() as conn:
            row = conn.execute("SELECT private FROM files WHERE path = ?", (old,)).fetchone()
            if row is None or bool(row[0]) != private:
                return False
            self._delete_chunks(conn, new)
            conn.execute("DELETE FROM files WHERE path = ?", (new,))
            conn.execute("UPDATE files SET path = ?, kind = ? WHERE path = ?", (new, kind, old))
            conn.execute("UPDATE chunks SET path = ? WHERE path = ?", (new, old))
        return True

    # -- embeddings ----------------------------------------------------------------------------

    def cached_vectors(self, provider: str, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        found: dict[str, bytes] = {}
        with self.lock:
            for begin in range(0, len(wanted), 500):
                batch = wanted[begin : begin + 500]
                marks = ",".join("?" * len(batch))
                for digest, blob in self.conn.execute(
                    f"SELECT hash, vector FROM cache.embedding_cache WHERE provider = ? AND model = ? AND hash IN ({marks})",
                    (provider, model, *batch),
                ):
                    found[digest] = blob
        return found

    # The embedding queue, in the order the indexer asks for it (see Indexer.embed_pending):
    # ``paths`` (MEMORY.md), else what is dated ``since`` or later (latest day first), else
    # everything, the last written first (chunk ids grow with every write).  Each is a range of
    # an index, so taking the next batch costs the same behind 200 passages or 200,000.

    def pending_chunks(self, limit: int, paths: Sequence[str] = (), since: str | None = None,
                       written_since: float | None = None) -> list[StoredChunk]:
        """Chunks waiting for a vector, at most ``limit``: of ``paths``, or dated from ``since`` on
        (the latest day first), or of files written from ``written_since`` on (a time.time(); the
        last written first), or any (the last indexed first)."""
        columns = "id, path, start_line, end_line, hash, text, jsonl"  # jsonl: how it is read (indexer.read_as)
        if written_since is not None:
            # File by file, the last written first, each file's waiting chunks through
            # chunks_waiting: sorting every waiting chunk took 0.6-0.8 s a call at 100k waiting
            # (and ~6 ms at 5k), against a model call of a quarter second (embedder.CallSize).
            # Only the files with a waiting chunk, found in SQL: probing each recent file from
            # Python cost ~7 ms a call at the end of an import of 742 day files.
            found: list[tuple] = []
            with self.lock:
                files = self.conn.execute(
                    "SELECT path FROM files WHERE mtime >= ? AND EXISTS (SELECT 1 FROM chunks INDEXED BY "
                    "chunks_waiting WHERE chunks.path = files.path AND embedded = 0) ORDER BY mtime DESC, path "
                    "LIMIT ?", (written_since, limit)).fetchall()  # each has one at least
                for (path,) in files:
                    found += self.conn.execute(f"SELECT {columns} FROM chunks INDEXED BY chunks_waiting WHERE path = ? "
                                               "AND embedded = 0 ORDER BY id DESC LIMIT ?",
                                               (path, limit - len(found))).fetchall()
                    if len(found) >= limit:
                        break
            return [StoredChunk(*r[:6], bool(r[6])) for r in found]
        if paths:
            marks = ",".join("?" * len(paths))
            sql = (f"SELECT {columns} FROM chunks INDEXED BY chunks_path WHERE embedded = 0 AND path IN ({marks}) "
                   "ORDER BY id DESC LIMIT ?")
            args: tuple[object, ...] = (*paths, limit)
        elif since is not None:
            sql = (f"SELECT {columns} FROM chunks INDEXED BY chunks_day WHERE embedded = 0 AND last_day >= ? "
                   "ORDER BY last_day DESC, id DESC LIMIT ?")
            args = (since, limit)
        else:
            sql = f"SELECT {columns} FROM chunks WHERE embedded = 0 ORDER BY id DESC LIMIT ?"
            args = (limit,)
        with self.lock:
            rows = self.conn.execute(sql, args).fetchall()
        return [StoredChunk(*r[:6], bool(r[6])) for r in rows]

    def any_private(self, chunk_ids: Sequence[int]) -> bool:
        """Whether any of these chunks is private."""
        if not chunk_ids:
            return False
        marks = ",".join("?" * len(chunk_ids))
        with self.lock:
            row = self.conn.execute(f"SELECT 1 FROM chunks WHERE private = 1 AND id IN ({marks}) LIMIT 1",
                                    list(chunk_ids)).fetchone()
        return row is not None

    def pending_count(self) -> int:
        """Chunks and units still waiting for their vectors."""
        if not self.has_vectors:
            return 0
        with self.lock:
            chunks = self.conn.execute("SELECT count(*) FROM chunks WHERE embedded = 0").fetchone()[0]
            units = self.conn.execute("SELECT count(*) FROM units WHERE vector IS NULL").fetchone()[0]
        return int(chunks) + int(units)

    def has_pending(self) -> bool:
        """Whether any chunk or unit waits for its vector: what a loop over the backlog asks at
        each call, answered from the first entry of a partial index (a count reads them all:
        ~10 ms at 300k waiting, in the event loop)."""
        if not self.has_vectors:
            return False
        with self.lock:
            row = self.conn.execute("SELECT EXISTS (SELECT 1 FROM chunks WHERE embedded = 0) "
                                    "OR EXISTS (SELECT 1 FROM units WHERE vector IS NULL)").fetchone()
        return bool(row[0])

    def pending_units(self, limit: int, paths: Sequence[str] = (), since: str | None = None,
                      written_since: float | None = None) -> list[StoredUnit]:
        """Units waiting for a vector while their chunk has one (a chunk still waiting is embedded
        with its units: a unit taken alone before it would keep a reading without its chunk), in
        the order of :meth:`pending_chunks`."""
        columns = _UNIT_COLUMNS
        if written_since is not None:
            # Through the waiting units alone (few by the time units are asked for alone: a chunk
            # is embedded with its units), not every unit of every recent file (3 s at 100k chunks).
            sql = (f"SELECT {columns} FROM units u INDEXED BY units_pending CROSS JOIN chunks c ON c.id = u.chunk_id "
                   "CROSS JOIN files f ON f.path = c.path WHERE u.vector IS NULL AND c.embedded = 1 AND f.mtime >= ? "
                   "ORDER BY f.mtime DESC, u.id DESC LIMIT ?")
            args: tuple[object, ...] = (written_since, limit)
        elif paths:
            marks = ",".join("?" * len(paths))
            sql = (f"SELECT {columns} FROM chunks c INDEXED BY chunks_path CROSS JOIN units u ON u.chunk_id = c.id "
                   f"WHERE c.path IN ({marks}) "
                   "AND u.vector IS NULL AND c.embedded = 1 ORDER BY u.id DESC LIMIT ?")
            args = (*paths, limit)
        elif since is not None:
            sql = (f"SELECT {columns} FROM chunks c INDEXED BY chunks_day CROSS JOIN units u ON u.chunk_id = c.id "
                   "WHERE c.last_day >= ? AND u.vector IS NULL AND c.embedded = 1 "
                   "ORDER BY c.last_day DESC, u.id DESC LIMIT ?")
            args = (since, limit)
        else:
            sql = (f"SELECT {columns} FROM units u CROSS JOIN chunks c ON c.id = u.chunk_id WHERE u.vector IS NULL "
                   "AND c.embedded = 1 ORDER BY u.id DESC LIMIT ?")
            args = (limit,)
        with self.lock:
            rows = self.conn.execute(sql, args).fetchall()
        return [StoredUnit(*r) for r in rows]

    def units_of(self, chunk_ids: Iterable[int], texts: Mapping[int, str] | None = None) -> list[StoredUnit]:
        """The units of the given chunks, in file order.  ``texts``: the chunks' texts, read
        already (a search has them): a unit's text is then cut from them here rather than by
        SQL from its chunk's row, read again for each unit (a third of reading ~450 units)."""
        wanted = list(chunk_ids)
        if not wanted:
            return []
        marks = ",".join("?" * len(wanted))
        cut = texts if texts is not None and all(cid in texts for cid in wanted) else None
        with self.lock:
            if cut is not None:
                spans = self.conn.execute(
                    f"SELECT {_UNITS_WITH_SPANS} FROM units u WHERE u.chunk_id IN ({marks}) "
                    "ORDER BY u.chunk_id, u.start_line, u.id", wanted).fetchall()
            else:
                rows = self.conn.execute(
                    f"SELECT {_UNITS_AS_STORED} FROM units u CROSS JOIN chunks c ON c.id = u.chunk_id "
                    f"WHERE u.chunk_id IN ({marks}) ORDER BY u.chunk_id, u.start_line, u.id", wanted).fetchall()
            lines = self.conn.execute(
                f"SELECT id, start_line, text FROM chunks WHERE embedded = {PROVISIONAL} AND id IN ({marks})",
                wanted).fetchall()
        if cut is not None:
            rows = [row[:9] if row[9] is None else
                    (*row[:5], text_at(cut[row[1]][row[9]:row[10]], bool(row[11])), *row[6:9]) for row in spans]
        units = StoredUnit.from_rows(rows)
        if not lines:
            return units
        # A provisional chunk's units are its non-blank lines (ids below zero: no unit row has
        # them), so search scores and cites them as it does any unit until the exact chunks come.
        for chunk_id, start_line, text in lines:
            for offset, line in enumerate(text.split("\n")):
                if line.strip():
                    units.append(StoredUnit(-((chunk_id << 20) + offset), chunk_id, start_line + offset,
                                            start_line + offset, "", line, "", None))
        units.sort(key=lambda u: (u.chunk_id, u.start_line, u.id))
        return units

    def store_vectors(
        self, provider: str, model: str, items: list[tuple[StoredChunk, np.ndarray]]
    ) -> None:
        """Save chunk vectors in the cache and attach them to chunks that still exist with the
        same text (a file may have changed while it was being embedded)."""
        self.store_embedded(provider, model, chunks=items)

    def store_unit_vectors(self, provider: str, model: str, items: list[tuple[StoredUnit, np.ndarray]]) -> None:
        """Cache unit vectors and attach them to units that still have the same text."""
        self.store_embedded(provider, model, units=items)

    def store_embedded(self, provider: str, model: str, readings: Sequence[tuple[str, np.ndarray]] = (),
                       chunks: Sequence[tuple[StoredChunk, np.ndarray]] = (),
                       units: Sequence[tuple[StoredUnit, np.ndarray]] = ()) -> None:
        """One transaction for what one call to the model gave (see Indexer.embed_pending): the
        vectors of the texts it read (``readings``: text hash and vector), cached only, and the
        vectors made from them, cached under their own text's hash and attached to the chunks
        and units that still have that text."""
        now = time.time()
        with self.transaction(vectors_only=True) as conn:
            for digest, vector in readings:
                full = np.asarray(vector, dtype=np.float32)
                self._cache(conn, provider, model, digest, full, now)
            for unit, vector in units:
                full = np.asarray(vector, dtype=np.float32)
                self._cache(conn, provider, model, unit.hash, full, now)
                conn.execute("UPDATE units SET vector = ? WHERE id = ? AND hash IN (?, ?) AND vector IS NULL",
                             (half(full.tobytes()), unit.id, *hash_forms(unit.hash)))
            for chunk, vector in chunks:
                full = np.asarray(vector, dtype=np.float32)
                self._cache(conn, provider, model, chunk.hash, full, now)
                row = conn.execute(
                    "SELECT embedded, private FROM chunks WHERE id = ? AND hash = ?", (chunk.id, chunk.hash)
                ).fetchone()
                if row is None or row[0]:
                    continue
                blob = full.tobytes()
                conn.execute("INSERT INTO chunks_vec(rowid, private, embedding) VALUES (?, ?, ?)",
                             (chunk.id, row[1], blob))
                conn.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk.id,))
                if self._matrix is not None:
                    self._matrix.add(chunk.id, blob, bool(row[1]))

    @staticmethod
    def _cache(conn: apsw.Connection, provider: str, model: str, digest: str, vector: np.ndarray,
               now: float) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO cache.embedding_cache(provider, model, hash, dims, vector, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)", (provider, model, digest, len(vector), vector.tobytes(), now))

    # -- search primitives ---------------------------------------------------------------------

    @staticmethod
    def _tables(include_private: bool) -> tuple[str, ...]:
        return ("chunks_fts", "private_fts") if include_private else ("chunks_fts",)

    def keyword_candidates(self, match: str, limit: int, include_private: bool = True,
                           where: str = "", params: Iterable[object] = ()) -> list[tuple[int, float]]:
        """(chunk id, bm25) best first; bm25 is negative, more negative is better.  Each FTS
        table ranks with its own statistics; with private chunks, the two lists are merged.
        ``where`` limits the chunks (a condition on ``chunks c``)."""
        found: list[tuple[int, float]] = []
        extra = list(params)
        with self.lock:
            for table in self._tables(include_private):
                if where:
                    sql = (f"SELECT f.rowid, bm25({table}) AS score FROM {table} f JOIN chunks c ON c.id = f.rowid "
                           f"WHERE {table} MATCH ? AND {where} ORDER BY score, f.rowid LIMIT ?")
                else:
                    sql = (f"SELECT rowid, bm25({table}) AS score FROM {table} WHERE {table} MATCH ? "
                           "ORDER BY score, rowid LIMIT ?")
                found += [(int(r[0]), float(r[1])) for r in self.conn.execute(sql, (match, *extra, limit))]
        found.sort(key=lambda item: (item[1], item[0]))
        return found[:limit]

    def keyword_top(self, terms: Sequence[str], limit: int, include_private: bool = True,
                    where: str = "", params: Iterable[object] = ()) -> list[tuple[int, float]]:
        """Exactly ``keyword_candidates(match_expression(terms), ...)`` (the same rows, bm25 and
        order), scoring only the rows that can reach the top ``limit`` (see :mod:`memfs.index.storage.sqlite.topk`)."""
        full = match_expression(list(terms))
        if full is None:
            return []
        extra = list(params)
        found: list[tuple[int, float]] = []
        with self.lock:
            for table in self._tables(include_private):
                found += self._pruned_top(table, list(terms), full, limit, where, extra)
        found.sort(key=lambda item: (item[1], item[0]))
        return found[:limit]

    def _pruned_top(self, table: str, terms: list[str], full: str, limit: int, where: str,
                    params: list[object]) -> list[tuple[int, float]]:
        total = self._fts_rows(table)
        phrases = self._phrases(table, terms) if total else None
        plan = topk.plan(phrases, total or 0, limit) if phrases else None
        if plan is not None:
            # A lower bound for the k-th best score: the k-th best score of the seed phrases
            # alone (each phrase adds the same to a row's score in any query), over the rows
            # that are likely to be best.
            theta = 0.0
            for guess in (plan.guess(limit), 0.0):
                among = plan.candidates(guess, True)
                seeded = self._keyword_sql(table, plan.seed, limit, where, params, among)
                if plan.complete and (among is None or len(seeded) == limit and -seeded[-1][1] >= guess):
                    return seeded  # the seed is the whole query, and no row left out reaches its k-th
                if len(seeded) == limit:
                    theta = -seeded[-1][1]
                    break
            candidates = plan.candidates(theta) if theta > 0.0 else None
            if candidates is not None and plan.complete and candidates == among:
                return seeded  # the seed was the whole query, over the very rows a second round would read
            if candidates is not None:
                rows = self._keyword_sql(table, full, limit, where, params, candidates)
                if len(rows) == limit and -rows[-1][1] >= theta:
                    return rows  # every row left out scores below theta
        return self._keyword_sql(table, full, limit, where, params)

    def _keyword_sql(self, table: str, match: str, limit: int, where: str, params: list[object],
                     candidates: str | None = None) -> list[tuple[int, float]]:
        # ``+rowid``: the candidates filter the full query's rows, they do not drive it (FTS5
        # would restart the query, and recount every phrase's rows for bm25, once a rowid).
        among = f" AND +f.rowid IN (SELECT rowid FROM {table} WHERE {table} MATCH ?)" if candidates else ""
        join = " JOIN chunks c ON c.id = f.rowid" if where else ""
        scope = f" AND {where}" if where else ""
        sql = (f"SELECT f.rowid, bm25({table}) AS score FROM {table} f{join} WHERE {table} MATCH ?{among}{scope} "
               "ORDER BY score, f.rowid LIMIT ?")
        args = [match, *([candidates] if candidates else []), *params, limit]
        return [(int(r[0]), float(r[1])) for r in self.conn.execute(sql, args)]

    def _fts_rows(self, table: str) -> int | None:
        """How many rows FTS5 counts in ``table`` (its bm25's N): the first varint of the
        "averages" record (id 1 of the data table).  None if it cannot be read."""
        try:
            row = self.conn.execute(f"SELECT block FROM {table}_data WHERE id = 1").fetchone()
        except apsw.SQLError:
            return None
        if row is None or not row[0]:
            return 0
        return _varint(bytes(row[0]))

    def _phrases(self, table: str, terms: list[str]) -> list[topk.Phrase]:
        """Each term's phrase with the rows holding it when it is one token (FTS5's vocabulary)."""
        tokens = [phrase_tokens(t) for t in terms]
        docs = self._term_rows(table, [t[0] for t in tokens if len(t) == 1])
        return [topk.Phrase(match_expression([term]) or "", docs[t[0]] if len(t) == 1 else None)
                for term, t in zip(terms, tokens)]

    def _term_rows(self, table: str, tokens: Iterable[str]) -> dict[str, int]:
        """How many rows of ``table`` hold each token (0: none, or not a token the index makes).
        Remembered until the index changes (chunk_total's key): a vocabulary row counts its term's
        rows by reading its posting list (~0.7-2 ms a word at 100k chunks), and a search asks
        about the same words three times (which to match, their bounds, their weights), agents
        about the same words again."""
        self.chunk_total()
        key = self._total[0] if self._total else None
        if self._vocabulary[0] != key or len(self._vocabulary[1]) > 100_000:
            self._vocabulary = (key, {})
        docs = self._vocabulary[1]
        wanted = set(tokens)
        missing = sorted(token for token in wanted if (table, token) not in docs)
        if missing:
            for token in missing:
                docs[(table, token)] = 0
            for begin in range(0, len(missing), 500):
                part = missing[begin : begin + 500]
                for term, doc in self.conn.execute(
                        f"SELECT term, doc FROM {table}_vocab WHERE term IN ({','.join('?' * len(part))})", part):
                    docs[(table, str(term))] = int(doc)
        return {token: docs[(table, token)] for token in wanted}

    def doc_frequencies(self, terms: list[str], include_private: bool = True) -> tuple[dict[str, int], int]:
        """How many chunks contain each (already lower-cased) term, and how many chunks there are.
        A term stemmed differently by the porter tokenizer is simply not found (frequency 0)."""
        with self.lock:
            total = self.chunk_total(include_private)
            found = {term: 0 for term in terms}
            for table in self._tables(include_private):
                for term, rows in self._term_rows(table, terms).items():
                    found[term] += rows
            return found, total

    def chunk_total(self, include_private: bool = True) -> int:
        """How many chunks the index holds (public ones only, if asked); cached until this or
        another connection writes.  Counted by the keyword tables, which hold one row per chunk
        (public ones in ``chunks_fts``, private ones in ``private_fts``) and keep their count in
        one record: counting ``chunks`` read the whole table (1.5 s at 100k chunks, after every
        write, the embedder's too)."""
        with self.lock:
            key = (int(self.conn.execute("PRAGMA main.data_version").fetchone()[0]), self._writes)
            if self._total is None or self._total[0] != key:
                # Inside a transaction of this connection FTS5 writes its count only at commit.
                public, private = (None, None) if self._depth else (self._fts_rows("chunks_fts"),
                                                                   self._fts_rows("private_fts"))
                if public is None or private is None:
                    row = self.conn.execute("SELECT count(*), coalesce(sum(private), 0) FROM chunks").fetchone()
                    public, private = int(row[0]) - int(row[1]), int(row[1])
                self._total = (key, (public + private, public))
            return self._total[1][0 if include_private else 1]

    def _vector_matrix(self) -> VectorMatrix | None:
        """The in-memory matrix for a large index (loaded or reloaded as needed), else None."""
        version = int(self.conn.execute("PRAGMA main.data_version").fetchone()[0])
        if self._matrix is not None and version == self._matrix_version:
            return self._matrix
        count = int(self.conn.execute("SELECT count(*) FROM chunks WHERE embedded = 1").fetchone()[0])
        if count < MATRIX_MIN_VECTORS:
            self._matrix = None
            return None
        items = [(int(r[0]), r[1], bool(r[2]))
                 for r in self.conn.execute("SELECT rowid, embedding, private FROM chunks_vec")]
        matrix = VectorMatrix(len(items[0][1]) // 4)
        matrix.load(items)
        self._matrix, self._matrix_version = matrix, version
        return matrix

    def vector_candidates(self, query: np.ndarray, k: int, include_private: bool = True,
                          where: str = "", params: Iterable[object] = ()) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity), best first: sqlite-vec's KNN, or the in-memory matrix
        once the index is large.  With ``where`` (a condition on ``chunks c``), the chunks it
        allows are compared one by one when they are few, else the nearest are filtered."""
        if not self.has_vectors:
            return []
        if where:
            scope = "" if include_private else " AND c.private = 0"
            with self.lock:
                allowed = [int(r[0]) for r in self.conn.execute(
                    f"SELECT c.id FROM chunks c WHERE c.embedded = 1 AND {where}{scope} LIMIT ?",
                    (*params, SCOPED_EXACT + 1))]
            if len(allowed) <= SCOPED_EXACT:
                found = sorted(self.vector_similarity(query, allowed).items(), key=lambda kv: (-kv[1], kv[0]))
                return found[:k]
            near = self.vector_candidates(query, min(VEC_KNN_MAX, k * 20), include_private)
            with self.lock:
                marks = ",".join("?" * len(near))
                ok = {int(r[0]) for r in self.conn.execute(
                    f"SELECT c.id FROM chunks c WHERE c.id IN ({marks}) AND {where}", (*[i for i, _ in near], *params))}
            return [(cid, sim) for cid, sim in near if cid in ok][:k]
        with self.lock:
            matrix = self._vector_matrix()
            if matrix is not None:
                return matrix.knn(query, k, include_private)
            blob = np.asarray(query, dtype=np.float32).tobytes()
            scope = "" if include_private else " AND private = 0"
            rows = self.conn.execute(
                f"SELECT rowid, distance FROM chunks_vec WHERE embedding MATCH ? AND k = ?{scope}",
                (blob, min(k, VEC_KNN_MAX)),
            ).fetchall()
        return [(int(r[0]), 1.0 - float(r[1])) for r in rows]

    def nearest_later(self, query: Callable[[], np.ndarray | None], k: int, include_private: bool = True
                      ) -> Future[tuple[np.ndarray | None, list[tuple[int, float]]]] | None:
        """``vector_candidates(query(), k, include_private)`` on a thread of its own: (the query
        vector, its nearest chunks).  ``query`` is called there, so the wait for a query being
        embedded elsewhere and the matrix product over every chunk vector (numpy releases the GIL)
        both run while the caller does the keyword side; a caller done first and asking for the
        result takes blocks of the product meanwhile (:mod:`memfs.index.storage.sharedwork`).  None when
        the index has no in-memory matrix (a small one: sqlite-vec answers, on the connection,
        after the caller's work).

        The thread reads the matrix without the lock: the caller must hold ``self.lock`` from
        this call until it has the future's result, which keeps every writer (and a reload) out."""
        if not self.has_vectors:
            return None
        with self.lock:
            matrix = self._vector_matrix()
            if matrix is None:
                return None
            if self._knn_pool is None:
                self._knn_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memfs-knn")
            return run_shared(self._knn_pool, lambda share: _nearest(matrix, query, k, include_private, share))

    def vector_similarity(self, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        """Exact cosine similarity of the given chunks to the query (those that have a vector)."""
        if not ids or not self.has_vectors:
            return {}
        with self.lock:
            if self._vector_matrix() is not None and self._matrix is not None:
                return self._matrix.similarity(query, ids)
            blob = np.asarray(query, dtype=np.float32).tobytes()
            rows = []
            for begin in range(0, len(ids), 900):
                batch = ids[begin : begin + 900]
                marks = ",".join("?" * len(batch))
                rows += self.conn.execute(
                    f"SELECT rowid, vec_distance_cosine(embedding, ?) FROM chunks_vec WHERE rowid IN ({marks})",
                    (blob, *batch),
                ).fetchall()
        return {int(r[0]): 1.0 - float(r[1]) for r in rows}

    def chunks_by_id(self, ids: Iterable[int], include_private: bool = True) -> dict[int, StoredChunk]:
        wanted = list(ids)
        if not wanted:
            return {}
        marks = ",".join("?" * len(wanted))
        scope = "" if include_private else " AND private = 0"
        with self.lock:
            rows = self.conn.execute(
                f"SELECT id, path, start_line, end_line, hash, text, jsonl, chat_id, chat_title FROM chunks "
                f"WHERE id IN ({marks}){scope}",
                wanted,
            ).fetchall()
        return {int(r[0]): StoredChunk(*r[:6], bool(r[6]), r[7], r[8]) for r in rows}

    def chunk_ids_of(self, paths: Sequence[str], include_private: bool = True) -> list[int]:
        """The ids of these files' chunks (public ones only, if asked), in id order."""
        if not paths:
            return []
        scope = "" if include_private else " AND private = 0"
        with self.lock:
            return [int(r[0]) for r in self.conn.execute(
                f"SELECT id FROM chunks WHERE path IN ({','.join('?' * len(paths))}){scope} ORDER BY id", list(paths))]

    def embedded_ids(self, ids: Iterable[int]) -> set[int]:
        wanted = list(ids)
        if not wanted:
            return set()
        marks = ",".join("?" * len(wanted))
        with self.lock:
            rows = self.conn.execute(
                f"SELECT id FROM chunks WHERE embedded = 1 AND id IN ({marks})", wanted
            ).fetchall()
        return {int(r[0]) for r in rows}

    # -- status --------------------------------------------------------------------------------

    def counts(self, include_private: bool = True, exclude: frozenset[str] = frozenset()) -> dict[str, int]:
        """Files, skipped files, chunks (provisional ones among them, and the lines they hold:
        all, and of JSONL files), units and pending passages, leaving out private files (unless
        ``include_private``) and the paths of ``exclude`` (a few stale names; more than SQLite
        takes as parameters are left in rather than failing)."""
        hidden = sorted(exclude)[:30_000]
        clauses = ([] if include_private else ["private = 0"]) + (
            [f"path NOT IN ({','.join('?' * len(hidden))})"] if hidden else [])
        where = f"WHERE {' AND '.join(clauses)}" if clauses else ""
        with self.lock:
            files = self.conn.execute(
                f"SELECT count(*), coalesce(sum(error != ''), 0) FROM files {where}", hidden).fetchone()
            if where:
                chunks = self.conn.execute(
                    f"SELECT count(*), coalesce(sum(embedded = 0), 0), coalesce(sum(embedded = {PROVISIONAL}), 0) "
                    f"FROM chunks {where}", hidden).fetchone()
                units = self.conn.execute(
                    f"SELECT count(*), coalesce(sum(vector IS NULL), 0) FROM units WHERE chunk_id IN "
                    f"(SELECT id FROM chunks {where})", hidden).fetchone()
            else:
                # Counted through indexes alone: a sum over the rows read every chunk's text and
                # every unit's vector (100+ MB at 140k units), and a mount polled for its status
                # (a progress display, bench_import) took a core from the model it waited on.
                chunks = self.conn.execute(
                    "SELECT (SELECT count(*) FROM chunks), (SELECT count(*) FROM chunks WHERE embedded = 0), "
                    f"(SELECT count(*) FROM chunks INDEXED BY chunks_path WHERE embedded = {PROVISIONAL} AND path IN "
                    f"(SELECT path FROM files WHERE {_PROVISIONAL}))").fetchone()
                units = self.conn.execute("SELECT (SELECT count(*) FROM units), "
                                          "(SELECT count(*) FROM units WHERE vector IS NULL)").fetchone()
            # The lines of the files still being chunked, for the estimate of the passages they
            # will add (memfs.index.embedding.backlog.still_to_chunk): provisional_lines' query.
            owed = self.conn.execute(_PROVISIONAL_LINES.format(scope="".join(f" AND {c}" for c in clauses)),
                                     hidden).fetchall()
            # Through embedding_cache_counted (_CACHE_INDEXES) once it is made; kept exact: a
            # daemon's status and a command's own must print the same bytes.
            cached = self.conn.execute("SELECT count(*) FROM cache.embedding_cache").fetchone()[0]
        return {
            "files": int(files[0]),
            "skipped": int(files[1]),
            "chunks": int(chunks[0]),
            "units": int(units[0]),
            "pending": int(chunks[1]) + int(units[1]) if self.has_vectors else 0,
            "provisional_chunks": int(chunks[2]),
            "provisional_lines": sum(int(r[2]) for r in owed),
            "provisional_jsonl_lines": sum(int(r[2]) for r in owed if r[1]),
            "cached_embeddings": int(cached),
        }

    def size_bytes(self) -> int:
        total = 0
        for suffix in ("", "-wal", "-shm"):
            candidate = Path(str(self.path) + suffix)
            if candidate.exists():
                total += candidate.stat().st_size
        return total

    def check(self) -> str:
        """SQLite's own integrity check of the index file ('ok' when healthy)."""
        with self.lock:
            rows = self.conn.execute("PRAGMA main.integrity_check").fetchall()
        return "; ".join(str(r[0]) for r in rows)
