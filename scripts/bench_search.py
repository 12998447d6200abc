#!/usr/bin/env python3
"""Index throughput, size and search latency at 1k, 10k and 100k chunks (1M with --sizes), hybrid
vs FTS5-only vs the physical limits, quiet or under load.

    python scripts/bench_search.py [--sizes 1000,10000,100000,1000000] [--queries 60] [--load 2]
    python scripts/bench_search.py --keep DIR ...; then --keep DIR --reuse ...  (search the same
        indexes again, e.g. with other code on PYTHONPATH: before/after in one sitting)
    python scripts/bench_search.py --backend sqlite|postgres|both [--chunks 100000] [--tenants 100]
        a fleet: each backend written by 4 writers through its store and searched through
        memfs.index.search.hybrid with 1 and 4 clients, the two compared in one run (scripts/bench_fleet.py)

What is measured, all in one run on this machine:
- model throughput: the local provider embedding real 400-token LoCoMo chunks (chunks/s), and
  the same chunks with their units (every message or section is embedded too since units were
  scored: what a file costs the background embedder now, in chunks/s);
- store throughput: chunks/s written (chunks, units, FTS5 rows, sqlite-vec rows) at each size,
  and the index's bytes per chunk (index file plus embedding cache);
- search latency p50/p95 of memfs's hybrid search (query embedding and the scoring of every unit
  of the candidate chunks included) and of FTS5-only keyword search over the same index, on real
  LoCoMo questions; their ratio is the figure to compare across runs and machines;
- the limits, measured in the same run on the same index: FTS5-only keyword search (above), a
  raw numpy matrix product over all of the index's chunk vectors with its top k (what any exact
  KNN must read), and the query's embedding alone (which the search waits for);
- the CPU time the searching process spends per hybrid search (the query's embedding is spent in
  the embedding service): on a busy machine, wall time is mostly waiting for a core;
- the load average (1 minute) as each row was done: the machine's other work, to compare rows
  measured at different times by;
- resident memory of a fresh process after searching each index, and the index's bytes per
  chunk by table (SQLite's dbstat);
- with ``--load N``, N busy loops (``python -c 'while 1: pass'``) run during every measurement,
  as on a machine whose cores are taken by other work.

Embedding 100k chunks with the real model would take hours here (~10 chunks/s), so the large
indexes get daily logs built from real LoCoMo turns (a timed heading per turn, as the dev set's
logs are written, so chunks hold units the way real ones do) and vectors built from real
embeddings of real chunks (normalised mixes of two real vectors plus noise): the distribution
the KNN and the unit scoring see is that of the model, the count is what is scaled.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from benchdata import DEV, pct, questions, real_chunks, real_turns, synthetic_log  # noqa: E402,F401

from memfs.config import load_config
from memfs.index.embedding.fingerprint import fingerprint, text_hash
from memfs.index.embedding.providers import provider_identity
from memfs.index.search.hybrid import SearchParams
from memfs.index.storage.records import FileRecord
from memfs.index.storage.sqlite.store import Store

try:  # an index of schema 8 (issue #45) keeps chunk vectors packed; earlier memfs had no such helpers
    from memfs.index.storage.vectors import as_float32, pack_unit_vector
except ImportError:  # pragma: no cover - run against an earlier memfs (before/after in one sitting)
    as_float32 = pack_unit_vector = None  # type: ignore[assignment]
from memfs.index.text.chunking import chunk_markdown
from memfs.index.text.keywords import fts_body, match_expression, search_terms
from memfs.index.text.units import plain
from memfs.memory import Memory
from memfs.state import locate


def rss_of_fresh_process(workspace: str, state_dir: str, agent: str, queries: list[str]) -> dict[str, float]:
    code = f"""
import json, sys
def rss(field='VmRSS:'):
    for line in open('/proc/self/status'):
        if line.startswith(field):
            return int(line.split()[1]) / 1024
from pathlib import Path
from memfs.config import load_config
from memfs.memory import Memory
from memfs.state import locate
baseline = rss()
cfg = load_config(workspace=Path({workspace!r}), agent={agent!r}, env={{}}, overrides=[("state_dir", {state_dir!r})])
memory = Memory(cfg)
for q in {queries!r}:
    memory.search(q)
