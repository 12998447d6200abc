"""A tenant's HNSW index without an admin (memfs.vector_index, memfs.index.storage.postgres.knn.build_index):
a tenant's own login builds the index of its own partition and of no other; a PgStore whose
tenant reaches knn.EXACT_MAX chunks gets its index by itself, and its KNN query plan reads it;
an index of an earlier model's dimension goes when the dimension changes."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")
from pg import scratch_database  # noqa: E402

from memfs.index.storage.postgres import knn, roles, schema  # noqa: E402
from memfs.index.storage.postgres.store import PgStore  # noqa: E402
from memfs.index.storage.records import FileRecord  # noqa: E402
from memfs.index.text.chunking import Chunk  # noqa: E402
from memfs.workspace import init_workspace  # noqa: E402
from memfs.workspaceid import workspace_id  # noqa: E402

DIMS = 32


@pytest.fixture(scope="module")
def db(pg_server) -> Iterator[str]:
    with scratch_database(pg_server.dsn, "memfs_vidx") as dsn:
        schema.init(dsn)
        yield dsn


def _indexes(conn, tenant_id: int) -> list[str]:
    return [r[0] for r in conn.execute(
        "SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid "
        "WHERE i.indrelid = %s::regclass AND starts_with(c.relname, %s) ORDER BY 1",
        (f"memfs.chunks_t{tenant_id}", f"chunks_t{tenant_id}_hnsw_"))]


def _write_vectors(dsn: str, tenant_id: int, count: int, dims: int) -> None:
    rng = np.random.default_rng(tenant_id)
    vectors = rng.standard_normal((count, dims))
    with psycopg.connect(dsn, autocommit=True) as conn, conn.transaction():
        conn.execute(
            "INSERT INTO memfs.chunks(tenant_id, chunk_id, path, start_line, end_line, hash, text, embedded, "
            "embedding) SELECT %s, i, 'memory/x.md', i, i, 'h', '', true, v::vector "
            "FROM unnest(%s::bigint[], %s::text[]) AS t(i, v)",
            (tenant_id, list(range(1, count + 1)), ["[" + ",".join(f"{x:.5f}" for x in v) + "]" for v in vectors]))


def test_a_tenant_indexes_its_own_partition_only(db: str) -> None:
    workspace = uuid.uuid4()
    a = roles.grant_login(db, workspace, "a")
    b = roles.grant_login(db, workspace, "b")
    roles.grant_reader(db, workspace, "b", workspace, "a")  # a reads b's public rows: still not b's index
    for login in (a, b):
        _write_vectors(login.dsn, login.tenant_id, 200, DIMS)
    with psycopg.connect(a.dsn, autocommit=True) as conn:
        # Not the owner of anything: a tenant cannot index a partition itself, its own or b's.
        for tenant in (a.tenant_id, b.tenant_id):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"CREATE INDEX ON memfs.chunks_t{tenant} USING hnsw "
                             f"((embedding::halfvec({DIMS})) halfvec_cosine_ops)")
        # The function takes no tenant: there is no way to name b's partition to it.
        with pytest.raises(psycopg.errors.UndefinedFunction):
            conn.execute("SELECT memfs.vector_index(%s::bigint, %s)", (b.tenant_id, DIMS))
        assert knn.build_index(conn, DIMS) == f"chunks_t{a.tenant_id}_hnsw_{DIMS}"
        assert knn.build_index(conn, DIMS) == f"chunks_t{a.tenant_id}_hnsw_{DIMS}"  # idempotent
        assert _indexes(conn, a.tenant_id) == [f"chunks_t{a.tenant_id}_hnsw_{DIMS}"]
        assert _indexes(conn, b.tenant_id) == []
        with pytest.raises(psycopg.errors.InvalidParameterValue):
            knn.build_index(conn, 0)
        # Another dimension (a new model): the old index goes, none is built without `build`.
        assert knn.build_index(conn, 2 * DIMS, build=False) is None
        assert _indexes(conn, a.tenant_id) == []
    with psycopg.connect(b.dsn, autocommit=True) as conn:
        knn.build_index(conn, DIMS)
        assert _indexes(conn, b.tenant_id) == [f"chunks_t{b.tenant_id}_hnsw_{DIMS}"]
        assert _indexes(conn, a.tenant_id) == []


def _file(number: int, per_file: int, rng: np.random.Generator) -> tuple[FileRecord, list[Chunk], list[str], dict]:
    path = f"memory/2026-01-{number:02d}.md"
    chunks = [Chunk(i, i, f"note {number} {i} word{i % 97} topic{number}") for i in range(1, per_file + 1)]
    hashes = [f"{number}-{i}" for i in range(per_file)]
    vectors = rng.standard_normal((per_file, DIMS)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    record = FileRecord(path, "daily_log", str(number), 0.0, 0, 0, "")
    return record, chunks, hashes, {h: v.tobytes() for h, v in zip(hashes, vectors)}


def test_a_store_reaching_the_threshold_gets_its_index(tmp_path: Path, pg_index) -> None:
    workspace = tmp_path / "ws"
    init_workspace(workspace)
    dsn = pg_index(workspace, "main")
    store = PgStore(dsn, workspace_id(workspace), "main")
    rng = np.random.default_rng(5)
    try:
        store.set_fingerprint({"test": True}, DIMS)
        per_file = 500
        files = knn.EXACT_MAX // per_file + 1
        for number in range(1, files + 1):
            record, chunks, hashes, cached = _file(number, per_file, rng)
            with store.batch():  # the index is built after the batch commits, not inside it
                store.replace_file(record, chunks, hashes, [c.text for c in chunks], cached)
                below = store.chunk_total() < knn.EXACT_MAX
            assert knn.has_index(store.conn, store.tenant, DIMS) == (not below), number
        assert store.chunk_total() >= knn.EXACT_MAX
        query = rng.standard_normal(DIMS).astype(np.float32)
        literal = "[" + ",".join(f"{x:.5f}" for x in query) + "]"
        with store.conn.transaction():
            store.conn.execute("SET LOCAL enable_seqscan = off")  # as knn.vector_candidates does
            plan = "\n".join(r[0] for r in store.conn.execute(
                f"EXPLAIN SELECT chunk_id FROM memfs.chunks WHERE tenant_id = %s::bigint AND embedding IS NOT NULL "
                f"ORDER BY embedding::halfvec({DIMS}) <=> %s::halfvec({DIMS}) LIMIT 20", (store.tenant, literal)))
        assert f"chunks_t{store.tenant}_hnsw_{DIMS}" in plan, plan
        found = store.vector_candidates(query, 20)
        assert len(found) == 20
    finally:
        store.close()
    # A new model of another dimension: the tenant's old index goes with the new fingerprint.
    store = PgStore(dsn, workspace_id(workspace), "main")
    try:
        store.clear()
        store.set_fingerprint({"test": "other"}, 2 * DIMS)
        assert not knn.has_index(store.conn, store.tenant, DIMS)
        record, chunks, hashes, _ = _file(1, 10, rng)
        cached = {h: rng.standard_normal(2 * DIMS).astype(np.float32).tobytes() for h in hashes}
        store.replace_file(record, chunks, hashes, [c.text for c in chunks], cached)  # refused with the old index
    finally:
        store.close()
