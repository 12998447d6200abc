"""Schema v7 (issue #45): chunk vectors and the tenant's embedding cache as pgvector's halfvec.

An index written by a memfs of schema v6 (float32 ``vector`` columns, an HNSW index on
``embedding::vector(N)``) is refused by a memfs that needs v7, with the line that says what to
run; ``memfs pg init`` converts it in place (the columns rewritten as halfvec, the HNSW index
rebuilt on ``halfvec(N)``), and the same questions find the same passages, the vector side
through the rebuilt index, in half the bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")
from conftest import write
from pg import scratch_database

from memfs.config import load_config
from memfs.index.storage.postgres import knn, roles, schema
from memfs.index.storage.postgres import store as pgstore
from memfs.memory import Memory
from memfs.services.lifecycle import IndexBusy
from memfs.workspace import init_workspace
from memfs.workspaceid import workspace_id

QUESTIONS = ["When did Caroline go to the LGBTQ support group?", "a painting of the sun coming up over the lake",
             "adoption agencies", "camping with the kids"]


def _types(conn) -> dict[str, str]:
    return {f"{table}.{column}": str(kind) for table, column, kind in conn.execute(
        "SELECT c.relname, a.attname, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a "
        "JOIN pg_class c ON c.oid = a.attrelid WHERE c.relnamespace = 'memfs'::regnamespace "
        "AND (c.relname, a.attname) IN (('chunks', 'embedding'), ('tenant_embeddings', 'vector'))")}


def _vector_bytes(conn) -> int:
    return int(conn.execute("SELECT (SELECT coalesce(sum(pg_column_size(embedding)), 0) FROM memfs.chunks) + "
                            "(SELECT coalesce(sum(pg_column_size(vector)), 0) FROM memfs.tenant_embeddings)"
                            ).fetchone()[0])


def test_init_converts_a_v6_index_to_halfvec_and_it_answers_the_same(pg_server, tmp_path: Path, locomo_day,
                                                                      monkeypatch) -> None:
    ws = tmp_path / "ws"
    init_workspace(ws)
    locomo_day(ws)
    write(ws / "MEMORY.md", "# Memory\n\n- Caroline's favourite colour is teal.\n")
    with scratch_database(pg_server.dsn, "memfs_v6") as admin:
        # The database and the index as a memfs of schema v6 left them.
        for module in (schema, roles, pgstore):
            monkeypatch.setattr(module, "LATEST", 6)
        monkeypatch.setattr(schema, "MIGRATIONS", tuple(m for m in schema.MIGRATIONS if m[0] <= 6))
        assert schema.init(admin)[:2] == (0, 6)
        login = roles.grant_login(admin, workspace_id(ws), "main")

        def memory() -> Memory:
            return Memory(load_config(workspace=ws, overrides=[
                ("state_dir", str(tmp_path / "state")), ("index.backend", "postgres"), ("index.dsn", login.dsn)]))

        old = memory()
        try:
            old.index()
            assert old.pending == 0
            dims = old.provider.dims
            before = [[(r.path, r.start_line) for r in old.search(q, min_score=0).results] for q in QUESTIONS]
        finally:
            old.close()
        part = f"chunks_t{login.tenant_id}"
        with psycopg.connect(admin, autocommit=True) as conn:
            assert _types(conn) == {"chunks.embedding": "vector", "tenant_embeddings.vector": "vector"}
            conn.execute(f"CREATE INDEX {part}_hnsw_{dims} ON memfs.{part} USING hnsw "
                         f"((embedding::vector({dims})) vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
            float32_bytes = _vector_bytes(conn)
        monkeypatch.undo()

        # A memfs that needs v7 refuses the old schema and says what to run: nothing is converted
        # behind the admin's back.
        with pytest.raises(IndexBusy, match=r"version 6, this memfs needs 7: run `memfs pg init DSN`"):
            memory()
        with psycopg.connect(admin, autocommit=True) as conn:
            assert _types(conn)["chunks.embedding"] == "vector"

        assert schema.init(admin)[:2] == (6, 7)
        with psycopg.connect(admin, autocommit=True) as conn:
            assert _types(conn) == {"chunks.embedding": "halfvec", "tenant_embeddings.vector": "halfvec"}
            definition = conn.execute("SELECT pg_get_indexdef(%s::regclass)", (f"memfs.{part}_hnsw_{dims}",)).fetchone()[0]
            assert f"halfvec({dims})" in definition and "halfvec_cosine_ops" in definition, definition
            halfvec_bytes = _vector_bytes(conn)
        assert halfvec_bytes < 0.55 * float32_bytes, (halfvec_bytes, float32_bytes)

        new = memory()
        try:
            assert new.pending == 0
            after = [[(r.path, r.start_line) for r in new.search(q, min_score=0).results] for q in QUESTIONS]
            assert after == before and all(before)
            with psycopg.connect(login.dsn, autocommit=True) as conn:
                conn.execute("SET enable_seqscan = off")  # as knn does when it wants the index
                plan = "\n".join(r[0] for r in conn.execute(
                    "EXPLAIN SELECT chunk_id FROM memfs.chunks WHERE tenant_id = %s::bigint "
                    f"ORDER BY embedding::halfvec({dims}) <=> %s::halfvec({dims}) LIMIT 5",
                    (login.tenant_id, "[" + ",".join(["0.1"] * dims) + "]")))
            assert f"{part}_hnsw_{dims}" in plan, plan
            query = new.provider.embed([QUESTIONS[0]])[0]
            with psycopg.connect(login.dsn, autocommit=True) as conn:
                by_index = knn.vector_candidates(conn, login.tenant_id, query, 5, exact=False)
                by_scan = knn.vector_candidates(conn, login.tenant_id, query, 5, exact=True)
            assert [c for c, _ in by_index] == [c for c, _ in by_scan] and len(by_scan) >= 3
        finally:
            new.close()
