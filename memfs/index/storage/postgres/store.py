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

This module holds the store itself (opening, its connection and its loss, transactions,
metadata, status); its other concerns are mixins: :mod:`.files` (files, copying to and from
another store, sync message ids), :mod:`.embeddings` (what waits for vectors, storing them, the
tenant's embedding cache) and :mod:`.searching` (keyword and vector primitives)."""

from __future__ import annotations

import contextlib
import inspect
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager

from memfs.index.storage.interface import IndexOffline
from memfs.index.storage.postgres import knn
from memfs.index.storage.postgres.connect import (
    CONNECT_TIMEOUT,
    PgError,
    PgUnreachable,
    check_server,
    connect,
    redacted,
)
from memfs.index.storage.postgres.embeddings import StoreEmbeddings
from memfs.index.storage.postgres.files import StoreFiles
from memfs.index.storage.postgres.layout import (
    _PROVISIONAL_LINES,
    _UNOPENED,
    INDEX_RETRY,
    REFUSED_RETRY_S,
    RETRY_S,
    _offline_on_loss,
    _offline_reason,
    log,
)
from memfs.index.storage.postgres.schema import LATEST, version
from memfs.index.storage.postgres.searching import StoreSearching
from memfs.index.storage.records import (
    PROVISIONAL_HASH,
    status_counts,
)


class PgStore(StoreFiles, StoreEmbeddings, StoreSearching):
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
        return status_counts(files, chunks, units, owed, cached, self.has_vectors)

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


# Every public method and property of the store (its mixins' too) says IndexOffline when its server
# is lost (the context managers say it themselves, through _writing).
for _name in sorted({name for klass in PgStore.__mro__[:-1] for name in vars(klass)}):
    if _name.startswith("_") or _name in ("close", "conn", "batch", "transaction"):
        continue
    _member = inspect.getattr_static(PgStore, _name)
    if isinstance(_member, property) and _member.fget is not None:
        setattr(PgStore, _name, property(_offline_on_loss(_member.fget), _member.fset))
    elif callable(_member) and not isinstance(_member, (type, staticmethod, classmethod)):
        setattr(PgStore, _name, _offline_on_loss(_member))
