"""Every statement memfs sends for a tenant is keyed by that tenant (what lets the schema
distribute on Citus by tenant_id, README "Beyond one server"): a PostgreSQL index indexed,
searched (keyword, vector, scoped, phrase), changed, renamed and reported on, with every
statement its store sent recorded; each one's plan, EXPLAINed as the tenant with the same
parameters, reads the tenant's own partitions and no other tenant's (partition pruning at
plan time, not only row-level security at run time), and each statement on an unpartitioned
tenant table names tenant_id."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import write

psycopg = pytest.importorskip("psycopg")
from pgvector.psycopg import register_vector  # noqa: E402

from memfs.index.storage.postgres.schema import PARTITIONED, TENANT_TABLES  # noqa: E402
from memfs.index.storage.postgres.store import PgStore  # noqa: E402
from memfs.memory import Memory, parse_options  # noqa: E402
from memfs.workspace import init_workspace  # noqa: E402

PARTITION = re.compile(rf"\b({'|'.join(PARTITIONED)})_t(\d+)\b")
UNPARTITIONED = [t for t in TENANT_TABLES if t not in PARTITIONED]


class Recording(psycopg.Cursor):
    """A cursor that keeps every statement it runs, with its parameters."""

    seen: list[tuple[str, object]] = []

    def execute(self, query, params=None, **kwargs):  # type: ignore[override]
        Recording.seen.append((str(query), params))
        return super().execute(query, params, **kwargs)

    def executemany(self, query, params_seq, **kwargs):  # type: ignore[override]
        params_seq = list(params_seq)
        if params_seq:
            Recording.seen.append((str(query), params_seq[0]))
        return super().executemany(query, params_seq, **kwargs)


def test_every_statement_of_a_tenant_reads_its_partitions_alone(tmp_path: Path, make_config, pg_index,
                                                                   locomo_day) -> None:
    memories = []
    try:
        for name in ("a", "b", "c"):  # b and c: other tenants with rows in their own partitions
            ws = tmp_path / name
            init_workspace(ws)
            locomo_day(ws)
            write(ws / "MEMORY.md", f"# Memory\n\n- {name}: the vault code is in the teal box.\n")
            memories.append(Memory(make_config(ws, index__backend="postgres", index__dsn=pg_index(ws, "main"))))
        for memory in memories[1:]:
            memory.index()
        a = memories[0]
        store = a.store
        assert isinstance(store, PgStore)
        Recording.seen = []
        store.conn.cursor_factory = Recording
        a.index()
        for query in ("When did Caroline go to the LGBTQ support group?", '"support group" adoption', "teal box"):
            for mode in ("main", "shared"):
                assert a.search(query, min_score=0, mode=mode).results
        a.search("Caroline support group", min_score=0, options=parse_options({"in": "memory"}))
        a.search("Caroline support group", min_score=0, options=parse_options({"after": "2023-05-01"}))
        ws = tmp_path / "a"
        write(ws / "memory" / "2026-01-02.md", "# 2026-01-02\n\n- Bought a kayak called Zephyrine.\n")
        a.file_changed("memory/2026-01-02.md")
        (ws / "memory" / "2026-01-02.md").rename(ws / "memory" / "2026-01-03.md")
        a.file_moved("memory/2026-01-02.md", "memory/2026-01-03.md")
        a.status()
        (ws / "memory" / "2026-01-03.md").unlink()
        a.file_changed("memory/2026-01-03.md")
        store.conn.cursor_factory = psycopg.Cursor
        seen = list(Recording.seen)
        assert len(seen) > 50

        others = {m.store.tenant for m in memories[1:]}  # type: ignore[attr-defined]
        checked = 0
        with psycopg.connect(store.dsn, autocommit=True, prepare_threshold=None) as conn:
            register_vector(conn)  # the store's parameters include numpy vectors
            for sql, params in seen:
                words = sql.split(None, 1)[0].upper()
                tables = set(re.findall(r"memfs\.(\w+)", sql))
                if words not in ("SELECT", "WITH", "UPDATE", "DELETE", "INSERT") or not tables & set(TENANT_TABLES):
                    continue
                for table in tables & set(UNPARTITIONED):
                    assert "tenant_id" in sql, f"{table} read without its tenant: {sql}"
                plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + sql, params))
                read = {int(n) for _, n in PARTITION.findall(plan)}
                assert not read & others, f"reads another tenant's partition: {sql}\n{plan}"
                assert read <= {store.tenant}, f"{sql}\n{plan}"
                if tables & set(PARTITIONED) and words != "INSERT":
                    # Pruned at plan time to the tenant's own partitions (never all of them).
                    assert read == {store.tenant} or "One-Time Filter: false" in plan, f"{sql}\n{plan}"
                checked += 1
        assert checked > 40
    finally:
        for memory in memories:
            memory.close()
