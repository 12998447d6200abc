"""A fleet of tenants on each backend, through memfs's own write and search paths: the body of
``scripts/bench_search.py --backend sqlite|postgres|both`` (see its docstring).

The chunks are scripts/bench_pg.py's (real LoCoMo turns in timed daily logs, chunked at 400 tokens,
spread evenly over ``--tenants``), with their units; vectors are normalised mixes of two real
embeddings plus noise, drawn per tenant from a seeded generator so both backends get the same
ones.  Each backend is written by 4 concurrent writers through the store's own ``replace_file``
(chunks, units and their packed vectors, the keyword index: FTS5 on SQLite, postings and
statistics on PostgreSQL, as each tenant's own login role), then searched by
:func:`memfs.index.search.hybrid.hybrid_search` (keyword side, KNN, unit scoring, snippets) with 1 and 4
concurrent clients, each query on a random one of 16 tenants, each client with its own store per
tenant (as one process per agent would be).  The query's embedding is made beforehand for both
(the same cost on either: its p50 is printed apart).
"""

from __future__ import annotations

import os
import queue
import random
import sys
import tempfile
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from memfs.config import load_config
from memfs.index.embedding.fingerprint import fingerprint, text_hash
from memfs.index.embedding.providers import provider_identity
from memfs.index.search.hybrid import SearchParams, hybrid_search
from memfs.index.storage.records import FileRecord
from memfs.index.storage.sqlite.store import Store
from memfs.index.text.keywords import fts_body
from memfs.index.text.units import plain
from memfs.memory import Memory

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # pg.py: the throwaway server

WRITERS = 4
SEARCHED = 16  # tenants the queries go to (each client keeps a store open for each)


def load() -> float:
    return os.getloadavg()[0]


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000


class Fleet:
    """The corpus and its vectors, the same for every backend."""

    def __init__(self, corpus: list, base: np.ndarray, dims: int, fp: dict[str, object]) -> None:
        self.corpus, self.base, self.dims, self.fp = corpus, base, dims, fp
        self.chunks = sum(len(c) for files in corpus for _, c in files)

    def files(self, tenant: int):
        """A tenant's files as replace_file's arguments, vectors drawn from the tenant's seed."""
        rng = np.random.default_rng(1000 + tenant)
        for day, (path, chunks) in enumerate(self.corpus[tenant]):
            hashes = [text_hash(plain(c.text)) for c in chunks]
            unit_hashes = [[text_hash(u.embedding_text) for u in c.units] for c in chunks]
            flat = hashes + [h for per in unit_hashes for h in per]
            i, j = rng.integers(0, len(self.base), len(flat)), rng.integers(0, len(self.base), len(flat))
            mix = self.base[i] + 0.5 * self.base[j] + 0.05 * rng.standard_normal((len(flat), self.dims))
            mix = (mix / np.linalg.norm(mix, axis=1, keepdims=True)).astype(np.float32)
            cached = dict(zip(flat, (v.tobytes() for v in mix)))
            record = FileRecord(path, "daily_log", f"{tenant}-{day}", 0.0, 0, 0, "")
            yield record, chunks, hashes, [fts_body(c.text) for c in chunks], cached, unit_hashes


