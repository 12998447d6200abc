"""The PostgreSQL schema's isolation, on a real server (tests/pg.py): one tenant's login role
tries to read, change and infer another's rows through direct selects, KNN, term statistics,
counts, planner statistics, a leaky function and the embedding cache (each tenant's own); the shared-mode role tries
to reach private rows; reader grants, rotation, migrations and the errors of ``memfs pg init``."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")
from psycopg.conninfo import make_conninfo  # noqa: E402

from memfs.index.storage.postgres import schema  # noqa: E402
from memfs.workspaceid import ID_FILE, WorkspaceIdError, read_id, workspace_id  # noqa: E402

MEMFS = [sys.executable, "-m", "memfs"]
ENV = {k: v for k, v in os.environ.items() if k != "MEMFS_PG_DSN"}

# Each tenant's rows: (chunk_id, path, private, text, vector, term)
ROWS = {
    "a": [(1, "memory/2026-01-01.md", False, "alpha public apples", "[1,0,0]", "apples"),
          (2, "MEMORY.md", True, "alpha private secret", "[0,1,0]", "secretalpha")],
    "b": [(1, "memory/2026-01-01.md", False, "bravo public bananas", "[0,0,1]", "bananas"),
          (2, "MEMORY.md", True, "bravo private password hunter2", "[0.1,0.9,0.1]", "hunter2")],
}
SECRET_WORDS = ("bravo", "bananas", "hunter2")  # B's: never to reach A


def _memfs(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*MEMFS, *args], capture_output=True, text=True, env=env or ENV, timeout=120)


@pytest.fixture(scope="module")
def db(pg_server) -> Iterator[str]:
    """A fresh database with the memfs schema; its roles are dropped at the end."""
    name = f"memfs_test_{secrets.token_hex(4)}"
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    dsn = make_conninfo(pg_server.dsn, dbname=name)
    try:
        result = _memfs("pg", "init", dsn)
        assert result.returncode == 0, result.stderr
        yield dsn
    finally:
        from pg import drop_database

        drop_database(pg_server.dsn, name)  # and its roles, not those of another test database


@pytest.fixture(scope="module")
def fleet(db: str, tmp_path_factory) -> dict[str, object]:
    """Workspace ws with agents a and b, each writing its rows through its own role."""
    ws = tmp_path_factory.mktemp("ws")
    out: dict[str, object] = {"ws": ws, "dsn": db}
    for agent in ("a", "b"):
        result = _memfs("pg", "grant", "--workspace", str(ws), "--agent", agent, "--dsn", db)
        assert result.returncode == 0, result.stderr
        dsn = result.stdout.strip().splitlines()[-1]
        out[agent] = dsn
        with psycopg.connect(dsn, autocommit=True) as conn:
            tenant = conn.execute("SELECT tenant_id FROM memfs.tenants").fetchone()[0]
            out[f"{agent}_id"] = tenant
            _write_rows(conn, tenant, ROWS[agent])
    return out


def _write_rows(conn, tenant: int, rows) -> None:
    for chunk_id, path, private, text, vector, term in rows:
        conn.execute("INSERT INTO memfs.files(tenant_id, path, kind, hash, mtime, size, chunks, indexed_at, private) "
                     "VALUES (%s, %s, 'daily_log', %s, 0, %s, 1, 0, %s)", (tenant, path, f"h-{text}", len(text), private))
        conn.execute("INSERT INTO memfs.chunks(tenant_id, chunk_id, path, start_line, end_line, hash, text, private, "
                     "length, embedding, embedded) VALUES (%s, %s, %s, 1, 1, %s, %s, %s, 3, %s::vector, true)",
                     (tenant, chunk_id, path, f"h-{text}", text, private, vector))
        conn.execute("INSERT INTO memfs.units(tenant_id, unit_id, chunk_id, start_line, end_line, hash, text, vector, "
                     "private) VALUES (%s, %s, %s, 1, 1, %s, %s, %s::vector, %s)",
                     (tenant, chunk_id, chunk_id, f"u-{text}", text, vector, private))
        conn.execute("INSERT INTO memfs.chunk_terms(tenant_id, chunk_id, term, tf, private) VALUES (%s, %s, %s, 1, %s)",
                     (tenant, chunk_id, term, private))
        conn.execute("INSERT INTO memfs.term_df(tenant_id, private, term, df) VALUES (%s, %s, %s, 1)",
                     (tenant, private, term))
        conn.execute("INSERT INTO memfs.corpus_stats(tenant_id, private, chunks, total_length) VALUES (%s, %s, 1, 3)",
                     (tenant, private))
        conn.execute("INSERT INTO memfs.sync_messages(tenant_id, message_id, path, private) VALUES (%s, %s, %s, %s)",
                     (tenant, f"msg-{text}", path, private))
        conn.execute("INSERT INTO memfs.tenant_embeddings(tenant_id, provider, model, hash, dims, vector) "
                     "VALUES (%s, 'local', 'm', %s, 3, %s::vector)", (tenant, f"h-{text}", vector))
    conn.execute("INSERT INTO memfs.meta(tenant_id, key, value) VALUES (%s, 'fingerprint', %s)",
                 (tenant, f"model of {rows[0][3]}"))


def _everything(conn) -> str:
    """Every row of every tenant table this connection can see, as one text."""
    seen = []
    for table in schema.TENANT_TABLES:
        seen.append(repr(conn.execute(f"SELECT * FROM memfs.{table}").fetchall()))
    return "\n".join(seen)


def test_select_sees_only_its_own_tenant(fleet) -> None:
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        seen = _everything(conn)
        assert "alpha private secret" in seen and "alpha public apples" in seen
        for word in SECRET_WORDS:
            assert word not in seen
        # Naming B's tenant outright finds nothing either.
        for table in schema.TENANT_TABLES:
            assert conn.execute(f"SELECT count(*) FROM memfs.{table} WHERE tenant_id = %s",
                                (fleet["b_id"],)).fetchone()[0] == 0, table
        assert [r[0] for r in conn.execute("SELECT tenant_id FROM memfs.tenants")] == [fleet["a_id"]]
        # B's partition cannot be read directly (it would skip the parent's policies).
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute(f"SELECT * FROM memfs.chunks_t{fleet['b_id']}")


def test_knn_finds_only_its_own_rows(fleet, db) -> None:
    b_vector = ROWS["b"][1][4]
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        near = conn.execute("SELECT tenant_id, text FROM memfs.chunks ORDER BY embedding <=> %s::vector LIMIT 10",
                            (b_vector,)).fetchall()
        assert {t for t, _ in near} == {fleet["a_id"]} and len(near) == 2
        units = conn.execute("SELECT text FROM memfs.units ORDER BY vector <-> %s::vector LIMIT 10", (b_vector,)).fetchall()
        assert not any("bravo" in text for (text,) in units)
        exact = conn.execute("SELECT count(*) FROM memfs.chunks WHERE embedding = %s::vector", (b_vector,)).fetchone()[0]
        assert exact == 0
    # Through HNSW indexes too (one per tenant partition, as the Store will make them).
    with psycopg.connect(db, autocommit=True) as admin:
        for tenant in (fleet["a_id"], fleet["b_id"]):
            admin.execute(f"CREATE INDEX IF NOT EXISTS chunks_t{tenant}_hnsw ON memfs.chunks_t{tenant} "
                          "USING hnsw ((embedding::vector(3)) vector_cosine_ops)")
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        near = conn.execute("SELECT tenant_id, text FROM memfs.chunks ORDER BY embedding::vector(3) <=> %s::vector(3) "
                            "LIMIT 10", (b_vector,)).fetchall()
        assert {t for t, _ in near} == {fleet["a_id"]}
        assert conn.execute("SELECT text FROM memfs.chunks WHERE tenant_id = %s ORDER BY embedding::vector(3) <=> "
                            "%s::vector(3) LIMIT 10", (fleet["b_id"], b_vector)).fetchall() == []
        # The Store keys every query by its tenant: the planner then reads that partition alone.
        plan = "\n".join(r[0] for r in conn.execute(
            "EXPLAIN (COSTS OFF) SELECT text FROM memfs.chunks WHERE tenant_id = %s "
            "ORDER BY embedding::vector(3) <=> %s::vector(3) LIMIT 10", (fleet["a_id"], b_vector)))
        assert f"chunks_t{fleet['a_id']}" in plan and f"chunks_t{fleet['b_id']}" not in plan, plan


def test_term_statistics_and_counts_are_per_tenant(fleet) -> None:
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        assert conn.execute("SELECT count(*) FROM memfs.chunks").fetchone()[0] == 2
        assert conn.execute("SELECT coalesce(sum(df), 0) FROM memfs.term_df WHERE term IN ('bananas', 'hunter2')"
                            ).fetchone()[0] == 0
        assert conn.execute("SELECT count(*) FROM memfs.chunk_terms WHERE term = 'hunter2'").fetchone()[0] == 0
        assert conn.execute("SELECT sum(chunks), sum(total_length) FROM memfs.corpus_stats").fetchone() == (2, 6)
        # Full text over the stored text finds nothing of B's either.
        hits = conn.execute("SELECT count(*) FROM memfs.chunks WHERE to_tsvector('simple', text) @@ "
                            "to_tsquery('simple', 'hunter2 | bananas')").fetchone()[0]
        assert hits == 0
        # Planner statistics would show other tenants' values: they are hidden under RLS.
    with psycopg.connect(fleet["dsn"], autocommit=True) as admin:
        admin.execute("ANALYZE memfs.chunks, memfs.chunk_terms")
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        stats = conn.execute("SELECT tablename, attname, most_common_vals::text FROM pg_stats "
                             "WHERE schemaname = 'memfs'").fetchall()
        assert not any(word in repr(stats) for word in SECRET_WORDS), stats


def test_a_leaky_function_sees_only_its_own_rows(fleet) -> None:
    """A function of A's in a WHERE clause runs only on rows the policies let through."""
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        heard: list[str] = []
        conn.add_notice_handler(lambda diag: heard.append(diag.message_primary or ""))
        conn.execute("CREATE FUNCTION pg_temp.leak(t text) RETURNS boolean LANGUAGE plpgsql COST 0.0000001 "
                     "AS $$ BEGIN RAISE NOTICE 'saw %', t; RETURN true; END $$")
        conn.execute("SELECT count(*) FROM memfs.chunks WHERE pg_temp.leak(text)").fetchone()
        conn.execute("SELECT count(*) FROM memfs.chunk_terms WHERE pg_temp.leak(term)").fetchone()
        assert heard and not any(word in " ".join(heard) for word in SECRET_WORDS), heard


