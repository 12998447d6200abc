"""What waits for its vector in the SQLite index, storing vectors, and the embedding cache beside
the index (an attached file that survives rebuilds; an index of schema 8 is the cache of what it
holds itself, :mod:`memfs.index.storage.sqlite.reuse`)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

import apsw

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.index.storage.records import (
    StoredChunk,
    StoredUnit,
)
from memfs.index.storage.sqlite.layout import (
    _UNIT_COLUMNS,
    _UNITS_AS_STORED,
    _UNITS_WITH_SPANS,
    PROVISIONAL,
    half,
)
from memfs.index.storage.sqlite.unitrows import hash_forms, text_at
from memfs.index.storage.vectors import pack_unit_vector


class StoreEmbeddings:
    """Store's embeddings (:mod:`memfs.index.storage.sqlite.store` composes it)."""

    # -- embeddings ----------------------------------------------------------------------------

    def cached_vectors(self, provider: str, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        """The vectors of these texts (hex hashes) made by ``provider`` under the cache's ``model``
        name, as this index keeps them: packed (schema 8, from its own rows first), float32 (7)."""
        wanted = list(dict.fromkeys(hashes))
        if self.packed:
            return self._cached_packed(provider, model, wanted)
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
        if self.packed:
            self._store_packed(provider, model, readings, chunks, units, now)
            return
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

    def _store_packed(self, provider: str, model: str, readings: Sequence[tuple[str, np.ndarray]],
                      chunks: Sequence[tuple[StoredChunk, np.ndarray]], units: Sequence[tuple[StoredUnit, np.ndarray]],
                      now: float) -> None:
        """:meth:`store_embedded` of an index of schema 8: the vectors go to the rows that still
        have their text, packed; the cache takes only those the index then lacks (a reading that
        is no passage, a passage replaced meanwhile)."""
        packed_units = [(unit, pack_unit_vector(np.asarray(v, dtype=np.float32).tobytes())) for unit, v in units]
        packed_chunks = [(chunk, pack_unit_vector(np.asarray(v, dtype=np.float32).tobytes())) for chunk, v in chunks]
        with self.transaction(vectors_only=True) as conn:
            held: set[str] = set()
            lacking: list[tuple[str, bytes]] = []
            for unit, blob in packed_units:
                conn.execute("UPDATE units SET vector = ? WHERE id = ? AND hash IN (?, ?) AND vector IS NULL",
                             (blob, unit.id, *hash_forms(unit.hash)))
                if conn.changes():
                    held.add(unit.hash)
                else:
                    lacking.append((unit.hash, blob))
            for chunk, blob in packed_chunks:
                row = conn.execute("SELECT embedded, private FROM chunks WHERE id = ? AND hash = ?",
                                   (chunk.id, chunk.hash)).fetchone()
                if row is None:
                    lacking.append((chunk.hash, blob))
                    continue
                if row[0]:
                    continue
                conn.execute("INSERT INTO chunk_vectors(id, private, vector) VALUES (?, ?, ?)", (chunk.id, row[1], blob))
                conn.execute("UPDATE chunks SET embedded = 1 WHERE id = ?", (chunk.id,))
                held.add(chunk.hash)
                if self._matrix is not None:
                    self._matrix.add(chunk.id, blob, bool(row[1]))
            self._taken(conn, None, held)  # a copy kept before its passage came (a reading, say)
            rest = [(digest, vector) for digest, vector in readings if digest not in held]
            found = self.held_vectors(provider, model, [digest for digest, _ in rest]) if rest else {}
            lacking += [(digest, pack_unit_vector(np.asarray(vector, dtype=np.float32).tobytes()))
                        for digest, vector in rest if digest not in found]
            if lacking:
                self._keep(conn, provider, model, lacking, now)

    @staticmethod
    def _cache(conn: apsw.Connection, provider: str, model: str, digest: str, vector: np.ndarray,
               now: float) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO cache.embedding_cache(provider, model, hash, dims, vector, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?)", (provider, model, digest, len(vector), vector.tobytes(), now))