print(json.dumps({{"baseline": baseline, "after_search": rss(), "anon": rss('RssAnon:')}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def table_bytes(index: Path, chunks: int) -> str:
    """The largest tables and indexes of an index file, in bytes per chunk."""
    import apsw
    conn = apsw.Connection(str(index), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name ORDER BY 2 DESC LIMIT 5").fetchall()
    finally:
        conn.close()
    return ", ".join(f"{name} {size / chunks:.0f}" for name, size in rows)


def chunk_matrix(store: Store) -> np.ndarray:
    """Every chunk vector as float32 (packed ones unpacked: schema 8; sqlite-vec's: schema 7)."""
    if getattr(store, "packed", False):
        blobs = [bytes(r[0]) for r in store.conn.execute("SELECT vector FROM chunk_vectors")]
        return np.stack([as_float32(b, store.dims) for b in blobs])
    rows = [np.frombuffer(r[0], dtype=np.float32) for r in store.conn.execute("SELECT embedding FROM chunks_vec")]
    return np.stack(rows)


def replicate(store: Store, base: int, size: int, vectors) -> None:
    """Grow an index of ``base`` chunks to ``size`` with copies of its files (new paths, the same
    text and units, fresh vectors near the originals' kind): writing 1M chunks through the store
    takes hours here, copying them in SQL minutes.  What a search reads per query (candidates,
    their units) is made the same way; the keyword index holds each word ``size / base`` times."""
    conn = store.conn
    conn.createscalarfunction("fts_body", fts_body, 1)
    top = int(conn.execute("SELECT max(id) FROM chunks").fetchone()[0])
    copy = 0
    while top * (copy + 1) < size:
        copy += 1
        offset, count = top * copy, min(top, size - top * copy)
        with store.transaction() as tx:
            tx.execute("INSERT INTO files(path, kind, hash, mtime, size, chunks, error, indexed_at) "
                       "SELECT replace(path, 'bench-', ?), kind, hash, mtime, size, chunks, error, indexed_at "
                       "FROM files WHERE path LIKE 'memory/bench-%' AND path NOT LIKE 'memory/bench-c%'", (f"bench-c{copy}-",))
            tx.execute("INSERT INTO chunks(id, path, start_line, end_line, hash, text, embedded, private, jsonl, first_day, "
                       "last_day, chat_id, chat_title) SELECT id + ?, replace(path, 'bench-', ?), start_line, end_line, hash, "
                       "text, embedded, private, jsonl, first_day, last_day, chat_id, chat_title FROM chunks WHERE id <= ?",
                       (offset, f"bench-c{copy}-", count))
            # Every column but the id, as the index's schema has them (spans of schema 7 included).
            columns = ", ".join(str(r[1]) for r in tx.execute("PRAGMA table_info(units)")
                                if r[1] not in ("id", "chunk_id"))
            tx.execute(f"INSERT INTO units(chunk_id, {columns}) SELECT chunk_id + ?, {columns} FROM units "
                       "WHERE chunk_id <= ? ORDER BY id", (offset, count))
            tx.execute("INSERT INTO chunks_fts(rowid, body) SELECT id + ?, fts_body(text) FROM chunks WHERE id <= ?",
                       (offset, count))
            for begin in range(1, count + 1, 10_000):
                end = min(count, begin + 9_999)
                fresh = vectors(end - begin + 1)
                if getattr(store, "packed", False):  # schema 8: int8 codes and scale in a plain table
                    tx.executemany("INSERT INTO chunk_vectors(id, private, vector) VALUES (?, 0, ?)",
                                   ((offset + begin + i, pack_unit_vector(fresh[i].tobytes()))
                                    for i in range(end - begin + 1)))
                else:
                    tx.executemany("INSERT INTO chunks_vec(rowid, private, embedding) VALUES (?, 0, ?)",
                                   ((offset + begin + i, fresh[i].tobytes()) for i in range(end - begin + 1)))


def build(size_cfg, paths, size: int, written_max: int, provider, base_vectors: np.ndarray,
          turns: list[tuple[str, str]], rng: np.random.Generator, pick: random.Random) -> tuple[float, float, float, str]:
    """Write the ``size``-chunk index: (build seconds, chunks/s, bytes per chunk, bytes by table)."""
    store = Store(paths.index, paths.cache)
    store.set_fingerprint(fingerprint(size_cfg, provider_identity(size_cfg.embedding)), provider.dims)
    # Written directly, so the index must say whose it is or Memory rebuilds it empty.
    store.set_meta("workspace", paths.identity.as_json())

    def mixed(count: int) -> np.ndarray:
        i = rng.integers(0, len(base_vectors), count)
        j = rng.integers(0, len(base_vectors), count)
        mix = base_vectors[i] + 0.5 * base_vectors[j] + 0.05 * rng.standard_normal((count, provider.dims))
        return (mix / np.linalg.norm(mix, axis=1, keepdims=True)).astype(np.float32)

    started = time.perf_counter()
    written, day = 0, 0
    while written < min(size, written_max):
        chunks = chunk_markdown(synthetic_log(turns, pick, 120), 400, 80)[: min(size, written_max) - written]
        hashes = [text_hash(plain(c.text)) for c in chunks]
        unit_hashes = [[text_hash(u.embedding_text) for u in c.units] for c in chunks]
        flat = [h for per in unit_hashes for h in per]
        cached = dict(zip(hashes + flat, (v.tobytes() for v in mixed(len(hashes) + len(flat)))))
        record = FileRecord(f"memory/bench-{day:05d}.md", "daily_log", str(day), 0.0, 0, 0, "")
        store.replace_file(record, chunks, hashes, [fts_body(c.text) for c in chunks], cached, unit_hashes)
        written += len(chunks)
        day += 1
    if written < size:
        replicate(store, written, size, mixed)
    build_seconds = time.perf_counter() - started
    store_rate = size / build_seconds
    store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    store.close()
    per_chunk_bytes = (paths.index.stat().st_size + paths.cache.stat().st_size) / size
    tables = table_bytes(paths.index, size)
    return build_seconds, store_rate, per_chunk_bytes, tables


def busy_loops(count: int) -> list[subprocess.Popen]:
    return [subprocess.Popen([sys.executable, "-c", "while 1: pass"]) for _ in range(count)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--model-chunks", type=int, default=120, help="real chunks embedded for throughput")
    parser.add_argument("--keep", type=Path, default=None, help="build in this (empty) folder and keep it, to profile")
    parser.add_argument("--reuse", action="store_true",
                        help="with --keep: search the indexes a --keep run left there instead of building them "
                             "(model and store throughput are not measured)")
    parser.add_argument("--load", type=int, default=0, help="busy loops running while searches are measured")
    parser.add_argument("--written", type=int, default=100_000,
                        help="chunks written through the store; beyond, copies of them are made in SQL (see replicate)")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default=None,
                        help="instead of the sizes above: a fleet of --tenants tenants holding --chunks chunks on "
                             "this backend (or both, compared in one run), see scripts/bench_fleet.py")
    parser.add_argument("--chunks", type=int, default=100_000, help="with --backend: chunks over all tenants")
    parser.add_argument("--tenants", type=int, default=100, help="with --backend: tenants")
    args = parser.parse_args()
    if args.backend:
        import bench_fleet

        return bench_fleet.run(args, args.dev, questions, real_chunks)
    sizes = [int(s) for s in args.sizes.split(",")]
    if args.reuse and not args.keep:
        parser.error("--reuse searches the indexes of a --keep folder: give --keep")

    base_texts = real_chunks(args.dev)
    turns = real_turns(args.dev)
    qs = questions(args.dev, args.queries)

    with (contextlib.nullcontext(str(args.keep)) if args.keep else tempfile.TemporaryDirectory()) as tmp:
        workspace, state = Path(tmp) / "ws", Path(tmp) / "state"
        workspace.mkdir(exist_ok=args.reuse)
        cfg = load_config(workspace=workspace, env={}, overrides=[("state_dir", str(state))])
        memory = Memory(cfg)
        provider = memory.provider
        sample = base_texts[: 0 if args.reuse else args.model_chunks]
        started = time.perf_counter()
        base_vectors = provider.embed(sample)
        model_rate = len(sample) / max(time.perf_counter() - started, 1e-9)
        sample_units = [u.embedding_text for path in sorted(args.dev.glob("conv-*/memory/*.md"))
                        for c in chunk_markdown(path.read_text(), 400, 80) for u in c.units]
        per_chunk = len(sample_units) / max(1, len(base_texts))
        unit_sample = sample_units[: int(len(sample) * per_chunk)]
        started = time.perf_counter()
        provider.embed(unit_sample)
        unit_seconds = time.perf_counter() - started
        memory.close()
        if not args.reuse:
            print(f"model: {provider.model}, {model_rate:.1f} chunks/s embedding real 400-token chunks; "
              f"with their units ({per_chunk:.1f} per chunk, cached by text) "
                  f"{len(sample) / (len(sample) / model_rate + unit_seconds):.1f} chunks/s")

        rng = np.random.default_rng(1)
        pick = random.Random(1)
        if args.load:
            print(f"rows marked * were measured with {args.load} busy loops running")
        if any(size > args.written for size in sizes):
            print(f"chunks beyond the first {args.written} are SQL copies of those (see replicate)")
        print(f"{'chunks':>8}  {'build s':>7} {'store ch/s':>11} {'B/chunk':>8} {'hybrid p50':>11} {'p95':>7} "
              f"{'fts p50':>8} {'p95':>7} {'ratio p50':>10} {'cpu p50':>8} {'matmul p50':>11} {'embed p50':>10} {'RSS MB':>7} {'anon MB':>8} {'load':>5}")
        rows, loaded = [], []
        for size in sizes:
            size_cfg = load_config(workspace=workspace, agent=f"bench-{size}", env={},
                                   overrides=[("state_dir", str(state))])
            paths = locate(size_cfg)
            if args.reuse:
                if not paths.index.exists():
                    raise SystemExit(f"--reuse: no {size}-chunk index in {args.keep} (build it with --keep first)")
                build_seconds = store_rate = float("nan")
                per_chunk_bytes = (paths.index.stat().st_size + paths.cache.stat().st_size) / size
                tables = table_bytes(paths.index, size)
            else:
                build_seconds, store_rate, per_chunk_bytes, tables = build(
                    size_cfg, paths, size, args.written, provider, base_vectors, turns, rng, pick)
            for load in sorted({0, args.load}):
                loops = busy_loops(load)


                # memfs's own search path (Memory.search) against plain FTS5 BM25 on the same file.
                memory = Memory(size_cfg, provider=provider)
                store = memory.store
                if store.chunk_total() != size or store.pending_count():
                    raise SystemExit(f"the {size}-chunk index was not served as written "
                                     f"({store.chunk_total()} chunks, {store.pending_count()} pending)")
                params = SearchParams.from_config(cfg.search)
                hybrid, keyword, cpu = [], [], []
                for q in qs[:5]:  # warm caches (and load the in-memory matrix of a large index)
                    memory.search(q)
                for q in qs:
                    t0, c0 = time.perf_counter(), time.process_time()
                    memory.search(q)
                    hybrid.append(time.perf_counter() - t0)
                    cpu.append(time.process_time() - c0)
                    t0 = time.perf_counter()
                    match = match_expression(search_terms(q))
                    if match:
                        ids = [cid for cid, _ in store.keyword_candidates(match, params.max_results)]
                        store.chunks_by_id(ids)
                    keyword.append(time.perf_counter() - t0)
                # The limits: every chunk vector read once (exact KNN's floor), the query's embedding.
                matrix = chunk_matrix(store)
                matmul, embed = [], []
                for q in qs:
                    vector = provider.embed([q])[0]
                    t0 = time.perf_counter()
                    scores = matrix @ vector
                    np.argpartition(-scores, 50)[:50]
                    matmul.append(time.perf_counter() - t0)
                    t0 = time.perf_counter()
                    provider.embed([q[:2000]])
                    embed.append(time.perf_counter() - t0)
                del matrix
                memory.close()
                rss = rss_of_fresh_process(str(workspace), str(state), f"bench-{size}", qs[:10])
                for loop in loops:
                    loop.kill()
                    loop.wait()
                row = (size, store_rate, pct(hybrid, 50), pct(hybrid, 95), pct(keyword, 50), pct(keyword, 95))
                (rows if load == 0 else loaded).append(row)
                print(f"{size:>8}{'*' if load else ' '}{build_seconds:>7.0f} {store_rate:>11.0f} {per_chunk_bytes:>8.0f} {row[2]:>10.1f}ms "
                      f"{row[3]:>6.1f}ms {row[4]:>7.1f}ms {row[5]:>6.1f}ms {row[2] / max(row[4], 1e-6):>9.1f}x "
                      f"{pct(cpu, 50):>6.1f}ms {pct(matmul, 50):>9.1f}ms {pct(embed, 50):>8.1f}ms {rss['after_search']:>7.0f} "
                      f"{rss['anon']:>8.0f} {os.getloadavg()[0]:>5.1f}")
            print(f"{'':>8} bytes per chunk by table: {tables}")
        for before, after in [*itertools.pairwise(rows), *itertools.pairwise(loaded)]:
            print(f"{before[0]} -> {after[0]} chunks (x{after[0] / before[0]:g}): hybrid p50 x{after[2] / before[2]:.2f}, "
                  f"fts p50 x{after[4] / before[4]:.2f}")
        print(f"hybrid p50 at {sizes[-1]} chunks: {rows[-1][2]:.1f} ms (target < 50 ms at 100k, query embedding "
              f"included); RSS: a fresh search process after 10 searches (the model runs in the embedding service); anon: the "
              "part of it that is the process's own memory (the rest is the index file's pages, mapped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