def test_update_delete_and_insert_cannot_reach_another_tenant(fleet) -> None:
    b = fleet["b_id"]
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        for table in schema.TENANT_TABLES:
            assert conn.execute(f"UPDATE memfs.{table} SET tenant_id = tenant_id WHERE tenant_id = %s",
                                (b,)).rowcount == 0, table
            assert conn.execute(f"DELETE FROM memfs.{table} WHERE tenant_id = %s", (b,)).rowcount == 0, table
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO memfs.meta(tenant_id, key, value) VALUES (%s, 'planted', 'x')", (b,))
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("UPDATE memfs.meta SET tenant_id = %s", (b,))  # moving its own row into B
    with psycopg.connect(fleet["b"], autocommit=True) as conn:
        seen = _everything(conn)
        assert all(row[3] in seen for row in ROWS["b"]) and "planted" not in seen
        assert conn.execute("SELECT count(*) FROM memfs.chunks").fetchone()[0] == 2


def test_the_embedding_cache_is_each_tenants_own(fleet) -> None:
    """No cache shared by every tenant (the one before v6 let a tenant plant a vector another took
    for its own text and read every tenant's text hashes); a tenant's own is guarded like its
    other rows (tests/test_pg_cache_tenants.py runs the attack through memfs itself)."""
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        with pytest.raises(psycopg.errors.UndefinedTable):
            conn.execute("SELECT hash FROM memfs.embedding_cache")
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO memfs.tenant_embeddings(tenant_id, provider, model, hash, dims, vector, private) "
                         "VALUES (%s, 'local', 'm', 'h-bravo public bananas', 3, '[1,2,3]', false)", (fleet["b_id"],))
    with psycopg.connect(fleet["b"], autocommit=True) as conn:
        own = conn.execute("SELECT DISTINCT tenant_id FROM memfs.tenant_embeddings").fetchall()
        assert own == [(fleet["b_id"],)]
        assert conn.execute("SELECT vector::text FROM memfs.tenant_embeddings WHERE hash = 'h-bravo public bananas'"
                            ).fetchall() == [("[0,0,1]",)]


