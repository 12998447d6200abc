"""The embedding cache on PostgreSQL is each tenant's own (schema v6): the security review's attack,
run with real tenant logins and the real model, plants nothing in another tenant's index and
confirms none of its texts; status counts the tenant's own entries; and a database made before v6
loses the shared cache, whose rows nobody can vouch for, and keeps each tenant's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

psycopg = pytest.importorskip("psycopg")

from conftest import begin_schema_7  # noqa: E402

from memfs.index.storage.postgres import roles, schema  # noqa: E402
from memfs.index.storage.postgres.store import PgStore  # noqa: E402
from memfs.index.storage.vectors import unpack_unit_vector  # noqa: E402
from memfs.memory import Memory  # noqa: E402
from memfs.workspace import init_workspace  # noqa: E402
from memfs.workspaceid import workspace_id  # noqa: E402

# A line an attacker can guess another tenant holds (it was public: a build log).
LOG_LINE = "# 2026-03-01\n\n- Deployed build 4411 to the staging cluster; the canary failed at 14:02.\n"
REFUSED = (psycopg.errors.InsufficientPrivilege, psycopg.errors.UndefinedTable)


def _workspace(ws: Path, locomo_day) -> None:
    init_workspace(ws)
    locomo_day(ws)
    (ws / "memory" / "2026-03-01.md").write_text(LOG_LINE)


def _vectors(rows) -> dict[str, np.ndarray]:
    return {str(h): np.asarray(v, dtype=np.float32) for h, v in rows}


def _by_place(store) -> dict[tuple, np.ndarray]:
    """Every chunk and unit vector of an index, by where its text is (its ids are the store's own)."""
    found: dict[tuple, np.ndarray] = {}
    dims = int(store.fingerprint["dims"])
    for rows in store.export_files([r.path for r in store.files()]):
        for chunk in rows.chunks:
            assert chunk.vector is not None, (chunk.path, chunk.start_line)
            found[("chunk", chunk.path, chunk.start_line, chunk.end_line)] = np.frombuffer(chunk.vector, dtype=np.float32)
        chunk_lines = {c.id: c.start_line for c in rows.chunks}
        for unit in rows.units:
            vector = unpack_unit_vector(unit.vector, dims)
            assert vector is not None, (rows.record.path, unit.start_line)
            found[("unit", rows.record.path, chunk_lines[unit.chunk_id], unit.start_line, unit.end_line)] = vector
    return found


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_a_tenant_can_neither_plant_a_vector_nor_confirm_a_text_of_another(tmp_path: Path, make_config, pg_index,
                                                                            locomo_day) -> None:
    ws_a, ws_b = tmp_path / "a", tmp_path / "b"
    _workspace(ws_a, locomo_day)
    _workspace(ws_b, locomo_day)
    a_dsn, b_dsn = pg_index(ws_a, "main"), pg_index(ws_b, "main")

    # The attacker learns the cache keys of the texts it guesses B holds the way anyone can: it
    # indexes them itself (SQLite, its own machine) and reads its own cache.  Those vectors are
    # also what B's model makes of them: the honest ones.  (An index of schema 7 keeps every
    # vector, float32, in its cache; one of 8 keeps them in the index, found by the same keys.)
    local_cfg = make_config(ws_a)
    begin_schema_7(local_cfg)
    local = Memory(local_cfg)
    try:
        local.index()
        keys = local.store.conn.execute("SELECT provider, model, hash, dims, vector FROM cache.embedding_cache").fetchall()
        honest = _by_place(local.store)
    finally:
        local.close()
    assert len(keys) > 10 and len(honest) > 20

    # With its own login it plants the opposite of each vector wherever a tenant can write.
    with psycopg.connect(a_dsn, autocommit=True) as a:
        a_id = a.execute("SELECT tenant_id FROM memfs.tenants").fetchone()[0]
        with psycopg.connect(b_dsn) as b:
            b_id = b.execute("SELECT tenant_id FROM memfs.tenants").fetchone()[0]
        refused: list[str] = []
        for provider, model, digest, dims, vector in keys:
            planted = str((-np.frombuffer(vector, dtype=np.float32)).tolist())
            for table, tenant in (("embedding_cache", None), ("tenant_embeddings", b_id), ("tenant_embeddings", a_id)):
                columns = "provider, model, hash, dims, vector" + (", tenant_id, private" if tenant else "")
                values = "%s, %s, %s, %s, %s::vector" + (", %s, false" if tenant else "")
                try:
                    a.execute(f"INSERT INTO memfs.{table}({columns}) VALUES ({values}) ON CONFLICT DO NOTHING",
                              (provider, model, digest, dims, planted, *([tenant] if tenant else [])))
                except REFUSED:
                    refused.append(f"{table} of {'B' if tenant == b_id else 'A' if tenant else 'the fleet'}")

    # B indexes its workspace, which holds those texts, with its own login and the real model.
    victim = Memory(make_config(ws_b, index__backend="postgres", index__dsn=b_dsn))
    try:
        assert isinstance(victim.store, PgStore)
        victim.index()
        assert victim.store.counts()["pending"] == 0
        own_count = victim.store.counts()["cached_embeddings"]
        got = _by_place(victim.store)
    finally:
        victim.close()
    # Every chunk and unit vector of B is what the model makes of its text (as A's own index of
    # the same files has it), not the opposite the attacker planted.
    assert got.keys() == honest.keys()
    for place, vector in got.items():
        assert _cos(vector, honest[place]) > 0.99, place
    # And so is every entry of B's cache.
    wanted = {str(k[2]): np.frombuffer(k[4], dtype=np.float32) for k in keys}
    with psycopg.connect(b_dsn) as b:
        cached = _vectors(b.execute("SELECT hash, vector::real[] FROM memfs.tenant_embeddings").fetchall())
    assert own_count == len(cached) and set(wanted) & set(cached)
    for digest in set(wanted) & set(cached):
        assert _cos(cached[digest], wanted[digest]) > 0.999, digest
    # Nothing of the fleet's to write into, and B's rows are not A's to write.
    assert refused.count("embedding_cache of the fleet") == len(keys)
    assert refused.count("tenant_embeddings of B") == len(keys)
    assert "tenant_embeddings of A" not in refused  # its own, which nobody else reads

    # Nor can A confirm a guess: no hash of B's is readable, through any table or B's tenant id.
    with psycopg.connect(a_dsn, autocommit=True) as a:
        with pytest.raises(REFUSED):
            a.execute("SELECT hash FROM memfs.embedding_cache")
        seen = {r[0] for r in a.execute("SELECT DISTINCT tenant_id FROM memfs.tenant_embeddings")}
        assert seen == {a_id}
        assert a.execute("SELECT count(*) FROM memfs.tenant_embeddings WHERE tenant_id = %s", (b_id,)).fetchone()[0] == 0
        found = {r[0] for r in a.execute("SELECT hash FROM memfs.chunks WHERE hash = ANY (%s)", (list(cached),))}
        assert not found  # A has indexed nothing on the server: B's hashes are B's alone

    # B's status counts B's entries: A's planted rows (A's own) change nothing of it.
    with psycopg.connect(a_dsn, autocommit=True) as a:
        a.execute("INSERT INTO memfs.tenant_embeddings(tenant_id, provider, model, hash, dims, vector, private) "
                  "VALUES (%s, 'local', 'more', 'x', 1, '[1]', false)", (a_id,))
    victim = Memory(make_config(ws_b, index__backend="postgres", index__dsn=b_dsn))
    try:
        assert victim.store.counts()["cached_embeddings"] == own_count
    finally:
        victim.close()


def test_a_shared_mode_login_caches_public_text_in_its_tenant_and_sees_no_private_entry(
        tmp_path: Path, make_config, pg_index) -> None:
    ws = tmp_path / "ws"
    init_workspace(ws)
    (ws / "MEMORY.md").write_text("# Memory\n\n- The door code is 4417.\n")
    (ws / "memory" / "2026-03-01.md").write_text(LOG_LINE)
    main = Memory(make_config(ws, index__backend="postgres", index__dsn=pg_index(ws, "main")))
    try:
        main.index()
        private = {str(r[0]) for r in main.store.conn.execute(
            "SELECT hash FROM memfs.tenant_embeddings WHERE private")}
        public = {str(r[0]) for r in main.store.conn.execute(
            "SELECT hash FROM memfs.tenant_embeddings WHERE NOT private")}
        memory_hashes = {str(r[0]) for r in main.store.conn.execute(
            "SELECT hash FROM memfs.chunks WHERE path = 'MEMORY.md'")}
    finally:
        main.close()
    assert memory_hashes and memory_hashes <= private and public and not public & private
    shared_dsn = pg_index(ws, "main", shared=True)
    with psycopg.connect(shared_dsn) as conn:
        seen = {str(r[0]) for r in conn.execute("SELECT hash FROM memfs.tenant_embeddings")}
    assert seen == public
    # A shared-mode mount's index of the same workspace text takes the tenant's public entries.
    shared = Memory(make_config(ws, mode="shared", index__backend="postgres", index__dsn=shared_dsn))
    try:
        log_hashes = {str(r[0]) for r in shared.store.conn.execute(
            "SELECT hash FROM memfs.chunks WHERE path = 'memory/2026-03-01.md'")}
        assert log_hashes and log_hashes <= public
        assert set(shared.store.cached_vectors("local", next(iter(_models(shared_dsn))), log_hashes)) == log_hashes
    finally:
        shared.close()


def _models(dsn: str) -> set[str]:
    with psycopg.connect(dsn) as conn:
        return {str(r[0]) for r in conn.execute("SELECT DISTINCT model FROM memfs.tenant_embeddings")}


def test_the_v6_migration_drops_the_shared_cache_and_keeps_each_tenants_own(pg_server, tmp_path: Path,
                                                                            monkeypatch) -> None:
    from pg import scratch_database

    ws = tmp_path / "ws"
    ws.mkdir()
    with scratch_database(pg_server.dsn, "memfs_v5") as admin:
        monkeypatch.setattr(schema, "MIGRATIONS", tuple(m for m in schema.MIGRATIONS if m[0] <= 5))
        monkeypatch.setattr(schema, "LATEST", 5)
        monkeypatch.setattr(roles, "LATEST", 5)
        assert schema.init(admin)[:2] == (0, 5)
        login = roles.grant_login(admin, workspace_id(ws), "main")
        with psycopg.connect(login.dsn, autocommit=True) as conn:  # as a v5 memfs wrote them
            conn.execute("INSERT INTO memfs.embedding_cache(provider, model, hash, dims, vector) "
                         "VALUES ('local', 'm', 'planted', 2, '[1,0]')")
            conn.execute("INSERT INTO memfs.tenant_embeddings(tenant_id, provider, model, hash, dims, vector) "
                         "VALUES (%s, 'local', 'm', 'own', 2, '[0,1]')", (login.tenant_id,))
        monkeypatch.undo()
        assert schema.init(admin)[:2] == (5, schema.LATEST)
        with psycopg.connect(admin) as conn:
            assert conn.execute("SELECT to_regclass('memfs.embedding_cache')").fetchone()[0] is None
            assert conn.execute("SELECT description FROM memfs.schema_version WHERE version = 6").fetchone()
        with psycopg.connect(login.dsn) as conn:
            rows = conn.execute("SELECT hash, vector::text, private FROM memfs.tenant_embeddings").fetchall()
            assert rows == [("own", "[0,1]", True)]
        assert schema.init(admin)[:2] == (schema.LATEST, schema.LATEST)  # and once only
