"""A tenant's search primitives on PostgreSQL: keyword candidates and top-k BM25 (as FTS5 ranks),
nearest chunks through pgvector, and reading chunks back by id."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future

import numpy as np

from memfs.index.storage.postgres import keyword, knn
from memfs.index.storage.postgres.layout import _scoped
from memfs.index.storage.records import (
    SCOPED_EXACT,
    StoredChunk,
)
from memfs.index.text.keywords import match_expression


class StoreSearching:
    """PgStore's search primitives (:mod:`memfs.index.storage.postgres.store` composes it)."""

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
                f"SELECT chunk_id, embedding::halfvec({dims}) <=> %s::halfvec({dims}) FROM memfs.chunks "
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
