#!/usr/bin/env python3
"""Three layouts of the PostgreSQL keyword postings, compared in one run on one server (issue 22):

    python scripts/bench_postings.py [--chunks 10000] [--tenants 10] [--queries 60]

- ``rows``: memfs's layout (memfs.index.storage.postgres.terms.add): one row per (chunk, term) in
  ``chunk_terms``, keyed (tenant, private, term, chunk) INCLUDE (tf, length), plus an index on
  chunk_id for removals;
- ``rows-no-chunk-index``: the same without the chunk_id index (removals would have to find a
  chunk's postings by its terms);
- ``blocks``: one row per (tenant, private, term, block) where a block is the chunks one
  ``replace_file`` wrote (a file's new chunks), with arrays of chunk ids, tfs and lengths, keyed
  by a btree on (tenant, private, term, block), so the access path is text equality (leakproof,
  used under RLS) as now.  Prototype: written and searched here only (single-token phrases), not
  in memfs.

Each layout in its own database, written by 4 concurrent writers as each tenant's login role (RLS
on), chunk rows without vectors (the postings are what differs); then bytes per chunk of the
postings table and of everything, chunks per second, and keyword top-50 p50/p95 with 1 client
(memfs.index.storage.postgres.keyword's query; for ``blocks`` its postings read unnests the arrays), with the
scores of ``blocks`` checked equal to ``rows``'s.  The load average is printed on every line.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import psycopg  # noqa: E402
from benchdata import DEV, build_corpus, pct, questions  # noqa: E402
from pg import scratch_database, throwaway_server  # noqa: E402

from memfs.index.storage.postgres import keyword, roles, schema, terms  # noqa: E402
from memfs.index.text.keywords import fts_body, match_expression, search_terms  # noqa: E402

_ROWS_POSTINGS = """postings AS MATERIALIZED (
    SELECT c.term, c.chunk_id, c.tf, c.length FROM memfs.chunk_terms c
    WHERE c.tenant_id = %(tenant)s::bigint AND c.private = %(private)s AND c.term = ANY (%(terms)s::text[])),"""
_BLOCK_POSTINGS = """postings AS MATERIALIZED (
    SELECT b.term, x.chunk_id, x.tf, x.length FROM memfs.chunk_blocks b
    CROSS JOIN LATERAL unnest(b.chunk_ids, b.tfs, b.lengths) AS x(chunk_id, tf, length)
    WHERE b.tenant_id = %(tenant)s::bigint AND b.private = %(private)s AND b.term = ANY (%(terms)s::text[])),"""
ROWS_SQL = keyword._SQL
BLOCKS_SQL = keyword._SQL.replace(_ROWS_POSTINGS, _BLOCK_POSTINGS)
assert BLOCKS_SQL != ROWS_SQL

ONCE_VISIBLE = ("tenant_id = ANY ((SELECT memfs.read_tenants())::bigint[]) "
                "AND (NOT private OR tenant_id = ANY ((SELECT memfs.private_tenants())::bigint[]))")
ONCE_WRITABLE = ("tenant_id = ANY ((SELECT memfs.write_tenants())::bigint[]) "
                 "AND (NOT private OR tenant_id = ANY ((SELECT memfs.private_tenants())::bigint[]))")


def load() -> float:
    return os.getloadavg()[0]


def add_blocks(conn: psycopg.Connection, tenant_id: int, block: int, chunks) -> None:
    """terms.add with the postings as one row per (private, term) of the block."""
    terms._lock(conn, tenant_id, (p for _, p, _ in chunks))
    ids, words, tfs, privs, lengths = [], [], [], [], []
    df: dict[tuple[bool, str], int] = {}
    totals: dict[bool, list[int]] = {}
    for chunk_id, private, found in chunks:
        total = totals.setdefault(private, [0, 0])
        total[0] += 1
        total[1] += found.length
        for term, tf in found.tf.items():
            ids.append(chunk_id)
            words.append(term)
            tfs.append(tf)
            privs.append(private)
            lengths.append(found.length)
            df[(private, term)] = df.get((private, term), 0) + 1
    conn.execute("INSERT INTO memfs.chunk_blocks(tenant_id, private, term, block, chunk_ids, tfs, lengths) "
                 "SELECT %s, p, t, %s, array_agg(i ORDER BY i), array_agg(f ORDER BY i), array_agg(l ORDER BY i) "
                 "FROM unnest(%s::bigint[], %s::text[], %s::integer[], %s::boolean[], %s::integer[]) AS x(i, t, f, p, l) "
                 "GROUP BY p, t", (tenant_id, block, ids, words, tfs, privs, lengths))
    keys = sorted(df)
    conn.execute("INSERT INTO memfs.term_df(tenant_id, private, term, df) "
                 "SELECT %s, * FROM unnest(%s::boolean[], %s::text[], %s::integer[]) "
                 "ON CONFLICT (tenant_id, private, term) DO UPDATE SET df = memfs.term_df.df + excluded.df",
                 (tenant_id, [k[0] for k in keys], [k[1] for k in keys], [df[k] for k in keys]))
    for private, (count, length) in totals.items():
        conn.execute("UPDATE memfs.corpus_stats SET chunks = chunks + %s, total_length = total_length + %s "
                     "WHERE tenant_id = %s AND private = %s", (count, length, tenant_id, private))


def write(dsn: str, tenant_id: int, files, layout: str) -> int:
    count = 0
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
        next_id = 1
        for path, chunks in files:
            found = terms.tokenize([fts_body(c.text) for c in chunks])
            ids = list(range(next_id, next_id + len(chunks)))
            next_id += len(chunks)
            with conn.transaction():
                conn.execute(
                    "INSERT INTO memfs.chunks(tenant_id, chunk_id, path, start_line, end_line, hash, text, length) "
                    "SELECT %s, i, %s, s, e, 'h', t, l FROM unnest(%s::bigint[], %s::int[], %s::int[], %s::text[], "
                    "%s::int[]) AS x(i, s, e, t, l)",
                    (tenant_id, path, ids, [c.start_line for c in chunks], [c.end_line for c in chunks],
                     [c.text for c in chunks], [t.length for t in found]))
                postings = [(i, i % 3 == 0, t) for i, t in zip(ids, found)]  # a third private, as MEMORY.md
                if layout == "blocks":
                    add_blocks(conn, tenant_id, ids[0], postings)
                else:
                    terms.add(conn, tenant_id, postings)
            count += len(chunks)
    return count


def prepare(admin_dsn: str, layout: str, tenants: int) -> list[roles.Login]:
    schema.init(admin_dsn)
    ws = uuid.uuid4()
    logins = [roles.grant_login(admin_dsn, ws, f"agent{i}") for i in range(tenants)]
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        if layout == "rows-no-chunk-index":
            admin.execute("DROP INDEX memfs.chunk_terms_chunk")
        if layout == "blocks":
            group = schema.names(admin).tenant_group
            admin.execute(f"""
                CREATE TABLE memfs.chunk_blocks(
                    tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
                    private boolean NOT NULL, term text NOT NULL, block bigint NOT NULL,
                    chunk_ids bigint[] NOT NULL, tfs integer[] NOT NULL, lengths integer[] NOT NULL,
                    PRIMARY KEY (tenant_id, private, term, block)) PARTITION BY LIST (tenant_id);
                CREATE INDEX chunk_blocks_block ON memfs.chunk_blocks(block);  -- removals, as chunk_terms_chunk
                GRANT SELECT, INSERT, UPDATE, DELETE ON memfs.chunk_blocks TO {group};
                ALTER TABLE memfs.chunk_blocks ENABLE ROW LEVEL SECURITY;
                ALTER TABLE memfs.chunk_blocks FORCE ROW LEVEL SECURITY;
                CREATE POLICY r ON memfs.chunk_blocks FOR SELECT TO {group} USING ({ONCE_VISIBLE});
                CREATE POLICY a ON memfs.chunk_blocks FOR INSERT TO {group} WITH CHECK ({ONCE_WRITABLE});
            """)
            for login in logins:
                admin.execute(f"CREATE TABLE memfs.chunk_blocks_t{login.tenant_id} PARTITION OF memfs.chunk_blocks "
                              f"FOR VALUES IN ({login.tenant_id})")
                admin.execute(f"ALTER TABLE memfs.chunk_blocks_t{login.tenant_id} FORCE ROW LEVEL SECURITY")
    return logins


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--tenants", type=int, default=10)
    parser.add_argument("--queries", type=int, default=60)
    args = parser.parse_args()
    corpus = build_corpus(args.chunks, args.tenants)
    qs = [m for m in (match_expression(search_terms(q)) for q in questions(DEV, args.queries)) if m]
    # Single-token phrases only: the blocks prototype has no phrase search.
    single = [m for m in qs if all(len(p) == 1 for p in keyword.phrases(m))]
    pick = random.Random(3)
    jobs = [(pick.randrange(args.tenants), m) for _ in range(2) for m in single]
    print(f"{args.chunks} chunks over {args.tenants} tenants, {len(jobs)} keyword queries (load {load():.1f})",
          flush=True)
    scores: dict[str, list] = {}
    with throwaway_server() as server:
        for layout in ("rows", "blocks", "rows-no-chunk-index"):
            with scratch_database(server.dsn, "memfs_postings") as dsn:
                logins = prepare(dsn, layout, args.tenants)
                t0 = time.perf_counter()
                with ThreadPoolExecutor(4) as pool:
                    written = sum(pool.map(lambda i: write(logins[i].dsn, logins[i].tenant_id, corpus[i], layout),
                                           range(args.tenants)))
                rate = written / (time.perf_counter() - t0)
                write_load = load()
                with psycopg.connect(dsn, autocommit=True) as admin:
                    admin.execute("VACUUM ANALYZE")
                    sizes = dict(admin.execute(
                        "SELECT regexp_replace(c.relname, '_t[0-9]+$', ''), sum(pg_total_relation_size(c.oid)) "
                        "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'memfs' "
                        "AND c.relkind = 'r' GROUP BY 1").fetchall())
                    rows = admin.execute(f"SELECT count(*) FROM memfs.{'chunk_blocks' if layout == 'blocks' else 'chunk_terms'}"
                                         ).fetchone()[0]
                postings = sizes.get("chunk_blocks" if layout == "blocks" else "chunk_terms", 0)
                keyword._SQL = BLOCKS_SQL if layout == "blocks" else ROWS_SQL
                conns = {i: psycopg.connect(logins[i].dsn, autocommit=True, prepare_threshold=None)
                         for i in range(args.tenants)}
                for tenant, match in jobs[:20]:  # warm
                    keyword.keyword_candidates(conns[tenant], logins[tenant].tenant_id, match, 50)
                times, got = [], []
                for tenant, match in jobs:
                    t0 = time.perf_counter()
                    got.append(keyword.keyword_candidates(conns[tenant], logins[tenant].tenant_id, match, 50))
                    times.append(time.perf_counter() - t0)
                for conn in conns.values():
                    conn.close()
                scores[layout] = got
                print(f"{layout:<20} {rate:6.0f} chunks/s with 4 writers (load {write_load:.1f}); postings "
                      f"{postings / written:6.0f} B/chunk in {rows / written:5.1f} rows/chunk, all tables "
                      f"{sum(sizes.values()) / written:6.0f} B/chunk; keyword top-50 p50 {pct(times, 50):.1f} ms "
                      f"p95 {pct(times, 95):.1f} ms (load {load():.1f})", flush=True)
    keyword._SQL = ROWS_SQL
    same = all(len(a) == len(b) and all(x[0] == y[0] and abs(x[1] - y[1]) <= 1e-9 * abs(x[1]) for x, y in zip(a, b))
               for a, b in zip(scores["rows"], scores["blocks"]))
    print(f"blocks' top-50 ids and scores equal rows' on every query: {same}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