def write_all(fleet: Fleet, open_store: Callable[[int], object]) -> float:
    """Every tenant written by WRITERS threads (a tenant at a time each); chunks per second."""
    todo: queue.Queue[int] = queue.Queue()
    for tenant in range(len(fleet.corpus)):
        todo.put(tenant)

    def writer() -> None:
        while True:
            try:
                tenant = todo.get_nowait()
            except queue.Empty:
                return
            store = open_store(tenant)
            try:
                store.set_fingerprint(fleet.fp, fleet.dims)
                for record, chunks, hashes, bodies, cached, unit_hashes in fleet.files(tenant):
                    pending = store.replace_file(record, chunks, hashes, bodies, cached, unit_hashes)
                    assert pending == 0, pending
            finally:
                store.close()

    began = time.perf_counter()
    threads = [threading.Thread(target=writer) for _ in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return fleet.chunks / (time.perf_counter() - began)


def search_all(fleet: Fleet, open_store: Callable[[int], object], jobs: list, params: SearchParams,
               clients: int) -> list[float]:
    """Each job ``(tenant, query, vector)`` searched through hybrid_search on ``clients`` threads."""
    local = threading.local()
    times: list[float] = []
    lock = threading.Lock()

    def store_of(tenant: int):
        stores = getattr(local, "stores", None)
        if stores is None:
            stores = local.stores = OrderedDict()
            with lock:
                opened.append(stores)
        if tenant not in stores:
            if len(stores) >= SEARCHED:
                stores.popitem(last=False)[1].close()
            stores[tenant] = open_store(tenant)
        stores.move_to_end(tenant)
        return stores[tenant]

    def one(job) -> None:
        tenant, query, vector = job
        store = store_of(tenant)
        t0 = time.perf_counter()
        with store.lock:
                hybrid_search(store, query, vector, params)
        elapsed = time.perf_counter() - t0
        with lock:
            times.append(elapsed)

    opened: list[OrderedDict] = []
    with ThreadPoolExecutor(clients) as pool:
        tenants = sorted({job[0] for job in jobs})
        list(pool.map(one, [(t, *job[1:]) for t in tenants for job in jobs[:clients * 2]]))  # open and warm
        times.clear()
        list(pool.map(one, jobs))
    for stores in opened:
        for store in stores.values():
            store.close()
    return times


def run(args, dev: Path, questions: Callable, real_chunks: Callable) -> int:
    """The fleet benchmark (``args``: bench_search's, with backend, chunks, tenants, queries)."""
    from benchdata import build_corpus  # the same data building as the primitives' benchmark

    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        workspace = Path(tmp) / "ws"
        workspace.mkdir()
        cfg = load_config(workspace=workspace, env={}, overrides=[("state_dir", str(Path(tmp) / "state"))])
        memory = Memory(cfg)
        provider = memory.provider
        base = provider.embed(real_chunks(dev)[:120])
        qs = questions(dev, args.queries)
        embed = []
        for q in qs[:20]:
            t0 = time.perf_counter()
            provider.embed([q])
            embed.append(time.perf_counter() - t0)
        qvecs = provider.embed(qs)
        memory.close()
        fp = fingerprint(cfg, provider_identity(cfg.embedding))
        fleet = Fleet(build_corpus(args.chunks, args.tenants), base, provider.dims, fp)
        units = sum(len(c.units) for files in fleet.corpus for _, cs in files for c in cs)
        params = SearchParams.from_config(cfg.search)
        pick = random.Random(3)
        jobs = [(pick.randrange(min(SEARCHED, args.tenants)), q, v) for _ in range(2) for q, v in zip(qs, qvecs)]
        print(f"{fleet.chunks} chunks ({units / fleet.chunks:.1f} units each) over {args.tenants} tenants, "
              f"{provider.dims}-dim vectors; {len(jobs)} searches per row on {min(SEARCHED, args.tenants)} tenants; query embedding "
              f"p50 {pct(embed, 50):.1f} ms (not in the search times); ready in {time.perf_counter() - started:.0f} s "
              f"(load {load():.1f})", flush=True)
        results: dict[str, dict[str, float]] = {}
        for backend in backends:
            if backend == "sqlite":
                results[backend] = _sqlite(fleet, Path(tmp) / "sqlite", jobs, params)
            else:
                results[backend] = _postgres(fleet, jobs, params)
        if len(results) == 2:
            a, b = results["postgres"], results["sqlite"]
            print("postgres / sqlite: " + ", ".join(f"{k} x{a[k] / b[k]:.2f}" for k in a), flush=True)
        if "postgres" in results:
            rate = results["postgres"]["chunks/s"]
            print(f"1M chunks on postgres would take {1_000_000 / rate / 60:.0f} min to write at this rate", flush=True)
    print(f"total {time.perf_counter() - started:.0f} s (load {load():.1f})")
    return 0


def _report(name: str, rate: float, write_load: float, per_chunk: float, searches: dict[int, list[float]],
            loads: dict[int, float], extra: str = "") -> dict[str, float]:
    print(f"{name}: {rate:.0f} chunks/s with {WRITERS} writers (load {write_load:.1f}); {per_chunk:.0f} B/chunk{extra}",
          flush=True)
    out = {"chunks/s": rate, "B/chunk": per_chunk}
    for clients, times in searches.items():
        print(f"{name}: hybrid search, {clients} client{'s' if clients > 1 else ''}: p50 {pct(times, 50):.1f} ms, "
              f"p95 {pct(times, 95):.1f} ms (load {loads[clients]:.1f})", flush=True)
        out[f"p50@{clients}"] = pct(times, 50)
        out[f"p95@{clients}"] = pct(times, 95)
    return out


def _sqlite(fleet: Fleet, root: Path, jobs: list, params: SearchParams) -> dict[str, float]:
    root.mkdir()

    def open_store(tenant: int) -> Store:
        folder = root / f"t{tenant}"
        folder.mkdir(exist_ok=True)
        return Store(folder / "index.db", folder / "cache.db")

    rate = write_all(fleet, open_store)
    write_load = load()
    for tenant in range(len(fleet.corpus)):  # what a closed index holds: its WAL folded in
        store = open_store(tenant)
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        store.close()
    size = sum(p.stat().st_size for p in root.rglob("*.db*"))
    searches, loads = {}, {}
    for clients in (1, 4):
        searches[clients] = search_all(fleet, open_store, jobs, params, clients)
        loads[clients] = load()
    return _report("sqlite", rate, write_load, size / fleet.chunks, searches, loads)


def _postgres(fleet: Fleet, jobs: list, params: SearchParams) -> dict[str, float]:
    import psycopg
    from pg import throwaway_server

    from memfs.index.storage.postgres import roles, schema
    from memfs.index.storage.postgres.store import PgStore

    with throwaway_server() as server:
        schema.init(server.dsn)
        ws = uuid.uuid4()
        logins = [roles.grant_login(server.dsn, ws, f"agent{i}") for i in range(len(fleet.corpus))]

        def open_store(tenant: int) -> PgStore:
            return PgStore(logins[tenant].dsn, ws, f"agent{tenant}")

        rate = write_all(fleet, open_store)
        write_load = load()
        with psycopg.connect(server.dsn, autocommit=True) as admin:
            admin.execute("VACUUM ANALYZE")  # what autovacuum would have done by the time of a search
            size = admin.execute("SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c JOIN pg_namespace n "
                                 "ON n.oid = c.relnamespace WHERE n.nspname = 'memfs' AND c.relkind = 'r'").fetchone()[0]
            parts = admin.execute(
                "SELECT regexp_replace(c.relname, '_t[0-9]+$', ''), sum(pg_total_relation_size(c.oid)) "
                "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'memfs' "
                "AND c.relkind = 'r' GROUP BY 1 ORDER BY 2 DESC LIMIT 4").fetchall()
            hnsw = admin.execute("SELECT count(*) FROM pg_class WHERE relnamespace = 'memfs'::regnamespace "
                                 "AND relname LIKE 'chunks\\_t%\\_hnsw\\_%'").fetchone()[0]
        searches, loads = {}, {}
        for clients in (1, 4):
            searches[clients] = search_all(fleet, open_store, jobs, params, clients)
            loads[clients] = load()
        extra = (f" ({', '.join(f'{n} {b / fleet.chunks:.0f}' for n, b in parts)}); {hnsw} tenants with an HNSW "
                 "index (the others' KNN is an exact scan)")
        return _report("postgres", rate, write_load, int(size) / fleet.chunks, searches, loads, extra)