def test_no_tenant_may_write_a_table_another_tenant_reads(fleet) -> None:
    """Every table the tenants' group may change is a tenant table: row-level security forced,
    a row written for its own tenant alone.  The rest it may at most read, and none of those
    holds anything a tenant writes."""
    with psycopg.connect(fleet["dsn"], autocommit=True) as admin:
        group = schema.names(admin).tenant_group
        rows = admin.execute(
            "SELECT c.relname, c.relrowsecurity AND c.relforcerowsecurity, "
            "has_table_privilege(%s, c.oid, 'INSERT') OR has_table_privilege(%s, c.oid, 'UPDATE') "
            "OR has_table_privilege(%s, c.oid, 'DELETE') OR has_table_privilege(%s, c.oid, 'TRUNCATE') "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = 'memfs' AND c.relkind IN ('r', 'p', 'v', 'm', 'f') AND NOT c.relispartition",
            (group, group, group, group)).fetchall()
    writable = {name: guarded for name, guarded, writes in rows if writes}
    assert set(writable) == set(schema.TENANT_TABLES) and all(writable.values()), writable


def test_shared_role_never_sees_private_rows(fleet) -> None:
    result = _memfs("pg", "grant", "--workspace", str(fleet["ws"]), "--agent", "a", "--shared", "--dsn", fleet["dsn"])
    assert result.returncode == 0, result.stderr
    shared = result.stdout.strip().splitlines()[-1]
    with psycopg.connect(shared, autocommit=True) as conn:
        seen = _everything(conn)
        assert "alpha public apples" in seen
        assert "secret" not in seen and "MEMORY.md" not in seen and "secretalpha" not in seen
        near = conn.execute("SELECT text FROM memfs.chunks ORDER BY embedding <=> %s::vector LIMIT 5",
                            (ROWS["a"][1][4],)).fetchall()
        assert near == [("alpha public apples",)]
        assert conn.execute("SELECT sum(chunks) FROM memfs.corpus_stats").fetchone()[0] == 1
        assert conn.execute("UPDATE memfs.chunks SET text = 'x' WHERE private").rowcount == 0
        assert conn.execute("DELETE FROM memfs.files WHERE private").rowcount == 0
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
            conn.execute("INSERT INTO memfs.chunks(tenant_id, chunk_id, path, start_line, end_line, hash, text, private) "
                         "VALUES (%s, 99, 'MEMORY.md', 1, 1, 'h', 'planted', true)", (fleet["a_id"],))
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        assert conn.execute("SELECT text FROM memfs.chunks WHERE private").fetchall() == [("alpha private secret",)]


