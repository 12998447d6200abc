"""KNN on PostgreSQL (memfs.index.storage.postgres.knn) against exact top-20 in numpy: a tenant holding 5% of
the rows, and a search of public chunks that are 5% of a tenant's, both through the HNSW index
as the tenant's login role (RLS on), recall >= 0.95; the same public search without pgvector's
iterative scan shows the trap the module exists for; another tenant's rows, visible to the role
by a reader grant, never come back."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
from pg import scratch_database  # noqa: E402

from memfs.index.storage.postgres import knn, roles, schema  # noqa: E402

DIMS = 64
K = 20


@pytest.fixture(scope="module")
def db(pg_server) -> Iterator[str]:
    with scratch_database(pg_server.dsn, "memfs_knn") as dsn:
        schema.init(dsn)
        yield dsn


def _vectors(rng: np.random.Generator, count: int, centers: np.ndarray) -> np.ndarray:
    """Clustered unit vectors, as embeddings of related texts are."""
    mix = centers[rng.integers(0, len(centers), count)] + 0.35 * rng.standard_normal((count, DIMS))
    return (mix / np.linalg.norm(mix, axis=1, keepdims=True)).astype(np.float32)


def _write(dsn: str, tenant_id: int, vectors: np.ndarray, private: np.ndarray) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        ids = list(range(1, len(vectors) + 1))
        conn.execute(
            "INSERT INTO memfs.chunks(tenant_id, chunk_id, path, start_line, end_line, hash, text, private, embedded, "
            "embedding) SELECT %s, i, 'memory/x.md', i, i, 'h', '', p, true, v::vector "
            "FROM unnest(%s::bigint[], %s::boolean[], %s::text[]) AS t(i, p, v)",
            (tenant_id, ids, [bool(p) for p in private], ["[" + ",".join(f"{x:.6f}" for x in v) + "]" for v in vectors]))


def _exact(vectors: np.ndarray, allowed: np.ndarray, query: np.ndarray) -> set[int]:
    scores = vectors @ query
    scores[~allowed] = -np.inf
    return {int(i) + 1 for i in np.argsort(-scores, kind="stable")[:K]}


def _recall(found: list[list[int]], truth: list[set[int]]) -> float:
    return float(np.mean([len(set(f) & t) / K for f, t in zip(found, truth)]))


def test_filtered_hnsw_keeps_recall(db: str) -> None:
    rng = np.random.default_rng(22)
    centers = rng.standard_normal((40, DIMS))
    workspace = uuid.uuid4()
    # Tenant a holds 5% of all rows; c holds most, and only 5% of c's are public.
    sizes = {"a": 1_000, "b": 5_000, "c": 14_000}
    logins, data = {}, {}
    for agent, size in sizes.items():
        logins[agent] = roles.grant_login(db, workspace, agent)
        vectors = _vectors(rng, size, centers)
        private = rng.random(size) < (0.95 if agent == "c" else 0.3)
        data[agent] = (vectors, private)
        _write(logins[agent].dsn, logins[agent].tenant_id, vectors, private)
    roles.grant_reader(db, workspace, "b", workspace, "a")  # a sees b's public rows too
    roles.grant_reader(db, workspace, "c", workspace, "a")
    with psycopg.connect(db, autocommit=True) as admin:
        for agent in sizes:
            knn.create_index(admin, logins[agent].tenant_id, DIMS)
        admin.execute("ANALYZE memfs.chunks")
    queries = _vectors(rng, 30, centers)
    with psycopg.connect(logins["a"].dsn, autocommit=True, prepare_threshold=None) as conn:
        conn.execute("SET enable_seqscan = off")  # as knn does when it wants the index
        plan = "\n".join(r[0] for r in conn.execute(
            f"EXPLAIN SELECT chunk_id FROM memfs.chunks WHERE tenant_id = %s::bigint AND embedding IS NOT NULL "
            f"ORDER BY embedding::halfvec({DIMS}) <=> %s::halfvec({DIMS}) LIMIT 20",
            (logins["a"].tenant_id, "[" + ",".join(["0.1"] * DIMS) + "]")))
        assert f"chunks_t{logins['a'].tenant_id}_hnsw" in plan and "chunks_t" + str(logins["b"].tenant_id) not in plan
        for include_private in (True, False):
            vectors, private = data["a"]
            allowed = np.ones(len(vectors), bool) if include_private else ~private
            truth = [_exact(vectors, allowed, q) for q in queries]
            found = [[cid for cid, _ in knn.vector_candidates(conn, logins["a"].tenant_id, q, K, include_private,
                                                                exact=False)] for q in queries]
            assert _recall(found, truth) >= 0.95, include_private
            exact = [[cid for cid, _ in knn.vector_candidates(conn, logins["a"].tenant_id, q, K, include_private,
                                                                exact=True)] for q in queries]
            assert _recall(exact, truth) == 1.0
        # c's public rows (5% of c's, all a may see of c) through c's HNSW index.
        vectors, private = data["c"]
        truth = [_exact(vectors, ~private, q) for q in queries]
        found = [knn.vector_candidates(conn, logins["c"].tenant_id, q, K, True, exact=False) for q in queries]
        assert _recall([[cid for cid, _ in f] for f in found], truth) >= 0.95
        for f, q in zip(found, queries):  # similarities are the cosine, best first
            sims = [s for _, s in f]
            assert sims == sorted(sims, reverse=True)
            # The server keeps the vectors as halfvec (float16, schema v7): cosines to its precision.
            assert np.allclose(sims, [float(vectors[cid - 1] @ q) for cid, _ in f], atol=2e-3)
        # The trap: the same search without iterative scan finds a fraction.
        plain = []
        for q in queries:
            literal = "[" + ",".join(repr(float(x)) for x in q) + "]"
            with conn.transaction():
                conn.execute("SET LOCAL hnsw.iterative_scan = off")
                plain.append([r[0] for r in conn.execute(
                    f"SELECT chunk_id FROM memfs.chunks WHERE tenant_id = %s::bigint AND embedding IS NOT NULL "
                    f"ORDER BY embedding::halfvec({DIMS}) <=> %s::halfvec({DIMS}) LIMIT %s",
                    (logins["c"].tenant_id, literal, K))])
        assert _recall(plain, truth) < 0.5
