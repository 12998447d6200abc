#!/usr/bin/env python3
"""The PostgreSQL search primitives against FTS5 / sqlite-vec on the same data, in one run.

    python scripts/bench_pg.py [--chunks 100000] [--tenants 100] [--queries 60]

Chunks are built as scripts/bench_search.py builds them (real LoCoMo turns in timed daily logs,
chunked at 400 tokens; vectors: normalised mixes of two real embeddings of real chunks plus
noise), spread evenly over ``--tenants`` tenants.  PostgreSQL 18 + pgvector 0.8 is a throwaway
server (tests/pg.py), or MEMFS_PG_DSN's.  Measured, as each tenant's own login role (RLS on):

- insert throughput with 4 concurrent writers (chunk rows with vectors, postings, df, stats);
- bytes per chunk (pg_total_relation_size of every memfs table, after the HNSW indexes);
- keyword top-50 (memfs.index.storage.postgres.keyword), KNN top-50 (memfs.index.storage.postgres.knn: exact scan and
  HNSW with iterative scan), and both one after the other ("hybrid primitives"), p50/p95 with 1
  and 4 concurrent clients, each query on a random tenant;
- the same on SQLite: one Store per tenant (memfs's layout), keyword_candidates (FTS5 bm25)
  and vector_candidates (sqlite-vec / the in-memory matrix), same queries, same threads.

Query embedding is not included on either side (the same cost for both).
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import psycopg  # noqa: E402
from benchdata import DEV, build_corpus, pct, questions, real_chunks, real_turns, synthetic_log  # noqa: E402,F401
from pg import throwaway_server  # noqa: E402

from memfs.config import load_config  # noqa: E402
from memfs.index.embedding.fingerprint import text_hash  # noqa: E402
from memfs.index.storage.postgres import keyword, knn, roles, schema, terms  # noqa: E402
from memfs.index.storage.records import FileRecord  # noqa: E402
from memfs.index.storage.sqlite.store import Store  # noqa: E402
from memfs.index.text.keywords import fts_body, match_expression, search_terms  # noqa: E402
from memfs.index.text.units import plain  # noqa: E402
from memfs.memory import Memory  # noqa: E402

POOL = 50


def literal(vector: np.ndarray) -> str:
    return "[" + ",".join(f"{x:.7g}" for x in vector) + "]"


def write_pg(dsn: str, tenant_id: int, files, vectors: dict[int, np.ndarray]) -> int:
    count = 0
    with psycopg.connect(dsn, autocommit=True, prepare_threshold=None) as conn:
        next_id = 1
        for path, chunks in files:
            found = terms.tokenize([fts_body(c.text) for c in chunks])
            ids = list(range(next_id, next_id + len(chunks)))
            next_id += len(chunks)
            with conn.transaction():
                conn.execute(
                    "INSERT INTO memfs.chunks(tenant_id, chunk_id, path, start_line, end_line, hash, text, embedded, "
                    "length, embedding) SELECT %s, i, %s, s, e, h, t, true, l, v::vector FROM unnest(%s::bigint[], "
                    "%s::int[], %s::int[], %s::text[], %s::text[], %s::int[], %s::text[]) AS x(i, s, e, h, t, l, v)",
                    (tenant_id, path, ids, [c.start_line for c in chunks], [c.end_line for c in chunks],
                     [text_hash(plain(c.text)) for c in chunks], [c.text for c in chunks],
                     [t.length for t in found], [literal(vectors[i]) for i in ids]))
                terms.add(conn, tenant_id, [(i, False, t) for i, t in zip(ids, found)])
            count += len(chunks)
    return count


def write_sqlite(root: Path, index: int, files, vectors: dict[int, np.ndarray], dims: int) -> Store:
    folder = root / f"t{index}"
    folder.mkdir()
    store = Store(folder / "index.db", folder / "cache.db")
    store.set_fingerprint({"bench": True}, dims)
    next_id = 1
    for path, chunks in files:
        hashes = [f"{index}-{next_id + i}" for i in range(len(chunks))]
        cached = {h: vectors[next_id + i].tobytes() for i, h in enumerate(hashes)}
        store.replace_file(FileRecord(path, "daily_log", path, 0.0, 0, 0, ""), chunks, hashes,
                           [fts_body(c.text) for c in chunks], cached)
        next_id += len(chunks)
    return store


def timed(clients: int, jobs: list, run) -> list[float]:
    """Run every job on ``clients`` threads; each job's wall time."""
    local = threading.local()
    times: list[float] = []
    lock = threading.Lock()

    def one(job) -> None:
        t0 = time.perf_counter()
        run(local, job)
        elapsed = time.perf_counter() - t0
        with lock:
            times.append(elapsed)

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(one, jobs))
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--tenants", type=int, default=100)
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--sample", type=int, default=120, help="real chunks embedded for the vector mixes")
    args = parser.parse_args()

    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        cfg = load_config(workspace=workspace, env={}, overrides=[("state_dir", str(Path(tmp) / "state"))])
        memory = Memory(cfg)
        provider = memory.provider
        base = provider.embed(real_chunks(DEV)[: args.sample])
        qs = questions(DEV, args.queries)
        qvecs = provider.embed(qs)
        memory.close()
        dims = provider.dims
        rng = np.random.default_rng(1)
        corpus = build_corpus(args.chunks, args.tenants)
        vectors = []
        for files in corpus:
            n = sum(len(c) for _, c in files)
            i, j = rng.integers(0, len(base), n), rng.integers(0, len(base), n)
            mix = base[i] + 0.5 * base[j] + 0.05 * rng.standard_normal((n, dims))
            mix = (mix / np.linalg.norm(mix, axis=1, keepdims=True)).astype(np.float32)
            vectors.append({k + 1: mix[k] for k in range(n)})
        print(f"{args.chunks} chunks over {args.tenants} tenants, {dims}-dim vectors; corpus ready in "
              f"{time.perf_counter() - started:.0f} s", flush=True)

        with throwaway_server() as server:
            with psycopg.connect(server.dsn, autocommit=True) as admin:
                admin.execute("ALTER SYSTEM SET shared_buffers = '1GB'")
                admin.execute("ALTER SYSTEM SET maintenance_work_mem = '512MB'")
            # shared_buffers needs a restart: the throwaway server keeps its defaults otherwise.
            schema.init(server.dsn)
            ws = uuid.uuid4()
            logins = [roles.grant_login(server.dsn, ws, f"agent{i}") for i in range(args.tenants)]

            t0 = time.perf_counter()
            with ThreadPoolExecutor(4) as pool:
                written = sum(pool.map(lambda i: write_pg(logins[i].dsn, logins[i].tenant_id, corpus[i], vectors[i]),
                                       range(args.tenants)))
            pg_rate = written / (time.perf_counter() - t0)
            t0 = time.perf_counter()
            with psycopg.connect(server.dsn, autocommit=True) as admin:
                for login in logins:
                    knn.create_index(admin, login.tenant_id, dims)
                hnsw_seconds = time.perf_counter() - t0
                admin.execute("VACUUM ANALYZE")
                size = admin.execute("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n "
                                     "ON n.oid = c.relnamespace WHERE n.nspname = 'memfs' AND c.relkind = 'r'"
                                     ).fetchone()[0]
                parts = admin.execute(
                    "SELECT regexp_replace(c.relname, '_t[0-9]+$', ''), sum(pg_total_relation_size(c.oid)) "
                    "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'memfs' "
                    "AND c.relkind = 'r' GROUP BY 1 ORDER BY 2 DESC LIMIT 4").fetchall()
            print(f"postgres: {pg_rate:.0f} chunks/s with 4 writers; HNSW build {hnsw_seconds:.0f} s; "
                  f"{size / written:.0f} B/chunk ({', '.join(f'{n} {b / written:.0f}' for n, b in parts)})",
                  flush=True)

            t0 = time.perf_counter()
            root = Path(tmp) / "sqlite"
            root.mkdir()
            stores = [write_sqlite(root, i, corpus[i], vectors[i], dims) for i in range(args.tenants)]
            lite_rate = written / (time.perf_counter() - t0)
            lite_bytes = sum(p.stat().st_size for p in root.rglob("*.db"))
            print(f"sqlite: {lite_rate:.0f} chunks/s with 1 writer; {lite_bytes / written:.0f} B/chunk", flush=True)

            pick = random.Random(3)
            # Queries go to 16 of the tenants (all the same size), so each client keeps one open
            # connection per tenant and no connection setup is timed.
            searched = min(16, args.tenants)
            jobs = [(pick.randrange(searched), q, v) for _ in range(3) for q, v in zip(qs, qvecs)]
            matches = {q: match_expression(search_terms(q)) for q in qs}

            def conn_of(local, tenant: int):
                """A client's connection as this tenant's role; a client keeps its 16 latest
                (4 clients x 100 tenants would pass the server's 100 connections)."""
                conns = getattr(local, "conns", None)
                if conns is None:
                    conns = local.conns = OrderedDict()
                if tenant not in conns:
                    if len(conns) >= 16:
                        conns.popitem(last=False)[1].close()
                    conns[tenant] = psycopg.connect(logins[tenant].dsn, autocommit=True, prepare_threshold=None)
                conns.move_to_end(tenant)
                return conns[tenant]

            def pg_kw(local, job) -> None:
                tenant, q, _ = job
                if matches[q]:
                    keyword.keyword_candidates(conn_of(local, tenant), logins[tenant].tenant_id, matches[q], POOL)

            def pg_knn(exact):
                def run(local, job) -> None:
                    tenant, _, v = job
                    knn.vector_candidates(conn_of(local, tenant), logins[tenant].tenant_id, v, POOL, exact=exact)
                return run

            def pg_both(local, job) -> None:
                pg_kw(local, job)
                pg_knn(None)(local, job)

            def lite_kw(local, job) -> None:
                tenant, q, _ = job
                if matches[q]:
                    stores[tenant].keyword_candidates(matches[q], POOL)

            def lite_knn(local, job) -> None:
                tenant, _, v = job
                stores[tenant].vector_candidates(v, POOL)

            def lite_both(local, job) -> None:
                lite_kw(local, job)
                lite_knn(local, job)

            for warm in (pg_kw, pg_knn(False), pg_knn(True), lite_knn):  # connections, matrices, caches
                timed(4, [(t, qs[0], qvecs[0]) for t in range(searched) for _ in range(4)], warm)
            print(f"{'':<28}{'1 client p50':>13}{'p95':>8}{'4 clients p50':>15}{'p95':>8}   (ms)")
            for name, run in (("postgres keyword top-50", pg_kw), ("postgres KNN exact", pg_knn(True)),
                              ("postgres KNN HNSW", pg_knn(False)), ("postgres KNN (auto)", pg_knn(None)),
                              ("postgres keyword + KNN", pg_both), ("sqlite FTS5 top-50", lite_kw),
                              ("sqlite KNN", lite_knn), ("sqlite FTS5 + KNN", lite_both)):
                one = timed(1, jobs, run)
                four = timed(4, jobs, run)
                print(f"{name:<28}{pct(one, 50):>13.1f}{pct(one, 95):>8.1f}{pct(four, 50):>15.1f}{pct(four, 95):>8.1f}",
                      flush=True)
            for store in stores:
                store.close()
    print(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
