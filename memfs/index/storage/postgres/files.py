"""Files in a tenant's PostgreSQL index: a file's record and its chunks, units and keyword terms
written, removed, renamed; provisional chunks of big writes; copying files and cache entries to
and from another store (:mod:`memfs.index.storage.moving`); and the sync message ids the
tenant's hosts share."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager

import numpy as np

from memfs.index.storage.interface import IndexOffline
from memfs.index.storage.postgres import terms
from memfs.index.storage.postgres.connect import (
    PgError,
)
from memfs.index.storage.postgres.layout import (
    _CACHE_PRIVATE,
    _CACHE_PUBLIC,
    _PROVISIONAL_LINES,
    _UNIT_COLUMNS,
    _first,
    _float32,
    _unit,
    log,
)
from memfs.index.storage.records import (
    EMBEDDED,
    FILE_COLUMNS,
    KINDS,
    PENDING,
    PROVISIONAL_HASH,
    PROVISIONAL_STATE,
    CachedVector,
    ChunkRow,
    FileRecord,
    FileRows,
    StoredUnit,
    file_record,
)
from memfs.index.storage.vectors import pack_unit_vector
from memfs.index.text.chunking import Chunk
from memfs.index.text.keywords import fts_body
from memfs.workspace import FileKind


class StoreFiles:
    """PgStore's files, copying to and from another store (memfs.index.storage.moving), sync message ids (:mod:`memfs.index.storage.postgres.store` composes it)."""

    # -- files -------------------------------------------------------------------------------------

    def file(self, path: str) -> FileRecord | None:
        with self.lock:
            row = self.conn.execute(f"SELECT {FILE_COLUMNS} FROM memfs.files WHERE tenant_id = %s AND path = %s",
                                    (self.tenant, path)).fetchone()
        return None if row is None else file_record(row)

    def files(self) -> list[FileRecord]:
        with self.lock:
            rows = self.conn.execute(f"SELECT {FILE_COLUMNS} FROM memfs.files WHERE tenant_id = %s "
                                     "ORDER BY path COLLATE \"C\"", (self.tenant,)).fetchall()
        return [file_record(r) for r in rows]

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
        jsonl = bool(FileKind(record.kind).is_jsonl) if record.kind in KINDS and not provisional else False
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
            records = self.conn.execute(f"SELECT {FILE_COLUMNS}, indexed_at FROM memfs.files WHERE tenant_id = %s "
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
        return [FileRows(file_record(r[:-1]), float(r[-1]), tuple(chunks.get(r[0], ())), tuple(units.get(r[0], ())))
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