def test_reading_another_agent_needs_an_explicit_grant(fleet) -> None:
    ws, dsn = str(fleet["ws"]), fleet["dsn"]
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        assert "bravo" not in _everything(conn)
    result = _memfs("pg", "grant", "--workspace", ws, "--agent", "b", "--reader", "a", "--dsn", dsn)
    assert result.returncode == 0, result.stderr
    assert "may read" in result.stdout and "nothing changed" not in result.stdout
    again = _memfs("pg", "grant", "--workspace", ws, "--agent", "b", "--reader", "a", "--dsn", dsn)
    assert again.returncode == 0 and "a may already read" in again.stdout and "nothing changed" in again.stdout
    try:
        with psycopg.connect(fleet["a"], autocommit=True) as conn:
            seen = _everything(conn)
            assert "bravo public bananas" in seen and "hunter2" not in seen  # B's public rows only
            assert conn.execute("UPDATE memfs.chunks SET text = 'x' WHERE tenant_id = %s",
                                (fleet["b_id"],)).rowcount == 0
            assert conn.execute("DELETE FROM memfs.chunks WHERE tenant_id = %s", (fleet["b_id"],)).rowcount == 0
        with psycopg.connect(fleet["b"], autocommit=True) as conn:  # the grant goes one way
            assert "alpha" not in _everything(conn)
    finally:
        result = _memfs("pg", "grant", "--workspace", ws, "--agent", "b", "--reader", "a", "--revoke", "--dsn", dsn)
        assert result.returncode == 0, result.stderr
        assert "may no longer read" in result.stdout
    with psycopg.connect(fleet["a"], autocommit=True) as conn:
        assert "bravo" not in _everything(conn)
    # A revoke of a grant that is not there says so rather than claiming a change (a newcomer's typo).
    again = _memfs("pg", "grant", "--workspace", ws, "--agent", "b", "--reader", "a", "--revoke", "--dsn", dsn)
    assert again.returncode == 0 and "a had no grant to read" in again.stdout, again.stdout
    assert "may no longer read" not in again.stdout


