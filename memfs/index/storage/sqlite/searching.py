"""The SQLite index's search primitives: keyword candidates and exact top-k BM25 through FTS5,
nearest chunks through an in-memory matrix (or sqlite-vec, for a small index of schema 7), and
reading chunks back by id."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor

import apsw

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.index.storage.records import (
    SCOPED_EXACT,
    StoredChunk,
)
from memfs.index.storage.sharedwork import run_shared
from memfs.index.storage.sqlite import topk
from memfs.index.storage.sqlite.layout import MATRIX_MIN_VECTORS, VEC_KNN_MAX, _nearest, _varint
from memfs.index.storage.vectors import VectorMatrix
from memfs.index.text.keywords import match_expression, phrase_tokens


class StoreSearching:
    """Store's search primitives (:mod:`memfs.index.storage.sqlite.store` composes it)."""

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
        """The in-memory matrix (loaded or reloaded as needed) of an index of schema 8 whatever its
        size (its vectors are packed: 388 bytes each at 384 dimensions, read in one statement),
        or of a large one of schema 7 (else None: sqlite-vec searches it)."""
        version = int(self.conn.execute("PRAGMA main.data_version").fetchone()[0])
        if self._matrix is not None and version == self._matrix_version:
            return self._matrix
        if self.packed:
            dims = self.dims
            matrix = VectorMatrix(dims, packed=True)
            matrix.load([(int(r[0]), r[1], bool(r[2])) for r in
                         self.conn.execute("SELECT id, vector, private FROM chunk_vectors")
                         if len(r[1]) == dims + 4])  # type: ignore[arg-type]
            self._matrix, self._matrix_version = matrix, version
            return matrix
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
