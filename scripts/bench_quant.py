#!/usr/bin/env python3
"""What storing vectors smaller would do to search (issue #45): every recall column of the LoCoMo
dev set per quantisation scheme against today's float32, the nearest-neighbour overlap of each
scheme on every real vector at hand, and the KNN's speed at 100k chunks.

    python scripts/bench_quant.py --cache STATE [--scheme NAME ...] [--source md|jsonl|both]
                                  [--knn-only | --no-knn] [--rows 100000]

``STATE``: a state folder whose embedding caches (``conv-NN.embcache.sqlite``) already hold the
dev set's vectors (scripts/bench_disk.py --corpus dev --state DIR leaves them in DIR/state-dev),
so no passage is embedded again; the caches are copied to a scratch folder for each run.

1. Recall.  scripts/eval_locomo.py's own pipeline (its workspaces, its metrics) runs once per
   scheme, in this process, with the vectors search reads replaced by what the scheme would
   store, decoded back to float32: each index's chunk vectors rewritten in place after its
   rebuild (sqlite-vec's table), unit vectors decoded on their way to the scorer (a wrapper
   around memfs.index.search.hybrid.unpack_unit_vectors), and the query vector where the scheme
   changes it too (truncation; sqlite-vec's int8 type, whose KNN takes an int8 query).  memfs
   itself is not changed.  A scheme with a ``bit`` KNN finds the chunks' nearest neighbours by
   Hamming distance over sign bits and re-scores the best ``oversample x k`` with the stored
   vectors.  Note: the dev set's indexes hold 56-102 chunks per source and search takes the 50
   nearest, so the dev set tests the cosines a scheme gives, hardly its candidate generation;
   part 2 does.  The indexes are made as schema 7 made them (chunk vectors float32 in sqlite-vec),
   whose float32 vectors every scheme starts from; memfs now keeps them packed (schema 8), the
   scheme this study chose.
2. KNN overlap on every vector of the caches (chunks, units, readings: ~10k on the dev set),
   queried with the dev set's questions: the share of float32's 50 nearest (and 10 nearest)
   each scheme's 50 nearest holds.
3. Speed at --rows chunks (the dev vectors, jittered and renormalised, repeated up to that many):
   :class:`memfs.index.storage.vectors.VectorMatrix` of schema 7 (float32 rows + int8 codes), int8 codes
   alone, and bit codes with an int8 re-score; memory each needs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import apsw
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_locomo  # noqa: E402
from benchdata import median_ms

import memfs.index.search.hybrid as search_module  # noqa: E402
from memfs.index.storage.sqlite import layout as layout_module  # noqa: E402
from memfs.index.storage.sqlite import store as store_module  # noqa: E402
from memfs.index.storage.vectors import (  # noqa: E402
    VectorMatrix,
    one_blas_thread,
    pack_unit_vector,
    unpack_unit_vectors,
)
from memfs.memory import Memory  # noqa: E402

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo-dev"
Rows = Callable[[np.ndarray], np.ndarray]  # float32 (n, d) -> what the scheme keeps, as float32 (n, d)


# -- codecs: each keeps what a stored form keeps, decoded to float32 --------------------------------

def f16(x: np.ndarray) -> np.ndarray:
    return x.astype(np.float16).astype(np.float32)


def int8_per_vector(x: np.ndarray) -> np.ndarray:
    """As units.vector stores a unit today (memfs.index.vectors.pack_unit_vector)."""
    return unpack_unit_vectors([pack_unit_vector(row.astype(np.float32).tobytes()) for row in x], x.shape[1])


def int4_per_vector(x: np.ndarray) -> np.ndarray:
    peak = np.abs(x).max(axis=1, keepdims=True)
    peak[peak == 0] = 1
    q = np.clip(np.rint(x * (7.0 / peak)), -7, 7)
    return _unit(q)


_SQLITE_VEC: list[apsw.Connection] = []


def sqlite_vec_int8(x: np.ndarray) -> np.ndarray:
    """sqlite-vec 0.1.9's ``vec_quantize_int8(v, 'unit')``: one fixed scale for every vector
    (values in [-1, 1] onto [-128, 127]), the form of its ``int8[N]`` columns; made unit length,
    as its cosine distance compares them."""
    if not _SQLITE_VEC:
        conn = apsw.Connection(":memory:")
        conn.enable_load_extension(True)
        conn.load_extension(layout_module._vec0_path())
        _SQLITE_VEC.append(conn)
    conn = _SQLITE_VEC[0]
    out = np.empty_like(x, dtype=np.float32)
    for i, row in enumerate(x):
        blob = conn.execute("SELECT vec_quantize_int8(?, 'unit')", (row.astype(np.float32).tobytes(),)).fetchone()[0]
        out[i] = np.frombuffer(blob, dtype=np.int8)
    return _unit(out)


def bits(x: np.ndarray) -> np.ndarray:
    return _unit(np.where(x > 0, 1.0, -1.0))


def truncated(dims: int) -> Rows:
    """Matryoshka-style: the first ``dims`` components, renormalised (zeros after, so a dot
    product with a vector of 384 is that of the truncated ones)."""
    def cut(x: np.ndarray) -> np.ndarray:
        out = np.zeros_like(x, dtype=np.float32)
        out[:, :dims] = x[:, :dims]
        return _unit(out)
    cut.__name__ = f"first {dims}"
    return cut


def _unit(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    norms[norms == 0] = 1
    return (x / norms).astype(np.float32)


def same(x: np.ndarray) -> np.ndarray:
    return x


@dataclass(frozen=True)
class Scheme:
    """What the index would keep: chunk vectors, unit vectors (decoded from today's int8), the
    query as compared; ``oversample``: chunks found by a sign-bit KNN of oversample x k, then
    re-scored with the chunk vectors (0: exact KNN on the chunk vectors)."""

    chunks: Rows = same
    units: Rows = same
    query: Rows = same
    oversample: int = 0
    bytes_per_chunk: int = 1536  # the stored chunk vector (384 dims)
    bytes_per_unit: int = 388
    note: str = ""


SCHEMES: dict[str, Scheme] = {
    "float32 (today)": Scheme(note="chunks float32 in sqlite-vec; units int8 + scale"),
    "chunks f16": Scheme(chunks=f16, bytes_per_chunk=768),
    "chunks int8/vector": Scheme(chunks=int8_per_vector, bytes_per_chunk=388, note="as units are kept today"),
    "chunks+query int8/vector": Scheme(chunks=int8_per_vector, query=int8_per_vector, bytes_per_chunk=388,
                                       note="per-vector codes in sqlite-vec's int8[N] column: its KNN needs an int8 query"),
    "chunks int8 sqlite-vec": Scheme(chunks=sqlite_vec_int8, query=sqlite_vec_int8, bytes_per_chunk=384,
                                     note="one global scale; the query quantised too"),
    "chunks bit x1 + int8": Scheme(chunks=int8_per_vector, oversample=1, bytes_per_chunk=48 + 388,
                                   note="Hamming KNN of k, re-scored int8"),
    "chunks bit x4 + int8": Scheme(chunks=int8_per_vector, oversample=4, bytes_per_chunk=48 + 388),
    "chunks bit x10 + int8": Scheme(chunks=int8_per_vector, oversample=10, bytes_per_chunk=48 + 388),
    "chunks bit only": Scheme(chunks=bits, bytes_per_chunk=48, note="cosines from sign bits"),
    "chunks int8, units int4": Scheme(chunks=int8_per_vector, units=int4_per_vector, bytes_per_chunk=388,
                                      bytes_per_unit=196),
    "units bit": Scheme(units=bits, bytes_per_unit=48),
    "first 256 dims": Scheme(chunks=truncated(256), units=truncated(256), query=truncated(256), bytes_per_chunk=1024,
                             bytes_per_unit=260, note="MiniLM-L6-v2 is not Matryoshka-trained"),
    "first 192 dims": Scheme(chunks=truncated(192), units=truncated(192), query=truncated(192), bytes_per_chunk=768,
                             bytes_per_unit=196),
}


# -- applying a scheme to eval_locomo's pipeline ---------------------------------------------------

@dataclass
class Applied:
    scheme: Scheme
    sign_bits: dict[int, dict[int, np.ndarray]] = field(default_factory=dict)  # id(store) -> chunk -> bits


def rewrite_chunk_vectors(store: store_module.Store, applied: Applied) -> None:
    """The index's chunk vectors replaced by what the scheme keeps (decoded); their sign bits
    (of the float32 vector) kept aside for a bit KNN."""
    with store.lock:
        rows = store.conn.execute("SELECT rowid, private, embedding FROM chunks_vec").fetchall()
        if not rows:
            return
        x = np.stack([np.frombuffer(r[2], dtype=np.float32) for r in rows])
        applied.sign_bits[id(store)] = {int(r[0]): np.packbits(x[i] > 0) for i, r in enumerate(rows)}
        kept = applied.scheme.chunks(x)
        with store.transaction(vectors_only=True) as conn:
            for (rowid, private, _), vector in zip(rows, kept):
                conn.execute("DELETE FROM chunks_vec WHERE rowid = ?", (rowid,))
                conn.execute("INSERT INTO chunks_vec(rowid, private, embedding) VALUES (?, ?, ?)",
                             (rowid, private, np.ascontiguousarray(vector, dtype=np.float32).tobytes()))
        store._matrix = None


@contextlib.contextmanager
def patched(applied: Applied) -> Iterator[None]:
    """eval_locomo's pipeline with the scheme's vectors (restored afterwards)."""
    scheme = applied.scheme
    saved = (eval_locomo.open_memory, search_module.unpack_unit_vectors, Memory._embed_query,
             store_module.Store.vector_candidates, store_module.Store.__init__)
    open_memory, unpack, embed_query, candidates, init = saved

    def as_schema_7(self, path, cache_path, migrate=True):
        if not path.exists() or path.stat().st_size == 0:  # a new index begun as schema 7 made one
            conn = apsw.Connection(str(path))
            conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); "
                         "INSERT INTO meta VALUES ('schema', '7')")
            conn.close()
        init(self, path, cache_path, migrate)

    def opened(ws, agent, cache, overrides, login=None):
        memory = open_memory(ws, agent, cache, overrides, login)
        if memory.store.has_vectors:
            rewrite_chunk_vectors(memory.store, applied)
        return memory

    def units(blobs, dims):
        out = unpack(blobs, dims)
        ok = ~np.isnan(out[:, 0]) if len(out) else np.zeros(0, dtype=bool)
        if ok.any():
            out[ok] = scheme.units(out[ok])
        return out

    def query(self, text):
        vector = embed_query(self, text)
        return None if vector is None else scheme.query(np.asarray(vector, dtype=np.float32)[None, :])[0]

    def nearest(self, q, k, include_private=True, where="", params=()):
        if where or not self.has_vectors or id(self) not in applied.sign_bits:
            return candidates(self, q, k, include_private, where, params)
        with self.lock:
            rows = self.conn.execute("SELECT rowid, private, embedding FROM chunks_vec").fetchall()
        signs = applied.sign_bits[id(self)]
        rows = [r for r in rows if include_private or not r[1]]
        ids = np.array([int(r[0]) for r in rows])
        codes = np.stack([signs[int(r[0])] for r in rows])
        qbits = np.packbits(np.asarray(q) > 0)
        hamming = np.unpackbits(codes ^ qbits, axis=1).sum(axis=1)
        take = np.argsort(hamming, kind="stable")[: scheme.oversample * k]
        vectors = np.stack([np.frombuffer(rows[i][2], dtype=np.float32) for i in take])
        sims = vectors @ np.asarray(q, dtype=np.float32)
        order = np.lexsort((ids[take], -sims))[:k]
        return [(int(ids[take][i]), float(sims[i])) for i in order]

    eval_locomo.open_memory = opened
    store_module.Store.__init__ = as_schema_7
    search_module.unpack_unit_vectors = units
    Memory._embed_query = query
    if scheme.oversample:
        store_module.Store.vector_candidates = nearest
    try:
        yield
    finally:
        (eval_locomo.open_memory, search_module.unpack_unit_vectors, Memory._embed_query,
         store_module.Store.vector_candidates, store_module.Store.__init__) = saved


def recall(dev: Path, caches: Path, names: list[str], sources: list[str]) -> dict[str, dict[str, dict]]:
    out: dict[str, dict[str, dict]] = {}
    for name in names:
        applied = Applied(SCHEMES[name])
        for source in sources:
            with tempfile.TemporaryDirectory() as scratch:
                for cache in caches.glob("*.embcache.sqlite"):
                    shutil.copy(cache, Path(scratch) / cache.name)
                with patched(applied):
                    began = time.perf_counter()
                    summary = eval_locomo.run(dev, source, [], Path(scratch), [])
                    summary["seconds"] = round(time.perf_counter() - began, 1)
            out.setdefault(name, {})[source] = summary
            print(f"  {name} / {source}: {json.dumps(summary['memfs'])} p50 {summary['search_ms_p50']} ms", flush=True)
    return out


COLUMNS = ["R@1", "R@3", "R@5", "R@6", "R@10", "MRR@10", "Rall@6", "R@2400tok", "visible@6", "answered@own", "fp_rate"]


def print_recall(results: dict[str, dict[str, dict]]) -> None:
    base_name = "float32 (today)"
    for source in next(iter(results.values())):
        base = results.get(base_name, {}).get(source, {}).get("memfs", {})
        print(f"\nLoCoMo dev, {source} ({next(iter(results.values()))[source]['questions']} questions): "
              f"value (difference from float32); worst drop; search p50 ms")
        print(f"{'scheme':<26} " + " ".join(f"{c:>14}" for c in COLUMNS) + f" {'worst':>7} {'p50':>6}")
        for name, by_source in results.items():
            m = by_source[source]["memfs"]
            drops = [m[c] - base[c] for c in COLUMNS if c in base and c != "fp_rate"]
            if "fp_rate" in base:
                drops.append(base["fp_rate"] - m["fp_rate"])  # a higher false-positive rate is worse
            cells = [f"{m[c]:.3f}({m[c] - base.get(c, m[c]):+.3f})" for c in COLUMNS]
            print(f"{name:<26} " + " ".join(f"{c:>14}" for c in cells) + f" {min(drops or [0]):>+7.3f} "
                  f"{by_source[source]['search_ms_p50']:>6}")


# -- part 2: KNN overlap on every cached vector ---------------------------------------------------

def cached_vectors(caches: list[Path]) -> np.ndarray:
    rows = []
    for cache in caches:
        conn = apsw.Connection(str(cache), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            rows += [np.frombuffer(r[0], dtype=np.float32) for r in
                     conn.execute("SELECT vector FROM embedding_cache WHERE dims = 384")]
        finally:
            conn.close()
    return np.stack(rows)


def dev_questions(dev: Path) -> list[str]:
    out = []
    for conv in sorted(dev.glob("conv-*")):
        out += [q["question"] for q in json.loads((conv / "qa.json").read_text()) if q.get("category") != 5]
    return out


def embed_questions(questions: list[str]) -> np.ndarray:
    from memfs.index.embedding.providers import LocalProvider

    model = LocalProvider()
    out = []
    for begin in range(0, len(questions), 32):
        out += list(model.embed(questions[begin : begin + 32]))
    return np.asarray(out, dtype=np.float32)


def knn_overlap(x: np.ndarray, queries: np.ndarray, names: list[str], k: int = 50) -> dict[str, dict[str, float]]:
    exact = queries @ x.T
    truth = np.argsort(-exact, axis=1)[:, :k]
    out = {}
    sign = np.packbits(x > 0, axis=1)
    for name in names:
        s = SCHEMES[name]
        stored = s.chunks(x)
        qs = s.query(queries)
        if s.oversample:
            qbits = np.packbits(queries > 0, axis=1)
            found = []
            for qi in range(len(queries)):
                hamming = np.unpackbits(sign ^ qbits[qi], axis=1).sum(axis=1)
                take = np.argsort(hamming, kind="stable")[: s.oversample * k]
                sims = stored[take] @ qs[qi]
                found.append(take[np.argsort(-sims, kind="stable")[:k]])
            found = np.array(found)
        else:
            found = np.argsort(-(qs @ stored.T), axis=1)[:, :k]
        at50 = statistics.fmean(len(set(t) & set(f)) / k for t, f in zip(truth, found))
        at10 = statistics.fmean(len(set(t[:10]) & set(f)) / 10 for t, f in zip(truth, found))
        top1 = statistics.fmean(float(t[0] == f[0]) for t, f in zip(truth, found))
        out[name] = {"overlap@50": round(at50, 4), "top10 in 50": round(at10, 4), "same top1": round(top1, 4)}
    return out


# -- part 3: speed at scale ------------------------------------------------------------------------

def grown(x: np.ndarray, rows: int, seed: int = 7) -> np.ndarray:
    """``rows`` unit vectors: the real ones repeated, each copy jittered (so no two are equal)."""
    rng = np.random.default_rng(seed)
    reps = -(-rows // len(x))
    big = np.tile(x, (reps, 1))[:rows]
    big = big + rng.normal(0, 0.02, big.shape).astype(np.float32)
    return _unit(big)


def speed(x: np.ndarray, queries: np.ndarray, rows: int, k: int = 50, repeat: int = 30) -> dict[str, dict[str, float]]:
    big = grown(x, rows)
    qs = queries[:repeat]
    out: dict[str, dict[str, float]] = {}
    today = VectorMatrix(big.shape[1])
    began = time.perf_counter()
    today.load([(i, big[i].tobytes(), False) for i in range(rows)])
    load_s = time.perf_counter() - began
    it = iter(range(10**9))
    out["today: f32 rows + int8 codes (VectorMatrix.knn)"] = {
        "ms": median_ms(lambda: today.knn(qs[next(it) % len(qs)], k), repeat),
        "MB": (today.matrix.nbytes + today.codes.nbytes) / 1e6, "load_s": load_s}
    codes, scales = today.codes[:rows].copy(), today.scales[:rows].copy()
    block = np.empty((2048, big.shape[1]), dtype=np.float32)

    def int8_only(q: np.ndarray) -> np.ndarray:
        scores = np.empty(rows, dtype=np.float32)
        with one_blas_thread():
            for begin in range(0, rows, 2048):
                stop = min(rows, begin + 2048)
                np.copyto(block[: stop - begin], codes[begin:stop], casting="unsafe")
                np.matmul(block[: stop - begin], q, out=scores[begin:stop])
        scores *= scales
        top = np.argpartition(-scores, k - 1)[:k]
        return top[np.argsort(-scores[top])]

    it = iter(range(10**9))
    out["int8 codes only (no float32 copy)"] = {"ms": median_ms(lambda: int8_only(qs[next(it) % len(qs)]), repeat),
                                               "MB": (codes.nbytes + scales.nbytes) / 1e6}
    packed = np.packbits(big > 0, axis=1)
    words = packed.view(np.uint64)

    def bit_knn(q: np.ndarray, oversample: int) -> np.ndarray:
        qw = np.packbits(q > 0).view(np.uint64)
        hamming = np.bitwise_count(words ^ qw).sum(axis=1, dtype=np.int32)
        take = np.argpartition(hamming, oversample * k)[: oversample * k]
        with one_blas_thread():
            sims = (codes[take].astype(np.float32) @ q) * scales[take]
        return take[np.argsort(-sims)[:k]]

    for oversample in (4, 10):
        it = iter(range(10**9))
        out[f"bit codes, {oversample}k re-scored int8"] = {
            "ms": median_ms(lambda: bit_knn(qs[next(it) % len(qs)], oversample), repeat),
            "MB": (words.nbytes + codes.nbytes + scales.nbytes) / 1e6}
    # sqlite-vec's own KNN (what an index under MATRIX_MIN_VECTORS uses), on 1,000 and all rows
    for n in (1000, rows):
        for kind, encode in (("float", lambda v: v.tobytes()), ("int8", None), ("bit", None)):
            conn = apsw.Connection(":memory:")
            conn.enable_load_extension(True)
            conn.load_extension(layout_module._vec0_path())
            conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(embedding {kind}[{big.shape[1]}]"
                         + (" distance_metric=cosine)" if kind != "bit" else ")"))
            with conn:
                if kind == "float":
                    conn.executemany("INSERT INTO v(rowid, embedding) VALUES (?, ?)",
                                     ((i, big[i].tobytes()) for i in range(n)))
                elif kind == "int8":
                    conn.executemany("INSERT INTO v(rowid, embedding) VALUES (?, vec_quantize_int8(?, 'unit'))",
                                     ((i, big[i].tobytes()) for i in range(n)))
                else:
                    conn.executemany("INSERT INTO v(rowid, embedding) VALUES (?, vec_quantize_binary(?))",
                                     ((i, big[i].tobytes()) for i in range(n)))
            sql = {"float": "SELECT rowid FROM v WHERE embedding MATCH ? AND k = ?",
                   "int8": "SELECT rowid FROM v WHERE embedding MATCH vec_quantize_int8(?, 'unit') AND k = ?",
                   "bit": "SELECT rowid FROM v WHERE embedding MATCH vec_quantize_binary(?) AND k = ?"}[kind]
            it = iter(range(10**9))
            out[f"sqlite-vec {kind}[384] KNN at {n}"] = {
                "ms": median_ms(lambda: conn.execute(sql, (qs[next(it) % len(qs)].tobytes(), k)).fetchall(),
                               max(5, repeat // (3 if n > 1000 else 1))),
                "MB": conn.execute("SELECT sum(pgsize) FROM dbstat").fetchone()[0] / 1e6}
            conn.close()
    return {name: {k2: round(v, 2) for k2, v in d.items()} for name, d in out.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cache", type=Path, required=True, help="state folder holding conv-NN.embcache.sqlite")
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--scheme", action="append", choices=list(SCHEMES), default=[])
    parser.add_argument("--source", choices=("md", "jsonl", "both"), default="both")
    parser.add_argument("--no-recall", action="store_true")
    parser.add_argument("--no-knn", action="store_true")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--more-vectors", type=Path, action="append", default=[],
                        help="other embedding caches whose vectors join part 2's")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    names = args.scheme or list(SCHEMES)
    if "float32 (today)" not in names:
        names.insert(0, "float32 (today)")
    results: dict[str, object] = {}
    if not args.no_recall:
        sources = ["md", "jsonl"] if args.source == "both" else [args.source]
        results["recall"] = recall(args.dev, args.cache, names, sources)
        print_recall(results["recall"])  # type: ignore[arg-type]
    if not args.no_knn:
        x = cached_vectors(sorted(args.cache.glob("*.embcache.sqlite")) + args.more_vectors)
        queries = embed_questions(dev_questions(args.dev))
        overlap = knn_overlap(x, queries, names)
        results["knn"] = overlap
        print(f"\nKNN of {len(queries)} dev questions over {len(x)} real vectors: share of float32's nearest found")
        print(f"{'scheme':<26} {'overlap@50':>11} {'top10 in 50':>12} {'same top1':>10} {'B/chunk':>8} {'B/unit':>7}")
        for name, o in overlap.items():
            s = SCHEMES[name]
            print(f"{name:<26} {o['overlap@50']:>11.4f} {o['top10 in 50']:>12.4f} {o['same top1']:>10.4f} "
                  f"{s.bytes_per_chunk:>8} {s.bytes_per_unit:>7}")
        fast = speed(x, queries, args.rows)
        results["speed"] = fast
        print(f"\nKNN (k=50) at {args.rows} chunks, median ms per query, one BLAS thread")
        for name, d in fast.items():
            print(f"{name:<52} {d['ms']:>8.2f} ms {d['MB']:>8.1f} MB" + (f"  (load {d['load_s']:.1f} s)" if 'load_s' in d else ""))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