def test_rotation_invalidates_the_old_password(fleet, tmp_path) -> None:
    ws = tmp_path / "rotating"
    ws.mkdir()
    first = _memfs("pg", "grant", "--workspace", str(ws), "--agent", "main", "--dsn", fleet["dsn"])
    second = _memfs("pg", "grant", "--workspace", str(ws), "--agent", "main", "--dsn", fleet["dsn"])
    assert first.returncode == second.returncode == 0, (first.stderr, second.stderr)
    assert "created" in first.stderr and "rotated" in second.stderr
    old, new = first.stdout.strip().splitlines()[-1], second.stdout.strip().splitlines()[-1]
    assert old != new
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(old).close()
    with psycopg.connect(new) as conn:  # the same tenant, with its new password
        assert conn.execute("SELECT count(*) FROM memfs.tenants").fetchone()[0] == 1


def test_init_is_idempotent_and_versioned(fleet) -> None:
    again = _memfs("pg", "init", fleet["dsn"])
    assert again.returncode == 0 and "already current" in again.stdout, again
    tenant = _memfs("pg", "init", fleet["a"])  # an agent's login can create and upgrade nothing
    assert tenant.returncode == 1 and "does not own the memfs schema" in tenant.stderr, tenant
    assert "already current" not in tenant.stdout and len(tenant.stderr.strip().splitlines()) == 1
    with psycopg.connect(fleet["dsn"], autocommit=True) as admin:
        versions = [r[0] for r in admin.execute("SELECT version FROM memfs.schema_version ORDER BY version")]
        assert versions == [number for number, _, _ in schema.MIGRATIONS]
        for table in schema.TENANT_TABLES:  # every tenant table is guarded, forced
            forced = admin.execute("SELECT relrowsecurity AND relforcerowsecurity FROM pg_class "
                                   "WHERE oid = %s::regclass", (f"memfs.{table}",)).fetchone()[0]
            assert forced, table
        admin.execute("INSERT INTO memfs.schema_version(version, description) VALUES (%s, 'from the future')",
                      (schema.LATEST + 1,))
    try:
        newer = _memfs("pg", "init", fleet["dsn"])
        assert newer.returncode == 1 and "newer than this memfs" in newer.stderr, newer
        assert "Traceback" not in newer.stderr and len(newer.stderr.strip().splitlines()) == 1
    finally:
        with psycopg.connect(fleet["dsn"], autocommit=True) as admin:
            admin.execute("DELETE FROM memfs.schema_version WHERE version > %s", (schema.LATEST,))


@pytest.fixture
def control_root() -> Iterator[Path]:
    """A folder the server's own user can read (pytest's folders are private to root)."""
    root = Path(tempfile.mkdtemp(prefix="memfs-pgext-"))
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _fake_vector(root: Path, version: str | None) -> str:
    """A folder for extension_control_path holding a pgvector of ``version`` (None: no pgvector)."""
    ext = root / "extension"
    ext.mkdir(parents=True)
    if version is not None:
        (ext / "vector.control").write_text(f"default_version = '{version}'\nrelocatable = true\n")
        (ext / f"vector--{version}.sql").write_text("")
    for path in (root, ext, *ext.iterdir()):
        path.chmod(0o755)
    return str(root)


@pytest.mark.parametrize("dsn_kind, message", [
    ("syntax", "not a valid DSN"),
    ("refused", "Connection refused"),
    ("password", "password authentication failed"),
    ("no_vector", "has no pgvector"),
    ("old_vector", "older than 0.8"),
])
def test_init_errors_are_one_line(pg_server, fleet, control_root: Path, dsn_kind: str, message: str) -> None:
    if dsn_kind == "syntax":
        dsn = "this is not a dsn"
    elif dsn_kind == "refused":
        dsn = make_conninfo(pg_server.dsn, host="127.0.0.1", port="1")
    elif dsn_kind == "password":
        dsn = make_conninfo(fleet["a"], password="not-the-password")
    else:
        if pg_server.bin_dir is None:
            pytest.skip("needs the throwaway server (a superuser sets extension_control_path)")
        name = f"memfs_noext_{secrets.token_hex(3)}"
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        control = _fake_vector(control_root, None if dsn_kind == "no_vector" else "0.7.0")
        dsn = make_conninfo(pg_server.dsn, dbname=name, options=f"-c extension_control_path={control}")
    result = _memfs("pg", "init", dsn)
    assert result.returncode == 1, result
    assert message in result.stderr and "Traceback" not in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert "not-the-password" not in result.stderr


