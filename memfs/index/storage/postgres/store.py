"""The index of one (workspace, agent) in PostgreSQL + pgvector: the
:class:`memfs.index.storage.interface.IndexStore` of a tenant, with the SQLite store's results.

It connects as the tenant's own login role (the DSN ``memfs pg grant`` printed), so row-level
security, not this code, keeps every other tenant out; still, every statement names the tenant
(``tenant_id = %s``) so the planner reads the tenant's partitions alone.  The tenant is found from
the workspace's own id (``.memfs-id``, :mod:`memfs.workspaceid`) and the agent's name.

What the SQLite store keeps, kept here (schema in :mod:`memfs.index.storage.postgres.schema`):

* files, chunks and units as in SQLite; a chunk's vector is a pgvector column searched by
  :mod:`memfs.index.storage.postgres.knn`, a unit's vector the bytes SQLite stores (``units.packed``).
* the keyword index as postings and statistics (:mod:`memfs.index.storage.postgres.terms`), ranked by
  :mod:`memfs.index.storage.postgres.keyword` with FTS5's bm25, so calibrated scores are the same.
* the embedding cache: the tenant's own ``tenant_embeddings`` (``private`` when a private file
  holds the text).  No cache is shared with other tenants: one that any tenant could add to let a
  tenant plant the vector of another's text (schema v6); a text two tenants hold is embedded by
  each.

Chunk and unit ids are the tenant's own numbers, the largest plus one, taken while the tenant's
``corpus_stats`` rows are locked (the lock :mod:`memfs.index.storage.postgres.terms` takes for its statistics),
so two mounts of one workspace never take the same id.  One connection per store, used under
:attr:`lock` (psycopg serialises statements, not transactions).

A tenant's KNN reads an HNSW index once it holds :data:`memfs.index.storage.postgres.knn.EXACT_MAX` chunks: the
store asks the server for it (:func:`memfs.index.storage.postgres.knn.build_index`) when it opens and after a
write that added chunks or vectors commits, never inside a write's transaction (the build locks
the tenant's partition until it commits), on a connection of its own so searches go on meanwhile.

A lost connection (the server stopped or restarted, the network dropped) is not the end of the
store: every method then raises :class:`memfs.index.storage.interface.IndexOffline`, in one line and within
``index.timeout_s``, and the next call after :data:`RETRY_S` connects again by itself (never in the
middle of a transaction, whose statements must all go to the one connection that began it).
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future
from contextlib import contextmanager

import numpy as np

from memfs.index.storage.interface import IndexOffline
from memfs.index.storage.postgres import keyword, knn, terms
from memfs.index.storage.postgres.connect import (
    CONNECT_TIMEOUT,
    PgError,
    PgUnreachable,
    check_server,
    connect,
    redacted,
)
from memfs.index.storage.postgres.schema import LATEST, version
from memfs.index.storage.records import (
    EMBEDDED,
    PENDING,
    PROVISIONAL_HASH,
    PROVISIONAL_STATE,
    SCOPED_EXACT,
    CachedVector,
    ChunkRow,
    FileRecord,
    FileRows,
    StoredChunk,
    StoredUnit,
)
from memfs.index.storage.vectors import pack_unit_vector
from memfs.index.text.chunking import Chunk
from memfs.index.text.keywords import fts_body, match_expression
from memfs.workspace import FileKind

log = logging.getLogger(__name__)

INDEX_RETRY = 600.0  # seconds before a failed HNSW build is tried again
_KINDS = {kind.value for kind in FileKind}
_JSONL_KINDS = ", ".join(f"'{kind.value}'" for kind in FileKind if kind.is_jsonl)  # for SQL
# The files whose chunks are provisional, each with the lines those hold and whether it is JSONL
# (provisional_lines, counts); ``{scope}`` adds conditions on ``f``.  Both tables keyed by the
# tenant itself, so the planner prunes to its partitions (tests/test_pg_tenant_keyed.py).
_PROVISIONAL_LINES = (f"SELECT f.path, f.kind IN ({_JSONL_KINDS}), (SELECT coalesce(sum(c.end_line - c.start_line + 1), 0) "
                      "FROM memfs.chunks c WHERE c.tenant_id = %(t)s AND c.path = f.path AND c.provisional) "
                      "FROM memfs.files f WHERE f.tenant_id = %(t)s AND starts_with(f.hash, %(p)s){scope} "
                      "ORDER BY f.indexed_at")
RETRY_S = 1.0  # after a failed reconnect, calls fail at once for this long (no connect per call)
REFUSED_RETRY_S = 30.0  # a store never opened whose server refused it: asked again this seldom


class _Unopened:
    """The connection of a store whose server has not answered yet (:meth:`PgStore._open_later`)."""

    closed = True

    def close(self) -> None:
        pass


_UNOPENED = _Unopened()
_FILE_COLUMNS = ("path, kind, hash, mtime, size, chunks, error, private, warning, tail_hash, resume_line, "
                 "resume_offset")
_UNIT_COLUMNS = "unit_id, chunk_id, start_line, end_line, hash, text, context, packed, reading"
# An entry of the tenant's embedding cache: (tenant, provider, model, hash, dims, vector).  A
# private one replaces what is there and makes it private (its text is in a private file now); a
# public one leaves an entry already there alone: a shared-mode login neither sees nor may change
# a private entry (ON CONFLICT DO NOTHING asks no policy about the row it meets).
_CACHE_ENTRY = "INSERT INTO memfs.tenant_embeddings(tenant_id, provider, model, hash, dims, vector, private) "
_CACHE_PRIVATE = (_CACHE_ENTRY + "VALUES (%s, %s, %s, %s, %s, %s, true) ON CONFLICT (tenant_id, provider, model, hash) "
                  "DO UPDATE SET vector = excluded.vector, dims = excluded.dims, private = true")
_CACHE_PUBLIC = _CACHE_ENTRY + "VALUES (%s, %s, %s, %s, %s, %s, false) ON CONFLICT DO NOTHING"


def _file_record(row: tuple) -> FileRecord:
    return FileRecord(*row[:7], bool(row[7]), *row[8:])


def _unit(row: tuple) -> StoredUnit:
    return StoredUnit(int(row[0]), int(row[1]), row[2], row[3], row[4], row[5], row[6],
                      None if row[7] is None else bytes(row[7]), row[8])


def _float32(vector: object) -> bytes:
    """A pgvector value (pgvector.Vector, or a numpy array from older adapters) as float32 bytes."""
    as_numpy = getattr(vector, "to_numpy", None)
    return np.asarray(as_numpy() if as_numpy else vector, dtype=np.float32).tobytes()


def _first(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _offline_reason(store: PgStore, exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = text.rsplit("failed: ", 1)[-1].replace("FATAL:  ", "").strip()
    text = text.removeprefix("index.backend = postgres: ").removeprefix(f"cannot connect to {redacted(store.dsn)}: ")
    if "password authentication failed" in text:
        # It will not answer again by itself: the login's password was rotated under the mount.
        text += " (a new password from `memfs pg grant` takes effect when this mount or daemon starts again)"
    return f"the index is unavailable: PostgreSQL at {store._where()}: {text}"


def _offline_on_loss(method: Callable) -> Callable:
    """``method`` of PgStore, raising IndexOffline when the server is lost under it."""
    @functools.wraps(method)
    def checked(self: PgStore, *args: object, **kwargs: object) -> object:
        for attempt in (1, 2):
            try:
                return method(self, *args, **kwargs)
            except IndexOffline:
                if attempt == 2 or self._depth or self._retry_at:
                    raise
            except Exception as exc:
                offline = self._lost_now(exc)
                if offline is None:
                    raise
                if attempt == 2 or self._depth or not self._conn.closed:
                    raise offline from None
            # The connection was lost under this call, outside any transaction of a caller's: once
            # more on a new one (a restarted server answers it).  Each method is one statement or
            # one transaction, rolled back whole when the connection went, so it may run again.
        raise AssertionError("unreachable")
    return checked


def _scoped(where: str) -> str:
    """A condition of memfs.index.search.hybrid.Scope (``?`` placeholders) in psycopg's style."""
    return where.replace("%", "%%").replace("?", "%s")


