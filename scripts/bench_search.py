#!/usr/bin/env python3
"""Index throughput and search latency at 1k, 10k and 100k chunks, hybrid vs FTS5-only.

    python scripts/bench_search.py [--sizes 1000,10000,100000] [--queries 60]

What is measured, all in one run on this machine:
- model throughput: the local provider embedding real 400-token LoCoMo chunks (chunks/s);
- store throughput: chunks/s written (chunks, FTS5 rows, sqlite-vec rows) at each size;
- search latency p50/p95 of memfs's hybrid search (query embedding included) and of FTS5-only
  keyword search over the same index, on real LoCoMo questions;
- resident memory of this process after searching the largest index.

Embedding 100k chunks with the real model would take hours here (~10 chunks/s), so the large
indexes get texts built from real LoCoMo sentences and vectors built from real embeddings of real
chunks (normalised mixes of two real vectors plus noise): the distribution the KNN sees is that
of the model, the count is what is scaled.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from memfs.config import load_config
from memfs.index.chunking import Chunk, chunk_markdown
from memfs.index.embeddings import provider_identity
from memfs.index.indexer import fingerprint, text_hash
from memfs.index.search import SearchParams
from memfs.index.store import FileRecord, Store
from memfs.index.text import match_expression, search_terms, segment_cjk
from memfs.memory import Memory

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo-dev"


def real_chunks(dev: Path) -> list[str]:
    texts = []
    for path in sorted(dev.glob("conv-*/memory/*.md")):
        texts += [c.text for c in chunk_markdown(path.read_text(), 400, 80)]
    return texts


def questions(dev: Path, n: int) -> list[str]:
    qs = []
    for path in sorted(dev.glob("conv-*/qa.json")):
        qs += [q["question"] for q in json.loads(path.read_text()) if q.get("category") != 5]
    random.Random(7).shuffle(qs)
    return qs[:n]


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000


def rss_of_fresh_process(state_dir: str, agent: str, queries: list[str]) -> dict[str, float]:
    code = f"""
import json, sys
def rss():
    for line in open('/proc/self/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1]) / 1024
from pathlib import Path
from memfs.config import load_config
from memfs.memory import Memory
baseline = rss()
cfg = load_config(workspace=Path({state_dir!r}), agent={agent!r}, env={{}}, overrides=[("state_dir", {state_dir!r})])
memory = Memory(cfg)
for q in {queries!r}:
    memory.search(q)
print(json.dumps({{"baseline": baseline, "after_search": rss()}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=60)
    parser.add_argument("--model-chunks", type=int, default=120, help="real chunks embedded for throughput")
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]

    base_texts = real_chunks(args.dev)
    sentences = [s.strip() for t in base_texts for s in t.replace("\n", " ").split(". ") if len(s.strip()) > 20]
    qs = questions(args.dev, args.queries)

    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(workspace=Path(tmp), env={}, overrides=[("state_dir", tmp)])
        memory = Memory(cfg)
        provider = memory.provider
        sample = base_texts[: args.model_chunks]
        started = time.perf_counter()
        base_vectors = provider.embed(sample)
        model_rate = len(sample) / (time.perf_counter() - started)
        memory.close()
        print(f"model: {provider.model}, {model_rate:.1f} chunks/s embedding real 400-token chunks")

        rng = np.random.default_rng(1)
        pick = random.Random(1)
        print(f"{'chunks':>8} {'store ch/s':>11} {'hybrid p50':>11} {'p95':>7} {'fts p50':>8} {'p95':>7} {'ratio p50':>10}")
        rows = []
        for size in sizes:
            size_cfg = load_config(workspace=Path(tmp), agent=f"bench-{size}", env={},
                                   overrides=[("state_dir", tmp)])
            store = Store(size_cfg.index_path, size_cfg.cache_path)
            store.set_fingerprint(fingerprint(size_cfg, provider_identity(size_cfg.embedding)), provider.dims)
            texts = [" ".join(pick.sample(sentences, 12)) for _ in range(size)]
            i = rng.integers(0, len(base_vectors), size)
            j = rng.integers(0, len(base_vectors), size)
            mix = base_vectors[i] + 0.5 * base_vectors[j] + 0.05 * rng.standard_normal((size, provider.dims))
            vectors = (mix / np.linalg.norm(mix, axis=1, keepdims=True)).astype(np.float32)
            started = time.perf_counter()
            per_file = 100
            for f in range(0, size, per_file):
                batch = texts[f : f + per_file]
                chunks = [Chunk(k + 1, k + 1, t) for k, t in enumerate(batch)]
                hashes = [text_hash(t) for t in batch]
                cached = {h: vectors[f + k].tobytes() for k, h in enumerate(hashes)}
                record = FileRecord(f"memory/bench-{f // per_file:05d}.md", "daily_log", str(f), 0.0, 0, 0, "")
                store.replace_file(record, chunks, hashes, [segment_cjk(t) for t in batch], cached)
            store_rate = size / (time.perf_counter() - started)
            store.close()

            # memfs's own search path (Memory.search) against plain FTS5 BM25 on the same file.
            memory = Memory(size_cfg, provider=provider)
            store = memory.store
            params = SearchParams.from_config(cfg.search)
            hybrid, keyword = [], []
            for q in qs[:5]:  # warm caches (and load the in-memory matrix of a large index)
                memory.search(q)
            for q in qs:
                t0 = time.perf_counter()
                memory.search(q)
                hybrid.append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                match = match_expression(search_terms(q))
                if match:
                    ids = [cid for cid, _ in store.keyword_candidates(match, params.max_results)]
                    store.chunks_by_id(ids)
                keyword.append(time.perf_counter() - t0)
            row = (size, store_rate, pct(hybrid, 50), pct(hybrid, 95), pct(keyword, 50), pct(keyword, 95))
            rows.append(row)
            print(f"{size:>8} {store_rate:>11.0f} {row[2]:>10.1f}ms {row[3]:>6.1f}ms {row[4]:>7.1f}ms "
                  f"{row[5]:>6.1f}ms {row[2] / max(row[4], 1e-6):>9.1f}x")
            memory.close()
        rss = rss_of_fresh_process(tmp, f"bench-{sizes[-1]}", qs[:10])
        print(f"resident memory of a fresh process holding the {sizes[-1]}-chunk index (model loaded, "
              f"10 searches done): {rss['after_search']:.0f} MB (before opening it: {rss['baseline']:.0f} MB)")
        print(f"median hybrid p50 at {sizes[-1]} chunks: {statistics.median([rows[-1][2]]):.1f} ms "
              f"(target < 50 ms, query embedding included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