def test_init_refuses_an_installed_old_pgvector(pg_server, control_root: Path) -> None:
    if pg_server.bin_dir is None:
        pytest.skip("needs the throwaway server (a superuser sets extension_control_path)")
    name = f"memfs_oldext_{secrets.token_hex(3)}"
    control = _fake_vector(control_root, "0.7.0")
    with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    old = make_conninfo(pg_server.dsn, dbname=name, options=f"-c extension_control_path={control}")
    with psycopg.connect(old, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION vector VERSION '0.7.0'")
    result = _memfs("pg", "init", old)
    assert result.returncode == 1 and "pgvector 0.7.0 is installed" in result.stderr, result


def test_workspace_id_is_written_once_and_moves_with_the_folder(tmp_path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    assert read_id(ws) is None
    made = workspace_id(ws)
    assert workspace_id(ws) == made and (ws / ID_FILE).read_text().strip() == str(made)
    moved = tmp_path / "elsewhere" / "renamed"
    moved.parent.mkdir()
    ws.rename(moved)
    assert workspace_id(moved) == made
    assert [p.name for p in moved.iterdir()] == [ID_FILE]  # no leftovers of the write
    (moved / ID_FILE).write_text("not a uuid\n")
    with pytest.raises(WorkspaceIdError, match="does not hold a workspace id"):
        workspace_id(moved)
    assert (moved / ID_FILE).read_text() == "not a uuid\n"  # never overwritten
    assert uuid.UUID(str(made)).version == 4


def test_cli_mistakes_are_one_line_errors(fleet, tmp_path: Path) -> None:
    """What a newcomer got wrong: a tenant's DSN where the admin's is needed (was a traceback), an
    agent name memfs refuses elsewhere, a password echoed by a DSN parse error, init's DSN asked
    for as an option it does not have."""
    ws = fleet["ws"]
    tenant = _memfs("pg", "grant", "--workspace", str(ws), "--agent", "c", "--dsn", fleet["a"])
    assert tenant.returncode == 1 and "Traceback" not in tenant.stderr, tenant.stderr
    assert "admin DSN" in tenant.stderr and len(tenant.stderr.strip().splitlines()) == 1, tenant.stderr
    bad = _memfs("pg", "grant", "--workspace", str(ws), "--agent", "Bad Name;drop", "--dsn", fleet["dsn"])
    assert bad.returncode == 2 and "not an agent name" in bad.stderr, bad.stderr
    spaced = _memfs("pg", "init", "postgresql://someone:sec ret@127.0.0.1:1/db")
    assert spaced.returncode == 1 and "not a valid DSN" in spaced.stderr and "sec ret" not in spaced.stderr, spaced
    unset = _memfs("pg", "init")
    assert unset.returncode == 2 and "memfs pg init DSN" in unset.stderr and "--dsn" not in unset.stderr, unset.stderr


def test_grant_takes_memfs_own_workspace_and_agent(fleet) -> None:
    """`memfs -w WS -a NAME pg grant` and MEMFS_WORKSPACE work as for every other command; the
    agent defaults to main."""
    ws = fleet["ws"]
    first = _memfs("-w", str(ws), "-a", "a", "pg", "grant", "--dsn", fleet["dsn"])
    assert first.returncode == 0, first.stderr
    assert "agent a)" in first.stderr, first.stderr
    fleet["a"] = first.stdout.strip().splitlines()[-1]  # rotated: later tests use the new password
    by_env = _memfs("pg", "grant", "--dsn", fleet["dsn"], env={**ENV, "MEMFS_WORKSPACE": str(ws)})
    assert by_env.returncode == 0 and "agent main)" in by_env.stderr, by_env.stderr
