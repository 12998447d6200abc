"""Files in the SQLite index: a file's record and its chunks and units written, removed, renamed;
provisional chunks of big writes; and copying files and cache entries to and from another store
(:mod:`memfs.index.storage.moving`)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence

import apsw

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.index.storage.records import (
    FILE_COLUMNS,
    KINDS,
    CachedVector,
    FileRecord,
    FileRows,
    StoredUnit,
    file_record,
)
from memfs.index.storage.sqlite.layout import (
    _PROVISIONAL_FILES,
    _PROVISIONAL_LINES,
    _UNIT_COLUMNS,
    PROVISIONAL,
    _unit_row,
    half,
)
from memfs.index.storage.sqlite.unitrows import ChunkLines
from memfs.index.storage.vectors import as_float32, as_packed
from memfs.index.text.chunking import Chunk
from memfs.index.text.keywords import fts_body
from memfs.workspace import FileKind


class StoreFiles:
    """Store's files, copying to and from another store (memfs.index.storage.moving) (:mod:`memfs.index.storage.sqlite.store` composes it)."""

    # -- files ---------------------------------------------------------------------------------

    def file(self, path: str) -> FileRecord | None:
        with self.lock:
            row = self.conn.execute(
                f"SELECT {FILE_COLUMNS} FROM files WHERE path = ?", (path,)).fetchone()
        return None if row is None else file_record(row)

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
            rows = self.conn.execute(f"SELECT {FILE_COLUMNS} FROM files ORDER BY path").fetchall()
        return [file_record(r) for r in rows]

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
        rows (:meth:`units_of` reads their lines as units).  ``cached`` vectors come as
        :meth:`cached_vectors` gives them (float32 is packed for an index of schema 8)."""
        pending = 0
        private = int(record.private)
        jsonl = int(FileKind(record.kind).is_jsonl) if record.kind in KINDS and not provisional else 0
        state = PROVISIONAL if provisional else None
        fts = "private_fts" if private else "chunks_fts"
        packed, dims = self.packed, self.dims
        if packed and cached:
            cached = {h: as_packed(v, dims) for h, v in cached.items()}  # packed ones are copied as they are
        with self.transaction() as conn:
            # What the new rows hold again is not kept apart as leaving the index.
            kept = {*chunk_hashes, *(h for hashes in unit_hashes or () for h in hashes)} if packed else ()
            self._delete_chunks(conn, record.path, 0 if from_line is None else from_line, kept)
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
                    if unit_vector is not None and not packed:
                        unit_vector = half(unit_vector)
                    unit_rows.append(_unit_row(lines, chunk_id, unit.start_line, unit.end_line, unit_hash, unit.text,
                                               unit.context, unit_vector, unit.reading))
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
            if packed:
                conn.executemany("INSERT INTO chunk_vectors(id, private, vector) VALUES (?, ?, ?)", vector_rows)
                if cached:  # the index holds them now, not the cache
                    self._taken(conn, record.kind, [h for h in cached if h in kept])
            for chunk_id, chunk_private, vector in vector_rows:
                if not packed:
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

    def _delete_chunks(self, conn: apsw.Connection, path: str, from_line: int = 0, kept: Iterable[str] = ()) -> None:
        """A file's rows from ``from_line`` on gone; their vectors kept in the cache (schema 8),
        but for the texts of ``kept`` (see :meth:`_evict`)."""
        rows = conn.execute("SELECT id, private FROM chunks WHERE path = ? AND start_line >= ?",
                            (path, from_line)).fetchall()
        if not rows:
            return
        vec = self.has_vectors
        self._evict(conn, path, from_line, kept)
        conn.execute("DELETE FROM units WHERE chunk_id IN (SELECT id FROM chunks WHERE path = ? AND start_line >= ?)",
                     (path, from_line))
        for table, is_private in (("private_fts", True), ("chunks_fts", False)):
            conn.executemany(f"DELETE FROM {table} WHERE rowid = ?",
                             [(chunk_id,) for chunk_id, private in rows if bool(private) == is_private])
        if vec:
            conn.executemany(f"DELETE FROM {self._vector_table} WHERE rowid = ?", [(chunk_id,) for chunk_id, _ in rows])
            if self._matrix is not None:
                for chunk_id, _ in rows:
                    self._matrix.remove(chunk_id)
        conn.execute("DELETE FROM chunks WHERE path = ? AND start_line >= ?", (path, from_line))

    # -- copying to and from another store (memfs.index.storage.moving) ------------------------------

    def clear(self) -> None:
        """Every row of the index gone, and its vector table (the next fingerprint sets its
        dimension); the embedding cache, the schema and the workspace it serves stay."""
        with self.transaction() as conn:
            self._evict(conn, None)
            for table in ("units", "chunks", "files"):
                conn.execute(f"DELETE FROM {table}")
            for fts in ("chunks_fts", "private_fts"):
                conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('delete-all')")
            conn.execute(f"DROP TABLE IF EXISTS {self._vector_table}")
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
                row = self.conn.execute(f"SELECT {FILE_COLUMNS}, indexed_at FROM files WHERE path = ?",
                                        (path,)).fetchone()
                if row is None:
                    continue
                rows = self.conn.execute(
                    "SELECT id, path, start_line, end_line, hash, text, embedded, private, jsonl, first_day, last_day, "
                    "chat_id, chat_title FROM chunks WHERE path = ? ORDER BY id", (path,)).fetchall()
                vectors: dict[int, bytes] = {}
                ids = [int(r[0]) for r in rows if r[6] == 1]
                column, dims = ("vector", self.dims) if self.packed else ("embedding", 0)
                for begin in range(0, len(ids) if vec else 0, 900):
                    part = ids[begin : begin + 900]
                    vectors.update((int(i), as_float32(bytes(v), dims).tobytes() if dims else bytes(v))
                                   for i, v in self.conn.execute(
                        f"SELECT rowid, {column} FROM {self._vector_table} WHERE rowid IN "
                        f"({','.join('?' * len(part))})", part))
                chunks = tuple(ChunkRow(int(r[0]), r[1], r[2], r[3], r[4], r[5], int(r[6]), bool(r[7]), bool(r[8]),
                                        r[9], r[10], r[11], r[12], vectors.get(int(r[0]))) for r in rows)
                units = tuple(StoredUnit(*u) for u in self.conn.execute(
                    f"SELECT {_UNIT_COLUMNS} FROM units u CROSS JOIN chunks c ON c.id = u.chunk_id "
                    "WHERE u.chunk_id IN (SELECT id FROM chunks WHERE path = ?) ORDER BY u.id", (path,)))
                found.append(FileRows(file_record(row[:-1]), float(row[-1]), chunks, units))
        return found

    def import_files(self, files: Sequence[FileRows]) -> None:
        """Put these files' rows in, ids and vectors as given, in one transaction: each file's
        rows here before are replaced (so importing the same rows again changes nothing).  The
        ids must not belong to another file here (the target of a copy is cleared first)."""
        from memfs.index.storage.records import EMBEDDED, PENDING

        packed, dims = self.packed, self.dims
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
                                       u.context, as_packed(u.vector, dims) if packed and u.vector else u.vector,
                                       u.reading)) for u in rows.units])
                conn.executemany(f"INSERT INTO {self._vector_table}(rowid, private, {'vector' if packed else 'embedding'}) "
                                 "VALUES (?, ?, ?)",
                                 [(c.id, int(c.private), as_packed(c.vector, dims) if packed else c.vector)
                                  for c, state in zip(rows.chunks, states) if state == EMBEDDED])
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
        if self.packed:  # what the index holds, then its cache (float32 out, as the interface says)
            dims = self.dims
            for name in names:
                found += [CachedVector(provider, name, h, as_float32(v, dims).tobytes())
                          for h, v in self._cached_packed(provider, name, wanted).items()]
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
        if self.packed:  # the cache keeps what the index lacks
            dims = self.dims
            for provider, name in sorted({(e.provider, e.model) for e in entries}):
                mine = [e for e in entries if (e.provider, e.model) == (provider, name)]
                held = self.held_vectors(provider, name, [e.hash for e in mine])
                with self._writing() as conn:
                    self._keep(conn, provider, name, [(e.hash, as_packed(e.vector, dims or len(e.vector) // 4))
                                                      for e in mine if e.hash not in held], now)
            return
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
