"""The SQLite index of one (workspace, agent): files, chunks, FTS5 keyword index, vectors, and the
embedding cache (a separate attached file, so it survives rebuilds of the index).  The index is
the cache of the vectors it holds (found by their text's hash); the cache file keeps the rest
(:mod:`.reuse`).  An index of schema 7 keeps its chunk vectors in sqlite-vec as float32 and every
vector in the cache too, until it is rebuilt.

Chunks of private files (see :mod:`memfs.privacy`) live in their own FTS5 table and their own
partition of the vector table.  A shared search reads only the public ones, so private text
cannot shift its scores either: BM25's term statistics (how rare a word is, how long chunks
are) are those of the public chunks alone.

Only this package writes SQL for SQLite.  All access goes through one connection guarded by a lock, so the
FUSE daemon's threads and the indexing worker can share a store; other processes (the CLI) read
concurrently through WAL.  This module holds the store itself (opening, schema, metadata,
transactions, status); its other concerns are mixins: :mod:`.files` (files, and copying to and
from another store), :mod:`.embeddings` (what waits for vectors, storing them, the embedding
cache), :mod:`.reuse` (vectors found again by hash, kept when they leave the index) and
:mod:`.searching` (keyword and vector primitives)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import apsw

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.index.storage.records import status_counts
from memfs.index.storage.sqlite.embeddings import StoreEmbeddings
from memfs.index.storage.sqlite.files import StoreFiles
from memfs.index.storage.sqlite.layout import (
    _CACHE_INDEXES,
    _INDEX_TABLES,
    _LATE_INDEXES,
    _PROVISIONAL,
    _PROVISIONAL_LINES,
    CACHE_PAGE,
    FTS_OPTIONS,
    HASH_INDEXES,
    JOURNAL_LIMIT,
    LEGACY_CACHE,
    LEGACY_SCHEMA,
    MMAP_BYTES,
    PROVISIONAL,
    SCHEMA_VERSION,
    SERVED_SCHEMAS,
    VECTOR_CACHE,
    _connect,
    log,
)
from memfs.index.storage.sqlite.reuse import StoreReuse
from memfs.index.storage.sqlite.searching import StoreSearching
from memfs.index.storage.vectors import VectorMatrix
from memfs.userdirs import private_file


class Store(StoreFiles, StoreEmbeddings, StoreReuse, StoreSearching):
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
        self.conn.execute(f"PRAGMA cache.journal_size_limit={JOURNAL_LIMIT}")
        self.conn.execute(f"PRAGMA cache.mmap_size={MMAP_BYTES}")
        if migrate:
            self._migrate()
        # An index made by an earlier version is only read until it is rebuilt (Memory does);
        # one of schema 7 is served as it is (its vectors float32 in sqlite-vec) until rebuilt.
        found = self._schema_found()
        self.outdated = found not in (None, *SERVED_SCHEMAS)
        self.packed = found != LEGACY_SCHEMA  # chunk vectors packed; the index is its own cache
        self.donor: Store | None = None  # an index a rebuild reads vectors from (see StoreReuse)
        self._built: tuple[str | None, dict[str, object] | None] = (None, None)  # the fingerprint, parsed
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
            self.conn.execute("PRAGMA cache.wal_checkpoint(TRUNCATE)")

    def checkpoint(self, over: int = JOURNAL_LIMIT, wait_ms: int = 200) -> bool:
        """The index's and the cache's write-ahead logs folded into their files and emptied when
        either is larger than ``over`` bytes: after a big write (an import, a catch-up) or once
        the backlog is embedded (otherwise a WAL keeps the size of the largest transaction since
        it was last emptied; journal_size_limit cuts it back only when a checkpoint reaches its
        end while a writer starts it again).  Waits at most ``wait_ms`` for readers in the middle
        of a read (a search), then leaves it to the next time (False)."""
        if all(not wal.exists() or wal.stat().st_size <= over
               for wal in (Path(f"{self.path}-wal"), Path(f"{self.cache_path}-wal"))):
            return True
        done = True
        with self.lock:
            if self._depth:
                return False  # inside a batch: its transaction is not written yet
            self.conn.setbusytimeout(wait_ms)
            try:
                for schema in ("main", "cache"):
                    busy = self.conn.execute(f"PRAGMA {schema}.wal_checkpoint(TRUNCATE)").fetchone()[0]
                    done = done and not busy
            except apsw.BusyError:
                done = False
            finally:
                self.conn.setbusytimeout(10_000)
        return done

    def _schema_ready(self) -> bool:
        """Whether every table is there already (read without a write lock, so opening an index
        never waits on a busy, or stopped, writer)."""
        main = {r[0] for r in self.conn.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
        cache = {r[0] for r in self.conn.execute("SELECT name FROM cache.sqlite_master WHERE type = 'table'")}
        return (_INDEX_TABLES <= main and self._cache_table in cache
                and self._schema_found() in SERVED_SCHEMAS and self.get_meta("generation") is not None)

    @property
    def _cache_table(self) -> str:
        """The cache's table this index reads and writes (see :data:`.layout.VECTOR_CACHE`)."""
        return "vector_cache" if self.packed else "embedding_cache"

    @property
    def _vector_table(self) -> str:
        return "chunk_vectors" if self.packed else "chunks_vec"

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
                {VECTOR_CACHE if self.packed else LEGACY_CACHE};
                INSERT OR IGNORE INTO meta(key, value) VALUES ('schema', '{SCHEMA_VERSION}');
                INSERT OR IGNORE INTO meta(key, value) VALUES ('generation', '0');
                """
            )
            if self.packed:
                for sql in HASH_INDEXES.values():
                    self.conn.execute(sql)

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
        if self.packed:
            missing += [sql for name, sql in HASH_INDEXES.items() if name not in have]
        if missing:
            with self._writing():
                for sql in missing:
                    self.conn.execute(sql)
        for name, sql in _CACHE_INDEXES.items() if not self.packed else ():
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
        if raw != self._built[0]:
            self._built = (raw, None if raw is None else json.loads(raw))
        return None if self._built[1] is None else dict(self._built[1])

    def set_fingerprint(self, fingerprint: dict[str, object], dims: int) -> None:
        """Record what built this index and create the vector table for ``dims``."""
        with self._writing():
            self.conn.execute(
                "INSERT OR REPLACE INTO meta(key, value) VALUES ('fingerprint', ?)",
                (json.dumps(fingerprint, sort_keys=True),),
            )
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES ('dims', ?)", (str(int(dims)),))
            if dims and self.packed:
                # Each vector as its int8 codes and scale (memfs.index.storage.vectors.pack_unit_vector):
                # searched in memory (VectorMatrix), never by SQL. sqlite-vec's float32 table took
                # 4 * dims bytes a vector and reserved room for 1,024 at a time (1.6 MB for a
                # conversation of 215 chunks).
                self.conn.execute("CREATE TABLE IF NOT EXISTS chunk_vectors(id INTEGER PRIMARY KEY, "
                                  "private INTEGER NOT NULL, vector BLOB NOT NULL)")
            elif dims:
                self.conn.execute(
                    f"CREATE VIRTUAL TABLE IF NOT EXISTS chunks_vec USING "
                    f"vec0(private integer partition key, embedding float[{int(dims)}] distance_metric=cosine)"
                )

    @property
    def dims(self) -> int:
        """The dimensions of this index's vectors (0: none, or not known yet)."""
        raw = self.get_meta("dims")
        if raw is not None:
            return int(raw)
        fingerprint = self.fingerprint or {}
        return int(fingerprint.get("dims") or 0)  # type: ignore[call-overload]

    @property
    def has_vectors(self) -> bool:
        if self._has_vectors:
            return True  # the vector table, once created, stays for the life of the file
        with self.lock:
            row = self.conn.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (self._vector_table,)).fetchone()
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
            cached = self.conn.execute(f"SELECT count(*) FROM cache.{self._cache_table}").fetchone()[0]
        return status_counts(files, chunks, units, owed, cached, self.has_vectors)

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