class PgStore:
    """The index of one tenant, through that tenant's login role."""

    backend = "postgres"

    def __init__(self, dsn: str, workspace: uuid.UUID, agent: str, timeout: float = CONNECT_TIMEOUT,
                 wait: bool = False, needs_private: bool = False) -> None:
        """``wait``: a server that cannot be reached now is not an error: the store is made not
        yet opened (see :meth:`_open_later`).  ``needs_private``: the main mode's store, refused
        on a shared-mode login (it would answer without MEMORY.md as though it were empty)."""
        self._needs_private = needs_private
        try:
            self._connect(dsn, timeout, reader=False)
        except PgUnreachable as exc:
            if not wait:
                raise
            self._open_later(workspace, agent, exc)
            return
        try:
            self._open(workspace, agent)
        except BaseException:
            self._conn.close()
            raise
        self._ensure_vector_index()

    def _open_later(self, workspace: uuid.UUID, agent: str, exc: PgUnreachable) -> None:
        """The server could not be reached when the store was made (a host started during a
        database outage): every method says IndexOffline, as when the server is lost later, and
        the first connection that succeeds looks the tenant up (:meth:`_open`) before anything
        else runs on it.  Until then nothing is known of the tenant, so nothing is assumed: no
        private rows are seen (``sees_private``), none can be read or written."""
        self._conn = _UNOPENED
        self._pending = (workspace, agent)
        self.workspace = workspace
        self.sees_private = False
        self._privacies = [False]
        self._lost = _offline_reason(self, exc)
        self._retry_at = time.monotonic() + RETRY_S

    @classmethod
    def reading(cls, dsn: str, workspace: uuid.UUID, agent: str, timeout: float = CONNECT_TIMEOUT) -> PgStore:
        """Another tenant's index, read (never written) through this login's reader grant on it
        (``memfs pg grant --agent AGENT --reader ME``): its public rows only, as row-level
        security shows them.  ``agent`` is looked for in ``workspace`` first, then among every
        tenant this login may read; PgError naming the agent when it may read none (whether that
        agent exists is not told: without a grant a login cannot see its tenant)."""
        store = cls.__new__(cls)
        store._connect(dsn, timeout, reader=True)
        try:
            store._open_reader(workspace, agent)
        except BaseException:
            store._conn.close()
            raise
        return store

    def _connect(self, dsn: str, timeout: float, reader: bool) -> None:
        """The state every store starts with, and its connection (one place for both the
        tenant's own store and a reader's, so neither misses what the other gets)."""
        self.lock = threading.RLock()
        self.outdated = False
        self._has_vectors = False
        # The tenant's HNSW index is known to be there (a reader never builds the owner's: it
        # cannot write); a write added chunks or vectors (see whether the index is due).
        self._vector_index = reader
        self._grew = False
        self._index_retry = 0.0
        self.dsn = dsn
        self.reader = reader  # True: another tenant's public rows, read through a reader grant
        self.timeout = timeout
        self._depth = 0  # transactions open on _conn (nested: savepoints)
        self._retry_at = 0.0  # no reconnect before this (time.monotonic())
        self._lost = ""  # why the last reconnect failed
        self._closed = False
        self._pending: tuple[uuid.UUID, str] | None = None  # of a store not opened yet (_open_later)
        self._conn = _UNOPENED  # until connect returns: a store made without its server has this one
        self._conn = connect(dsn, timeout=timeout)

    def _open_reader(self, workspace: uuid.UUID, agent: str) -> None:
        import psycopg
        from pgvector.psycopg import register_vector

        try:
            register_vector(self.conn)
            self._bound_reads(self.conn)
            # A reader grant is an access row without writes; the login's own tenant (writes) is
            # not "another agent", whatever its name.
            rows = self.conn.execute(
                "SELECT t.tenant_id, t.workspace_id FROM memfs.tenants t JOIN memfs.access a "
                "ON a.tenant_id = t.tenant_id AND a.role = current_user AND NOT a.writes "
                "WHERE t.agent = %s ORDER BY t.workspace_id <> %s, t.tenant_id", (agent, workspace)).fetchall()
        except psycopg.Error as exc:
            raise PgError(f"cannot open the index at {redacted(self.dsn)}: {str(exc).strip().splitlines()[0]}") from None
        user = self.conn.info.user
        if not rows:
            raise PgError(f"agent {agent!r} is not readable by role {user}: its owner grants it with `memfs pg grant "
                          f"--agent {agent} --reader READER` (READER: the agent this login belongs to; with `--workspace "
                          "THEIRS --reader-workspace MINE` when the two are not one workspace)")
        if rows[0][1] != workspace and len(rows) > 1:
            raise PgError(f"agent {agent!r} is readable in {len(rows)} workspaces ({', '.join(str(r[1]) for r in rows)})"
                          f": search it from one of them (--workspace)")
        self.tenant = int(rows[0][0])
        self.workspace = uuid.UUID(str(rows[0][1]))
        self.sees_private = False  # a reader grant never shows private rows; RLS enforces it too
        self._privacies = [False]

    def _open(self, workspace: uuid.UUID, agent: str) -> None:
        import psycopg
        from pgvector.psycopg import register_vector

        check_server(self.conn, create_vector=False)
        try:
            found = version(self.conn)
            if found == 0:
                raise PgError(f"{redacted(self.dsn)} has no memfs schema: run `memfs pg init DSN` first")
            if found < LATEST:
                raise PgError(f"the memfs schema is version {found}, this memfs needs {LATEST}: run `memfs pg init DSN`")
            register_vector(self.conn)
            self._bound_reads(self.conn)
            row = self.conn.execute(
                "SELECT t.tenant_id, a.private FROM memfs.tenants t JOIN memfs.access a "
                "ON a.tenant_id = t.tenant_id AND a.role = current_user AND a.writes "
                "WHERE t.workspace_id = %s AND t.agent = %s", (workspace, agent)).fetchone()
        except psycopg.Error as exc:
            raise PgError(f"cannot open the index at {redacted(self.dsn)}: {str(exc).strip().splitlines()[0]}") from None
        if row is None:
            user = self.conn.info.user
            raise PgError(f"role {user} is not the login of agent {agent!r} of workspace {workspace}"
                          f"{self._whose(workspace, agent)}: use the DSN `memfs pg grant --workspace WORKSPACE "
                          f"--agent {agent}` prints")
        if self._needs_private and not row[1]:
            raise PgError(f"this DSN is the shared-mode login of agent {agent} (it cannot see private rows): the main "
                          "mode needs the login `memfs pg grant` printed without --shared, or use --mode shared")
        self.tenant = int(row[0])
        self.workspace = workspace
        self.sees_private = bool(row[1])
        # The statistics rows this role may lock, public first (the order memfs.index.storage.postgres.terms uses).
        self._privacies = [False, True] if self.sees_private else [False]
        with self._writing() as conn:
            conn.execute("INSERT INTO memfs.meta(tenant_id, key, value) VALUES (%s, 'generation', '0'), "
                         "(%s, 'content_generation', '0') ON CONFLICT DO NOTHING", (self.tenant, self.tenant))

    @property
    def location(self) -> str:
        """Where the index is, to tell a person: the server and database (no password)."""
        tenant = self.__dict__.get("tenant", "not known yet: its server has not answered")
        return f"{redacted(self.dsn)} (tenant {tenant})"

    def _whose(self, workspace: uuid.UUID, agent: str) -> str:
        """What the login is for, when it is not for (workspace, agent): a typo in --agent is then
        named (``did you mean``), instead of sending the user to grant a new tenant."""
        import psycopg

        try:
            rows = self.conn.execute(
                "SELECT t.agent, t.workspace_id FROM memfs.tenants t JOIN memfs.access a ON a.tenant_id = t.tenant_id "
                "AND a.role = current_user AND a.writes ORDER BY t.tenant_id").fetchall()
        except psycopg.Error:
            return ""
        if not rows:
            return ""
        mine, ws = str(rows[0][0]), uuid.UUID(str(rows[0][1]))
        if ws == workspace:
            return f" (it is agent {mine!r}'s: did you mean --agent {mine}?)"
        return f" (it is agent {mine!r}'s of workspace {ws}: another workspace's DSN, or a copy of its .memfs-id?)"

    def close(self) -> None:
        with self.lock:
            self._closed = True
            self._conn.close()

    # -- the connection, and its loss ------------------------------------------------------------

    @property
    def conn(self):  # -> psycopg.Connection
        """The open connection, made again if the last one was lost (IndexOffline if it cannot be)."""
        if not self._conn.closed or self._closed:
            return self._conn
        with self.lock:
            if not self._conn.closed:
                return self._conn
            if self._depth:  # a transaction of the lost connection: it is gone whole
                raise IndexOffline(f"the index is unavailable: PostgreSQL at {self._where()} closed the connection "
                                   "during a transaction")
            if time.monotonic() < self._retry_at:
                raise IndexOffline(self._lost)
            if self._pending is not None:
                return self._first_open()
            fresh = None
            try:
                fresh = connect(self.dsn, timeout=self.timeout)
                from pgvector.psycopg import register_vector

                register_vector(fresh)
                self._bound_reads(fresh)
            except Exception as exc:  # PgError, or the server going again while vectors are registered
                if fresh is not None:
                    fresh.close()
                self._retry_at = time.monotonic() + RETRY_S
                self._lost = _offline_reason(self, exc)
                raise IndexOffline(self._lost) from None
            self._conn, self._lost, self._retry_at = fresh, "", 0.0
            return fresh

    def __getattr__(self, name: str) -> object:
        """Only for attributes not set: the tenant of a store not opened yet, looked up now if
        its server answers (IndexOffline if it does not), as every call on the store would."""
        if name == "tenant" and self.__dict__.get("_pending") is not None:
            self.conn  # noqa: B018  (opens the store, or says why it cannot be)
            if "tenant" in self.__dict__:
                return self.__dict__["tenant"]
            raise IndexOffline(self._lost or f"the index is unavailable: PostgreSQL at {self._where()} has not "
                               "answered yet")
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def _first_open(self):  # -> psycopg.Connection
        """The first connection of a store made while its server could not be reached, and the
        tenant looked up on it (under :attr:`lock`).  A server that answers with a refusal (a
        password, another tenant's login, no schema, the main mode on a shared-mode login) is
        not served: the refusal is logged and every call says it, as IndexOffline, asking again
        only every :data:`REFUSED_RETRY_S`."""
        assert self._pending is not None
        workspace, agent = self._pending
        try:
            self._conn = connect(self.dsn, timeout=self.timeout)
            self._open(workspace, agent)
        except Exception as exc:  # PgError (refused or unreachable), IndexOffline (lost during _open)
            # Refused: the server answered, on a connection still open (or at connect, which says so).
            lost = isinstance(exc, (PgUnreachable, IndexOffline)) or (
                self._conn.closed and self._conn is not _UNOPENED)
            self._conn.close()
            self._conn = _UNOPENED
            reason = str(exc) if isinstance(exc, IndexOffline) else _offline_reason(self, exc)
            if not lost and reason != self._lost:
                log.error("%s: the index is not used until that is fixed (the files are served and written as "
                          "ever; searches say the index is unavailable, and why)", reason)
            self._lost = reason
            self._retry_at = time.monotonic() + (RETRY_S if lost else REFUSED_RETRY_S)
            raise IndexOffline(reason) from None
        self._pending, self._lost, self._retry_at = None, "", 0.0
        log.info("the index's server answers: tenant %s of workspace %s opened", self.tenant, workspace)
        with contextlib.suppress(IndexOffline):
            self._ensure_vector_index()
        return self._conn

    def _bound_reads(self, conn) -> None:
        """A read (a statement outside a transaction) the server has not answered within the
        timeout is cancelled by the server itself: a search never waits longer on a server that is
        stuck (its locks, its load).  A write's transaction lifts the limit (_writing): indexing
        a large file, or a rebuild's deletes, may take as long as they take."""
        conn.execute("SELECT set_config('statement_timeout', %s, false)", (f"{int(self.timeout * 1000)}ms",))

    def _where(self) -> str:
        from psycopg.conninfo import conninfo_to_dict

        try:
            parts = conninfo_to_dict(self.dsn)
        except Exception:
            return "(unparsable DSN)"
        return f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}"

    def _lost_now(self, exc: BaseException) -> IndexOffline | None:
        """IndexOffline if ``exc`` (a driver error) means the server is gone or did not answer in
        time; None for any other error (a bug, a constraint), which stays what it is."""
        import psycopg

        if not isinstance(exc, psycopg.Error):
            return None
        if isinstance(exc, psycopg.errors.QueryCanceled) and not self._conn.closed:
            return IndexOffline(f"the index is unavailable: PostgreSQL at {self._where()} did not answer within "
                                f"{self.timeout:g} s (index.timeout_s)")
        if self._conn.closed or isinstance(exc, psycopg.errors.AdminShutdown):
            self._retry_at = 0.0  # the next call may reconnect at once (a restart is quick)
            return IndexOffline(_offline_reason(self, exc))
        return None

    # -- transactions and metadata ---------------------------------------------------------------

    @contextmanager
    def _writing(self) -> Iterator:
        """One transaction (inside a batch: a savepoint of the batch's); once the outermost one
        has committed, the HNSW index if a write made it due."""
        if self.reader:  # row-level security refuses it as well; this says so in words
            raise PgError(f"the index of tenant {self.tenant} is only read here (a reader grant)")
        committed = False
        with self.lock:
            conn = self.conn
            self._depth += 1
            try:
                with conn.transaction():
                    if self._depth == 1:
                        conn.execute("SET LOCAL statement_timeout = 0")
                    yield conn
                committed = self._depth == 1
            except Exception as exc:
                offline = self._lost_now(exc)
                if offline is None:
                    raise
                raise offline from None
            finally:
                self._depth -= 1
        if committed and self._grew:
            self._grew = False
            try:
                self._ensure_vector_index()
            except IndexOffline:  # the server went after the write committed: built at the next one
                self._grew = True

    def _ensure_vector_index(self) -> None:
        """Have the server build the tenant's HNSW index when the tenant has reached
        knn.EXACT_MAX chunks and has none for its dimension.  Slow (seconds per few thousand
        chunks) and holding a lock on the partition until done, so never inside a write's
        transaction, and on a connection of its own: this store's searches go on meanwhile.
        A failure is logged and tried again after INDEX_RETRY (KNN scans exactly meanwhile)."""
        import psycopg

        if self._vector_index or time.monotonic() < self._index_retry:
            return
        with self.lock:
            dims = int(self.get_meta("dims") or 0)
            if not dims:
                return
            if knn.has_index(self.conn, self.tenant, dims):
                self._vector_index = True
                return
            if knn.tenant_vectors(self.conn, self.tenant) < knn.EXACT_MAX:
                return
        began = time.monotonic()
        try:
            with connect(self.dsn, timeout=self.timeout) as conn:
                name = knn.build_index(conn, dims)
        except (PgError, psycopg.Error) as exc:
            self._index_retry = time.monotonic() + INDEX_RETRY
            log.warning("tenant %s: cannot build its HNSW index (%s); nearest chunks are found by an exact "
                        "scan until it is built", self.tenant, str(exc).strip().splitlines()[0])
            return
        self._vector_index = True
        log.info("tenant %s: HNSW index %s built in %.1f s", self.tenant, name, time.monotonic() - began)

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Many changes as one transaction."""
        with self._writing():
            yield

    @contextmanager
    def transaction(self, vectors_only: bool = False) -> Iterator:
        """One atomic change that bumps the generation (and the content generation, unless it
        only adds vectors), as the SQLite store's."""
        with self._writing() as conn:
            yield conn
            keys = ["generation"] if vectors_only else ["generation", "content_generation"]
            conn.execute("UPDATE memfs.meta SET value = (value::bigint + 1)::text WHERE tenant_id = %s "
                         "AND key = ANY (%s)", (self.tenant, keys))

    def _take_ids(self, conn) -> None:
        """Lock the tenant's statistics rows: the writers of one tenant take ids one at a time."""
        conn.execute("INSERT INTO memfs.corpus_stats(tenant_id, private) SELECT %s, p FROM unnest(%s::boolean[]) p "
                     "ORDER BY p ON CONFLICT (tenant_id, private) DO NOTHING", (self.tenant, self._privacies))
        conn.execute("SELECT 1 FROM memfs.corpus_stats WHERE tenant_id = %s ORDER BY private FOR UPDATE",
                     (self.tenant,))

    def settle(self) -> None:
        """Nothing to fold in: the server's writes are whole when committed."""

    def clear(self) -> None:
        """Every row of the tenant's index, gone (a rebuild refills it from the files)."""
        with self._writing() as conn:
            self._take_ids(conn)
            for table in ("chunk_terms", "term_df", "units", "chunks", "files"):
                conn.execute(f"DELETE FROM memfs.{table} WHERE tenant_id = %s", (self.tenant,))
            conn.execute("UPDATE memfs.corpus_stats SET chunks = 0, total_length = 0 WHERE tenant_id = %s",
                         (self.tenant,))
            conn.execute("DELETE FROM memfs.meta WHERE tenant_id = %s AND key NOT IN "
                         "('generation', 'content_generation')", (self.tenant,))
            conn.execute("UPDATE memfs.meta SET value = (value::bigint + 1)::text WHERE tenant_id = %s", (self.tenant,))
            self._has_vectors = False
            self._vector_index = False

    def get_meta(self, key: str) -> str | None:
        with self.lock:
            row = self.conn.execute("SELECT value FROM memfs.meta WHERE tenant_id = %s AND key = %s",
                                    (self.tenant, key)).fetchone()
        return None if row is None else str(row[0])

    def set_meta(self, key: str, value: str) -> None:
        with self._writing() as conn:
            conn.execute("INSERT INTO memfs.meta(tenant_id, key, value) VALUES (%s, %s, %s) "
                         "ON CONFLICT (tenant_id, key) DO UPDATE SET value = excluded.value", (self.tenant, key, value))

    @property
    def fingerprint(self) -> dict[str, object] | None:
        raw = self.get_meta("fingerprint")
        return None if raw is None else json.loads(raw)

    def set_fingerprint(self, fingerprint: dict[str, object], dims: int) -> None:
        """Record what built this index and the dimension of its vectors (an HNSW index of
        another dimension is dropped; the one of this dimension is built when due)."""
        with self._writing() as conn:
            self.set_meta("fingerprint", json.dumps(fingerprint, sort_keys=True))
            if dims and self.get_meta("dims") is None:
                self.set_meta("dims", str(int(dims)))
                # An earlier model's index would refuse every vector of the new dimension.
                if knn.stale_indexes(conn, self.tenant, int(dims)):
                    knn.build_index(conn, int(dims), build=False)
                self._vector_index = False
                self._grew = True

    @property
    def has_vectors(self) -> bool:
        if not self._has_vectors:  # once a tenant has a dimension it keeps it (clear() forgets it)
            self._has_vectors = bool(int(self.get_meta("dims") or 0))
        return self._has_vectors

    @property
    def generation(self) -> int:
        return int(self.get_meta("generation") or 0)

    @property
    def content_generation(self) -> int:
        return int(self.get_meta("content_generation") or 0)

    # -- files -------------------------------------------------------------------------------------

    def file(self, path: str) -> FileRecord | None:
        with self.lock:
            row = self.conn.execute(f"SELECT {_FILE_COLUMNS} FROM memfs.files WHERE tenant_id = %s AND path = %s",
                                    (self.tenant, path)).fetchone()
        return None if row is None else _file_record(row)

    def files(self) -> list[FileRecord]:
        with self.lock:
            rows = self.conn.execute(f"SELECT {_FILE_COLUMNS} FROM memfs.files WHERE tenant_id = %s "
                                     "ORDER BY path COLLATE \"C\"", (self.tenant,)).fetchall()
        return [_file_record(r) for r in rows]

    def paths_under(self, rel: str) -> list[str]:
        """Indexed paths equal to ``rel`` or below it, in SQLite's (byte) order."""
        with self.lock:
            if rel:
                rows = self.conn.execute(
                    "SELECT path FROM memfs.files WHERE tenant_id = %s AND (path = %s OR starts_with(path, %s)) "
                    "ORDER BY path COLLATE \"C\"", (self.tenant, rel, rel + "/")).fetchall()
            else:  # SQLite's range '' .. '0' holds the paths that start with '/' only: none
                rows = self.conn.execute("SELECT path FROM memfs.files WHERE tenant_id = %s AND path = ''",
                                         (self.tenant,)).fetchall()
        return [str(r[0]) for r in rows]

    def problem_files(self) -> dict[str, tuple[str, str]]:
        with self.lock:
            rows = self.conn.execute("SELECT path, error, warning FROM memfs.files WHERE tenant_id = %s "
                                     "AND (error <> '' OR warning <> '')", (self.tenant,)).fetchall()
        return {str(r[0]): (str(r[1]), str(r[2])) for r in rows}

    def public_paths(self) -> list[str]:
        with self.lock:
            rows = self.conn.execute("SELECT path FROM memfs.files WHERE tenant_id = %s AND NOT private",
                                     (self.tenant,)).fetchall()
        return [str(r[0]) for r in rows]

    def provisional_paths(self, include_private: bool = True) -> list[str]:
        scope = "" if include_private else " AND NOT private"
        with self.lock:
            rows = self.conn.execute(f"SELECT path FROM memfs.files WHERE tenant_id = %s AND starts_with(hash, %s)"
                                     f"{scope} ORDER BY indexed_at", (self.tenant, PROVISIONAL_HASH)).fetchall()
        return [str(r[0]) for r in rows]

    def provisional_lines(self, include_private: bool = True) -> list[tuple[str, int, bool]]:
        """As the SQLite store's: ``(path, lines its provisional chunks hold, jsonl)``."""
        scope = "" if include_private else " AND NOT f.private"
        with self.lock:
            rows = self.conn.execute(_PROVISIONAL_LINES.format(scope=scope),
                                     {"t": self.tenant, "p": PROVISIONAL_HASH}).fetchall()
        return [(str(r[0]), int(r[2]), bool(r[1])) for r in rows]

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
        """As :meth:`memfs.index.storage.sqlite.store.Store.replace_file`: a file's chunks (from ``from_line``)
        swapped for new ones in one transaction; how many still need an embedding."""
        if record.private and not self.sees_private:
            # A shared-mode login may not hold private rows (row-level security refuses them):
            # its mounts index what they may see, and the agent's own login the rest.
            return 0
        pending = 0
        private = bool(record.private)
        jsonl = bool(FileKind(record.kind).is_jsonl) if record.kind in _KINDS and not provisional else False
        found = terms.tokenize(fts_bodies)
        self._grew = True
        with self.transaction() as conn:
            self._take_ids(conn)
            self._delete_chunks(conn, record.path, from_line or 0)
            vec = self.has_vectors
            first_chunk = int(conn.execute("SELECT coalesce(max(chunk_id), 0) FROM memfs.chunks WHERE tenant_id = %s",
                                           (self.tenant,)).fetchone()[0]) + 1
            next_unit = int(conn.execute("SELECT coalesce(max(unit_id), 0) FROM memfs.units WHERE tenant_id = %s",
                                         (self.tenant,)).fetchone()[0]) + 1
            chunk_rows, unit_rows, postings = [], [], []
            for position, (chunk, digest) in enumerate(zip(chunks, chunk_hashes)):
                chunk_id = first_chunk + position
                vector = cached.get(digest) if vec and not provisional else None
                first_day, last_day = days[position] if days else (None, None)
                embedding = None if vector is None else np.frombuffer(vector, dtype=np.float32)
                chunk_rows.append((self.tenant, chunk_id, record.path, chunk.start_line, chunk.end_line, digest,
                                   chunk.text, provisional or vector is not None, provisional, private, jsonl,
                                   first_day, last_day, chunk.chat_id, chunk.chat_title, found[position].length,
                                   embedding))
                postings.append((chunk_id, private, found[position]))
                hashes = unit_hashes[position] if unit_hashes else []
                for unit, unit_hash in zip(chunk.units, hashes):
                    unit_vector = cached.get(unit_hash)
                    unit_rows.append((self.tenant, next_unit, chunk_id, unit.start_line, unit.end_line, unit_hash,
                                      unit.text, unit.context, pack_unit_vector(unit_vector) if unit_vector is not None else None,
                                      unit.reading, private))
                    next_unit += 1
                    if unit_vector is None and vec:
                        pending += 1
                if not provisional and vector is None and vec:
                    pending += 1
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memfs.chunks(tenant_id, chunk_id, path, start_line, end_line, hash, text, embedded, "
                    "provisional, private, jsonl, first_day, last_day, chat_id, chat_title, length, embedding) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", chunk_rows)
                cur.executemany(
                    "INSERT INTO memfs.units(tenant_id, unit_id, chunk_id, start_line, end_line, hash, text, context, "
                    "packed, reading, private) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", unit_rows)
            terms.add(conn, self.tenant, postings)
            total = int(conn.execute("SELECT count(*) FROM memfs.chunks WHERE tenant_id = %s AND path = %s",
                                     (self.tenant, record.path)).fetchone()[0])
            conn.execute(
                "INSERT INTO memfs.files(tenant_id, path, kind, hash, mtime, size, chunks, error, indexed_at, private, "
                "warning, tail_hash, resume_line, resume_offset) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, "
                "%s, %s, %s) ON CONFLICT (tenant_id, path) DO UPDATE SET kind = excluded.kind, hash = excluded.hash, "
                "mtime = excluded.mtime, size = excluded.size, chunks = excluded.chunks, error = excluded.error, "
                "indexed_at = excluded.indexed_at, private = excluded.private, warning = excluded.warning, "
                "tail_hash = excluded.tail_hash, resume_line = excluded.resume_line, "
                "resume_offset = excluded.resume_offset",
                (self.tenant, record.path, record.kind, record.hash, record.mtime, record.size, total, record.error,
                 time.time(), private, record.warning, record.tail_hash, record.resume_line, record.resume_offset))
        return pending

    def _delete_chunks(self, conn, path: str, from_line: int = 0) -> None:
        ids = [int(r[0]) for r in conn.execute(
            "SELECT chunk_id FROM memfs.chunks WHERE tenant_id = %s AND path = %s AND start_line >= %s",
            (self.tenant, path, from_line)).fetchall()]
        if not ids:
            return
        terms.remove(conn, self.tenant, ids)  # reads the chunks' privacy and length: before they go
        conn.execute("DELETE FROM memfs.units WHERE tenant_id = %s AND chunk_id = ANY (%s)", (self.tenant, ids))
        conn.execute("DELETE FROM memfs.chunks WHERE tenant_id = %s AND chunk_id = ANY (%s)", (self.tenant, ids))

    def remove_file(self, path: str) -> bool:
        with self.transaction() as conn:
            self._take_ids(conn)
            existed = conn.execute("SELECT 1 FROM memfs.files WHERE tenant_id = %s AND path = %s",
                                   (self.tenant, path)).fetchone() is not None
            self._delete_chunks(conn, path)
            conn.execute("DELETE FROM memfs.files WHERE tenant_id = %s AND path = %s", (self.tenant, path))
        return existed

    def rename_file(self, old: str, new: str, kind: str, private: bool) -> bool:
        """Move a file's chunks to a new path, as the SQLite store's (False: index it anew)."""
        with self.transaction() as conn:
            row = conn.execute("SELECT private FROM memfs.files WHERE tenant_id = %s AND path = %s",
                               (self.tenant, old)).fetchone()
            if row is None or bool(row[0]) != private:
                return False
            self._take_ids(conn)
            self._delete_chunks(conn, new)
            conn.execute("DELETE FROM memfs.files WHERE tenant_id = %s AND path = %s", (self.tenant, new))
            conn.execute("UPDATE memfs.files SET path = %s, kind = %s WHERE tenant_id = %s AND path = %s",
                         (new, kind, self.tenant, old))
            conn.execute("UPDATE memfs.chunks SET path = %s WHERE tenant_id = %s AND path = %s", (new, self.tenant, old))
        return True

    # -- copying to and from another store (memfs.index.storage.moving) -----------------------------------

    def export_files(self, paths: Sequence[str]) -> list[FileRows]:
        """The rows of these files (those indexed), as they are: ids, states, vectors."""
        wanted = list(paths)
        if not wanted:
            return []
        with self.lock:
            records = self.conn.execute(f"SELECT {_FILE_COLUMNS}, indexed_at FROM memfs.files WHERE tenant_id = %s "
                                        "AND path = ANY (%s)", (self.tenant, wanted)).fetchall()
            chunk_rows = self.conn.execute(
                "SELECT chunk_id, path, start_line, end_line, hash, text, embedded, provisional, private, jsonl, "
                "first_day, last_day, chat_id, chat_title, embedding FROM memfs.chunks WHERE tenant_id = %s "
                "AND path = ANY (%s) ORDER BY chunk_id", (self.tenant, wanted)).fetchall()
            ids = [int(r[0]) for r in chunk_rows]
            unit_rows = self.conn.execute(f"SELECT {_UNIT_COLUMNS} FROM memfs.units WHERE tenant_id = %s "
                                          "AND chunk_id = ANY (%s) ORDER BY unit_id",
                                          (self.tenant, ids)).fetchall() if ids else []
        chunks: dict[str, list[ChunkRow]] = {}
        path_of: dict[int, str] = {}
        for r in chunk_rows:
            state = PROVISIONAL_STATE if r[7] else EMBEDDED if r[6] and r[14] is not None else PENDING
            chunks.setdefault(r[1], []).append(ChunkRow(
                int(r[0]), r[1], r[2], r[3], r[4], r[5], state, bool(r[8]), bool(r[9]), r[10], r[11], r[12], r[13],
                None if r[14] is None or state != EMBEDDED else _float32(r[14])))
            path_of[int(r[0])] = r[1]
        units: dict[str, list[StoredUnit]] = {}
        for r in unit_rows:
            units.setdefault(path_of[int(r[1])], []).append(_unit(r))
        order = {path: position for position, path in enumerate(wanted)}
        return [FileRows(_file_record(r[:-1]), float(r[-1]), tuple(chunks.get(r[0], ())), tuple(units.get(r[0], ())))
                for r in sorted(records, key=lambda r: order[r[0]])]

    def import_files(self, files: Sequence[FileRows]) -> None:
        """As :meth:`memfs.index.storage.sqlite.store.Store.import_files`: these files' rows, ids and vectors as
        given, in one transaction, replacing what the tenant had of them; their postings and
        statistics made from the chunks' text as indexing makes them."""
        if not files:
            return
        if not self.sees_private and any(rows.record.private for rows in files):
            raise PgError(f"role {self.conn.info.user} may not hold private rows (a shared-mode login): "
                          "use the agent's own login")
        paths = [rows.record.path for rows in files]
        chunks = [c for rows in files for c in rows.chunks]
        found = terms.tokenize([fts_body(c.text) for c in chunks])
        with self.transaction() as conn:
            self._take_ids(conn)
            vec = self.has_vectors
            for path in paths:
                self._delete_chunks(conn, path)
            conn.execute("DELETE FROM memfs.files WHERE tenant_id = %s AND path = ANY (%s)", (self.tenant, paths))
            chunk_rows, postings = [], []
            for chunk, counted in zip(chunks, found):
                embedded = chunk.state == EMBEDDED and vec and chunk.vector is not None
                provisional = chunk.state == PROVISIONAL_STATE
                chunk_rows.append((self.tenant, chunk.id, chunk.path, chunk.start_line, chunk.end_line, chunk.hash,
                                   chunk.text, embedded or provisional, provisional, chunk.private, chunk.jsonl,
                                   chunk.first_day, chunk.last_day, chunk.chat_id, chunk.chat_title, counted.length,
                                   np.frombuffer(chunk.vector, dtype=np.float32) if embedded else None))
                postings.append((chunk.id, chunk.private, counted))
            with conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO memfs.chunks(tenant_id, chunk_id, path, start_line, end_line, hash, text, embedded, "
                    "provisional, private, jsonl, first_day, last_day, chat_id, chat_title, length, embedding) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)", chunk_rows)
                cur.executemany(
                    "INSERT INTO memfs.units(tenant_id, unit_id, chunk_id, start_line, end_line, hash, text, context, "
                    "packed, reading, private) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)",
                    [(self.tenant, u.id, u.chunk_id, u.start_line, u.end_line, u.hash, u.text, u.context, u.vector,
                      u.reading, rows.record.private) for rows in files for u in rows.units])
                cur.executemany(
                    "INSERT INTO memfs.files(tenant_id, path, kind, hash, mtime, size, chunks, error, indexed_at, "
                    "private, warning, tail_hash, resume_line, resume_offset) VALUES (%s, %s, %s, %s, %s, %s, %s, "
                    "%s, %s, %s, %s, %s, %s, %s)",
                    [(self.tenant, r.path, r.kind, r.hash, r.mtime, r.size, r.chunks, r.error, rows.indexed_at,
                      r.private, r.warning, r.tail_hash, r.resume_line, r.resume_offset)
                     for rows in files for r in [rows.record]])
            terms.add(conn, self.tenant, postings)

    def cache_entries(self, provider: str, models: Iterable[str], hashes: Iterable[str]) -> list[CachedVector]:
        """The tenant's cached vectors of these text hashes made by ``provider`` under any of
        these model names (the whole key, so the primary key finds them), private or not as
        the tenant's cache holds them."""
        names, wanted = sorted(set(models)), list(dict.fromkeys(hashes))
        if not wanted or not names:
            return []
        with self.lock:
            rows = self.conn.execute(
                "SELECT provider, model, hash, vector, private FROM memfs.tenant_embeddings WHERE tenant_id = %s "
                "AND provider = %s AND model = ANY (%s) AND hash = ANY (%s)",
                (self.tenant, provider, names, wanted)).fetchall()
        return [CachedVector(str(r[0]), str(r[1]), str(r[2]), _float32(r[3]), bool(r[4])) for r in rows]

    def put_cache_entries(self, entries: Sequence[CachedVector]) -> None:
        """Add cache entries to the tenant's cache in one transaction (:meth:`_cache` for each)."""
        if not self.sees_private and any(e.private for e in entries):
            raise PgError(f"role {self.conn.info.user} may not hold private rows (a shared-mode login): "
                          "use the agent's own login")
        with self._writing() as conn, conn.cursor() as cur:
            for private in (True, False):  # private first: a public entry of the same text then keeps it so
                cur.executemany(_CACHE_PRIVATE if private else _CACHE_PUBLIC,
                                [(self.tenant, e.provider, e.model, e.hash, len(e.vector) // 4,
                                  np.frombuffer(e.vector, dtype=np.float32)) for e in entries if e.private == private])

    # -- embeddings ----------------------------------------------------------------------------------

    def cached_vectors(self, provider: str, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        wanted = list(dict.fromkeys(hashes))
        if not wanted:
            return {}
        with self.lock:
            rows = self.conn.execute(
                "SELECT hash, vector FROM memfs.tenant_embeddings WHERE tenant_id = %s AND provider = %s "
                "AND model = %s AND hash = ANY (%s)", (self.tenant, provider, model, wanted)).fetchall()
        return {str(h): _float32(v) for h, v in rows}

    def _cache(self, conn, provider: str, model: str, digest: str, vector: np.ndarray, private: bool) -> None:
        """One entry of the tenant's own cache: private text's is private (and makes an entry of
        the same text private), public text's leaves an entry already there as it is."""
        conn.execute(_CACHE_PRIVATE if private else _CACHE_PUBLIC,
                     (self.tenant, provider, model, digest, len(vector), vector))

    def pending_chunks(self, limit: int, paths: Sequence[str] = (), since: str | None = None,
                       written_since: float | None = None) -> list[StoredChunk]:
        columns = "chunk_id, path, start_line, end_line, hash, text, jsonl"
        base = f"SELECT {columns} FROM memfs.chunks WHERE tenant_id = %s AND NOT embedded"
        if written_since is not None:
            sql = ("SELECT c.chunk_id, c.path, c.start_line, c.end_line, c.hash, c.text, c.jsonl FROM memfs.files f "
                   "JOIN memfs.chunks c ON c.tenant_id = f.tenant_id AND c.path = f.path WHERE f.tenant_id = %s "
                   "AND c.tenant_id = %s AND f.mtime >= %s AND NOT c.embedded "
                   "ORDER BY f.mtime DESC, c.chunk_id DESC LIMIT %s")
            args: tuple[object, ...] = (self.tenant, self.tenant, written_since, limit)
        elif paths:
            sql, args = f"{base} AND path = ANY (%s) ORDER BY chunk_id DESC LIMIT %s", (self.tenant, list(paths), limit)
        elif since is not None:
            sql = f"{base} AND last_day >= %s ORDER BY last_day COLLATE \"C\" DESC, chunk_id DESC LIMIT %s"
            args = (self.tenant, since, limit)
        else:
            sql, args = f"{base} ORDER BY chunk_id DESC LIMIT %s", (self.tenant, limit)
        with self.lock:
            rows = self.conn.execute(sql, args).fetchall()
        return [StoredChunk(int(r[0]), *r[1:6], bool(r[6])) for r in rows]

    def pending_units(self, limit: int, paths: Sequence[str] = (), since: str | None = None,
                      written_since: float | None = None) -> list[StoredUnit]:
        columns = ", ".join(f"u.{c}" for c in _UNIT_COLUMNS.split(", "))
        base = (f"SELECT {columns} FROM memfs.units u JOIN memfs.chunks c ON c.tenant_id = u.tenant_id "
                "AND c.chunk_id = u.chunk_id WHERE u.tenant_id = %s AND c.tenant_id = %s AND u.packed IS NULL "
                "AND c.embedded")
        if written_since is not None:
            sql = (f"SELECT {columns} FROM memfs.files f JOIN memfs.chunks c ON c.tenant_id = f.tenant_id "
                   "AND c.path = f.path JOIN memfs.units u ON u.tenant_id = c.tenant_id AND u.chunk_id = c.chunk_id "
                   "WHERE f.tenant_id = %s AND c.tenant_id = %s AND u.tenant_id = %s AND f.mtime >= %s "
                   "AND u.packed IS NULL AND c.embedded ORDER BY f.mtime DESC, u.unit_id DESC LIMIT %s")
            args: tuple[object, ...] = (self.tenant, self.tenant, self.tenant, written_since, limit)
        elif paths:
            sql, args = (f"{base} AND c.path = ANY (%s) ORDER BY u.unit_id DESC LIMIT %s",
                         (self.tenant, self.tenant, list(paths), limit))
        elif since is not None:
            sql = f"{base} AND c.last_day >= %s ORDER BY c.last_day COLLATE \"C\" DESC, u.unit_id DESC LIMIT %s"
            args = (self.tenant, self.tenant, since, limit)
        else:
            sql, args = f"{base} ORDER BY u.unit_id DESC LIMIT %s", (self.tenant, self.tenant, limit)
        with self.lock:
            rows = self.conn.execute(sql, args).fetchall()
        return [_unit(r) for r in rows]

    def pending_count(self) -> int:
        if not self.has_vectors:
            return 0
        with self.lock:
            row = self.conn.execute("SELECT (SELECT count(*) FROM memfs.chunks WHERE tenant_id = %s AND NOT embedded) "
                                    "+ (SELECT count(*) FROM memfs.units WHERE tenant_id = %s AND packed IS NULL)",
                                    (self.tenant, self.tenant)).fetchone()
        return int(row[0])

    def has_pending(self) -> bool:
        if not self.has_vectors:
            return False
        with self.lock:
            row = self.conn.execute("SELECT EXISTS (SELECT 1 FROM memfs.chunks WHERE tenant_id = %s AND NOT embedded) "
                                    "OR EXISTS (SELECT 1 FROM memfs.units WHERE tenant_id = %s AND packed IS NULL)",
                                    (self.tenant, self.tenant)).fetchone()
        return bool(row[0])

    def any_private(self, chunk_ids: Sequence[int]) -> bool:
        if not chunk_ids:
            return False
        with self.lock:
            row = self.conn.execute("SELECT 1 FROM memfs.chunks WHERE tenant_id = %s AND private AND "
                                    "chunk_id = ANY (%s) LIMIT 1", (self.tenant, list(chunk_ids))).fetchone()
        return row is not None

    def units_of(self, chunk_ids: Iterable[int], texts: Mapping[int, str] | None = None) -> list[StoredUnit]:
        """The units of the given chunks, in file order (a provisional chunk's lines as units, as
        the SQLite store gives them).  ``texts`` is not needed: a unit row keeps its text."""
        wanted = list(chunk_ids)
        if not wanted:
            return []
        with self.lock:  # one statement: a provisional chunk comes as a row with no unit id
            rows = self.conn.execute(
                f"SELECT {_UNIT_COLUMNS} FROM memfs.units WHERE tenant_id = %s AND chunk_id = ANY (%s) "
                "UNION ALL SELECT NULL, chunk_id, start_line, 0, '', text, '', NULL, '' FROM memfs.chunks "
                "WHERE tenant_id = %s AND provisional AND chunk_id = ANY (%s)",
                (self.tenant, wanted, self.tenant, wanted)).fetchall()
        lines = [(r[1], r[2], r[5]) for r in rows if r[0] is None]
        units = sorted((_unit(r) for r in rows if r[0] is not None), key=lambda u: (u.chunk_id, u.start_line, u.id))
        if not lines:
            return units
        for chunk_id, start_line, text in lines:
            for offset, line in enumerate(text.split("\n")):
                if line.strip():
                    units.append(StoredUnit(-((int(chunk_id) << 20) + offset), int(chunk_id), start_line + offset,
                                            start_line + offset, "", line, "", None))
        units.sort(key=lambda u: (u.chunk_id, u.start_line, u.id))
        return units

    def store_vectors(self, provider: str, model: str, items: list[tuple[StoredChunk, np.ndarray]]) -> None:
        self.store_embedded(provider, model, chunks=items)

    def store_unit_vectors(self, provider: str, model: str, items: list[tuple[StoredUnit, np.ndarray]]) -> None:
        self.store_embedded(provider, model, units=items)

    def store_embedded(self, provider: str, model: str, readings: Sequence[tuple[str, np.ndarray]] = (),
                       chunks: Sequence[tuple[StoredChunk, np.ndarray]] = (),
                       units: Sequence[tuple[StoredUnit, np.ndarray]] = ()) -> None:
        """As the SQLite store's: one transaction for what one call to the model gave.  A
        reading (a whole text the model read) is cached as private when any chunk or unit that
        came of the same call is."""
        self._grew = self._grew or bool(chunks)
        with self.transaction(vectors_only=True) as conn:
            ids = sorted({c.id for c, _ in chunks} | {u.chunk_id for u, _ in units})
            private = {int(r[0]) for r in conn.execute(
                "SELECT chunk_id FROM memfs.chunks WHERE tenant_id = %s AND private AND chunk_id = ANY (%s)",
                (self.tenant, ids)).fetchall()} if ids else set()
            for digest, vector in readings:
                self._cache(conn, provider, model, digest, np.asarray(vector, dtype=np.float32), bool(private))
            for unit, vector in units:
                full = np.asarray(vector, dtype=np.float32)
                self._cache(conn, provider, model, unit.hash, full, unit.chunk_id in private)
                conn.execute("UPDATE memfs.units SET packed = %s WHERE tenant_id = %s AND unit_id = %s AND hash = %s "
                             "AND packed IS NULL", (pack_unit_vector(full.tobytes()), self.tenant, unit.id, unit.hash))
            for chunk, vector in chunks:
                full = np.asarray(vector, dtype=np.float32)
                self._cache(conn, provider, model, chunk.hash, full, chunk.id in private)
                conn.execute("UPDATE memfs.chunks SET embedding = %s, embedded = true WHERE tenant_id = %s "
                             "AND chunk_id = %s AND hash = %s AND NOT embedded", (full, self.tenant, chunk.id, chunk.hash))

    # -- sync message ids ------------------------------------------------------------------------------

    @contextmanager
    def sync_claims(self, fresh: dict[str, str], known: dict[str, str], shared: bool,
                    is_private: Callable[[str], bool]) -> Iterator[set[str] | None]:
        """The tenant's sync message ids, shared by its hosts (:class:`memfs.sync.store.IdClaims`):
        ``fresh`` ids are claimed and ``known`` ones recorded in one transaction, which commits
        when the block ends without an error (the day files written) and is rolled back
        otherwise.  Yields the fresh ids some host holds already (None: the server did not
        answer).  A host claiming an id another holds uncommitted waits for that one to commit
        or roll back: two hosts storing one message at once store it once.  Ids are inserted in order, so two batches never wait on
        each other in a circle.  ``is_private`` (of a day file, as a shared reader sees it) marks
        the rows of private day files, which a shared writer (``shared``) neither sees nor learns
        of: a fresh id held only by a private row is not a duplicate for it, as its files say.
        The server unreachable: nothing is claimed (the files' own ids still count), logged."""
        import psycopg

        entries = sorted({**known, **fresh}.items())
        writing = self._writing()
        entered = False
        try:
            conn = writing.__enter__()
            entered = True
            claimed = {str(r[0]) for r in conn.execute(
                "INSERT INTO memfs.sync_messages(tenant_id, message_id, path, private) "
                "SELECT %s, m.id, m.path, m.private FROM unnest(%s::text[], %s::text[], %s::boolean[]) "
                "AS m(id, path, private) ORDER BY m.id ON CONFLICT (tenant_id, message_id) DO NOTHING "
                "RETURNING message_id",
                (self.tenant, [i for i, _ in entries], [p for _, p in entries],
                 [bool(is_private(p)) for _, p in entries])).fetchall()}
            held = [i for i in fresh if i not in claimed]
            if held and shared:  # only rows it could see count: a private row's id is not told
                held = [str(r[0]) for r in conn.execute(
                    "SELECT message_id FROM memfs.sync_messages WHERE tenant_id = %s AND message_id = ANY (%s) "
                    "AND NOT private", (self.tenant, held)).fetchall()]
        except (psycopg.Error, IndexOffline) as exc:  # IndexOffline: it was away already
            if entered:
                with contextlib.suppress(psycopg.Error, IndexOffline):
                    writing.__exit__(type(exc), exc, exc.__traceback__)  # rolled back
            log.warning("sync message ids: the index's server did not answer (%s): duplicates are found in this "
                        "workspace's files only", _first(exc))
            yield None
            return
        try:
            yield set(held)
        except BaseException as exc:  # the day files were not written: the claims go
            with contextlib.suppress(psycopg.Error, IndexOffline):
                writing.__exit__(type(exc), exc, exc.__traceback__)
            raise
        try:
            writing.__exit__(None, None, None)
        except (psycopg.Error, IndexOffline) as exc:  # written, not recorded: the files hold them all the same
            log.warning("sync message ids: the messages are stored but their ids were not recorded on the server "
                        "(%s)", _first(exc))

    # -- search primitives -----------------------------------------------------------------------------

    def _allowed(self, where: str, params: Iterable[object], limit: int | None = None,
                 embedded: bool = False) -> list[int]:
        """The chunk ids a scope's condition allows."""
        sql = (f"SELECT c.chunk_id FROM memfs.chunks c WHERE c.tenant_id = %s"
               f"{' AND c.embedding IS NOT NULL' if embedded else ''} AND {_scoped(where)}")
        args: list[object] = [self.tenant, *params]
        if limit is not None:
            sql += " LIMIT %s"
            args.append(limit)
        return [int(r[0]) for r in self.conn.execute(sql, args).fetchall()]

    def keyword_candidates(self, match: str, limit: int, include_private: bool = True,
                           where: str = "", params: Iterable[object] = ()) -> list[tuple[int, float]]:
        """(chunk id, bm25) best first, FTS5's bm25 (see :mod:`memfs.index.storage.postgres.keyword`)."""
        with self.lock:
            among = self._allowed(where, params) if where else None
            return keyword.keyword_candidates(self.conn, self.tenant, match, limit, include_private, among)

    def keyword_top(self, terms: Sequence[str], limit: int, include_private: bool = True,
                    where: str = "", params: Iterable[object] = ()) -> list[tuple[int, float]]:
        full = match_expression(list(terms))
        if full is None:
            return []
        return self.keyword_candidates(full, limit, include_private, where, params)

    def doc_frequencies(self, terms: list[str], include_private: bool = True) -> tuple[dict[str, int], int]:
        with self.lock:
            return keyword.doc_frequencies(self.conn, self.tenant, terms, include_private)

    def chunk_total(self, include_private: bool = True) -> int:
        with self.lock:
            row = self.conn.execute("SELECT coalesce(sum(chunks), 0) FROM memfs.corpus_stats WHERE tenant_id = %s "
                                    "AND private = ANY (%s)",
                                    (self.tenant, [False, True] if include_private else [False])).fetchone()
        return int(row[0])

    def nearest_later(self, query: Callable[[], np.ndarray | None], k: int, include_private: bool = True
                      ) -> Future[tuple[np.ndarray | None, list[tuple[int, float]]]] | None:
        """None: the nearest chunks are found by the server, on this store's one connection, after
        the keyword side (a second connection per search would overlap them; not done yet)."""
        return None

    def vector_candidates(self, query: np.ndarray, k: int, include_private: bool = True,
                          where: str = "", params: Iterable[object] = ()) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity), best first (:mod:`memfs.index.storage.postgres.knn`); a scope's chunks
        compared one by one when they are few, else the nearest filtered, as the SQLite store."""
        if not self.has_vectors:
            return []
        vector = [float(x) for x in np.asarray(query, dtype=np.float32)]
        with self.lock:
            if not where:
                return knn.vector_candidates(self.conn, self.tenant, vector, k, include_private)
            scope = where if include_private else f"{where} AND NOT c.private"
            allowed = self._allowed(scope, params, SCOPED_EXACT + 1, embedded=True)
            if len(allowed) <= SCOPED_EXACT:
                found = sorted(self.vector_similarity(query, allowed).items(), key=lambda kv: (-kv[1], kv[0]))
                return found[:k]
            near = knn.vector_candidates(self.conn, self.tenant, vector, min(4096, k * 20), include_private)
            ok = set(self._allowed(f"c.chunk_id = ANY (?) AND {where}", [[i for i, _ in near], *params]))
        return [(cid, sim) for cid, sim in near if cid in ok][:k]

    def vector_similarity(self, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        if not ids or not self.has_vectors:
            return {}
        q = np.asarray(query, dtype=np.float32)
        dims = len(q)
        with self.lock:
            rows = self.conn.execute(
                f"SELECT chunk_id, embedding::vector({dims}) <=> %s::vector({dims}) FROM memfs.chunks "
                "WHERE tenant_id = %s AND chunk_id = ANY (%s) AND embedding IS NOT NULL",
                (q, self.tenant, list(ids))).fetchall()
        return {int(r[0]): 1.0 - float(r[1]) for r in rows}

    def chunks_by_id(self, ids: Iterable[int], include_private: bool = True) -> dict[int, StoredChunk]:
        wanted = list(ids)
        if not wanted:
            return {}
        scope = "" if include_private else " AND NOT private"
        with self.lock:
            rows = self.conn.execute(
                "SELECT chunk_id, path, start_line, end_line, hash, text, jsonl, chat_id, chat_title FROM memfs.chunks "
                f"WHERE tenant_id = %s AND chunk_id = ANY (%s){scope}", (self.tenant, wanted)).fetchall()
        return {int(r[0]): StoredChunk(int(r[0]), *r[1:6], bool(r[6]), r[7], r[8]) for r in rows}

    def chunk_ids_of(self, paths: Sequence[str], include_private: bool = True) -> list[int]:
        """The ids of these files' chunks (public ones only, if asked), in id order."""
        if not paths:
            return []
        scope = "" if include_private else " AND NOT private"
        with self.lock:
            rows = self.conn.execute(f"SELECT chunk_id FROM memfs.chunks WHERE tenant_id = %s AND path = ANY (%s){scope} "
                                     "ORDER BY chunk_id", (self.tenant, list(paths))).fetchall()
        return [int(r[0]) for r in rows]

    def embedded_ids(self, ids: Iterable[int]) -> set[int]:
        wanted = list(ids)
        if not wanted:
            return set()
        with self.lock:
            rows = self.conn.execute("SELECT chunk_id FROM memfs.chunks WHERE tenant_id = %s AND embedding IS NOT NULL "
                                     "AND chunk_id = ANY (%s)", (self.tenant, wanted)).fetchall()
        return {int(r[0]) for r in rows}

    # -- status ------------------------------------------------------------------------------------------

    def counts(self, include_private: bool = True, exclude: frozenset[str] = frozenset()) -> dict[str, int]:
        """As the SQLite store's: files, skipped, chunks, units, pending, provisional chunks and
        their lines, cached embeddings."""
        clauses = ["tenant_id = %(t)s"] + ([] if include_private else ["NOT private"]) + (
            ["NOT (path = ANY (%(hidden)s))"] if exclude else [])
        where = " AND ".join(clauses)
        args = {"t": self.tenant, "hidden": sorted(exclude)}
        with self.lock:
            files = self.conn.execute(f"SELECT count(*), count(*) FILTER (WHERE error <> '') FROM memfs.files "
                                      f"WHERE {where}", args).fetchone()
            chunks = self.conn.execute(f"SELECT count(*), count(*) FILTER (WHERE NOT embedded), "
                                       f"count(*) FILTER (WHERE provisional) FROM memfs.chunks WHERE {where}",
                                       args).fetchone()
            units = self.conn.execute(
                "SELECT count(*), count(*) FILTER (WHERE packed IS NULL) FROM memfs.units WHERE tenant_id = %(t)s "
                f"AND chunk_id IN (SELECT chunk_id FROM memfs.chunks WHERE {where})", args).fetchone()
            # The lines of the files still being chunked (memfs.index.embedding.backlog.still_to_chunk):
            # provisional_lines' query.
            files_scope = ("" if include_private else " AND NOT f.private") + (
                " AND NOT (f.path = ANY (%(hidden)s))" if exclude else "")
            owed = self.conn.execute(_PROVISIONAL_LINES.format(scope=files_scope),
                                     {**args, "p": PROVISIONAL_HASH}).fetchall()
            # The tenant's own entries (those its login sees), through the cache's primary key.
            cached = self.conn.execute("SELECT count(*) FROM memfs.tenant_embeddings WHERE tenant_id = %s",
                                       (self.tenant,)).fetchone()[0]
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
        """The bytes of the tenant's partitions (tables and their indexes)."""
        with self.lock:
            row = self.conn.execute(
                "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c JOIN pg_namespace n "
                "ON n.oid = c.relnamespace WHERE n.nspname = 'memfs' AND c.relkind = 'r' AND c.relname LIKE %s",
                (f"%\\_t{self.tenant}",)).fetchone()
        return int(row[0])

    def check(self) -> str:
        """The server keeps its own pages whole; what memfs can check is its statistics."""
        with self.lock:
            row = self.conn.execute(
                "SELECT (SELECT count(*) FROM memfs.chunks WHERE tenant_id = %s), "
                "(SELECT coalesce(sum(chunks), 0) FROM memfs.corpus_stats WHERE tenant_id = %s)",
                (self.tenant, self.tenant)).fetchone()
        return "ok" if int(row[0]) == int(row[1]) else f"keyword statistics count {row[1]} chunks, the index {row[0]}"


# Every public method and property of the store says IndexOffline when its server is lost (the
# context managers say it themselves, through _writing).
for _name, _member in list(vars(PgStore).items()):
    if _name.startswith("_") or _name in ("close", "conn", "batch", "transaction"):
        continue
    if isinstance(_member, property) and _member.fget is not None:
        setattr(PgStore, _name, property(_offline_on_loss(_member.fget), _member.fset))
    elif callable(_member) and not isinstance(_member, type):
        setattr(PgStore, _name, _offline_on_loss(_member))
