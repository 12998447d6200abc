"""What waits for its vector in a tenant's PostgreSQL index, storing vectors, and the tenant's
own embedding cache (``tenant_embeddings``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import numpy as np

from memfs.index.storage.postgres.layout import _CACHE_PRIVATE, _CACHE_PUBLIC, _UNIT_COLUMNS, _float32, _unit
from memfs.index.storage.records import (
    StoredChunk,
    StoredUnit,
)
from memfs.index.storage.vectors import pack_unit_vector


class StoreEmbeddings:
    """PgStore's embeddings (:mod:`memfs.index.storage.postgres.store` composes it)."""

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
