"""The in-memory matrix must agree with an exact product over the vectors (and, for an index of
schema 7, with sqlite-vec's KNN) and follow every write, including writes made by another
connection."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from memfs.index.storage import vectors as vectors_module
from memfs.index.storage.records import FileRecord
from memfs.index.storage.sqlite import searching as store_module  # where KNN reads it
from memfs.index.storage.sqlite.store import Store
from memfs.index.storage.vectors import VectorMatrix
from memfs.index.text.chunking import Chunk


def _fill(store: Store, vectors: np.ndarray, path: str = "memory/a.md") -> None:
    chunks = [Chunk(i + 1, i + 1, f"chunk {i}") for i in range(len(vectors))]
    hashes = [f"{path}-{i}" for i in range(len(vectors))]
    cached = {h: v.tobytes() for h, v in zip(hashes, vectors)}
    store.replace_file(FileRecord(path, "daily_log", path, 0, 0, 0, ""), chunks, hashes, [c.text for c in chunks], cached)


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, 16)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _schema_7(path: Path) -> None:
    import apsw

    conn = apsw.Connection(str(path))
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('schema', '7')")
    conn.close()


def test_packed_chunk_vectors_are_searched_exactly_and_follow_writes(tmp_path: Path) -> None:
    """Schema 8 keeps chunk vectors packed (dims + 4 bytes) in a plain table, searched in memory
    whatever the index's size: the nearest by the decoded vectors, scores their cosines."""
    from memfs.index.storage.vectors import unpack_unit_vectors

    rng = np.random.default_rng(3)
    store = Store(tmp_path / "i.sqlite", tmp_path / "c.sqlite")
    store.set_fingerprint({"t": 1}, 16)
    _fill(store, _unit(rng, 300))
    assert store.packed and {len(bytes(r[0])) for r in store.conn.execute("SELECT vector FROM chunk_vectors")} == {20}
    assert store.conn.execute("SELECT 1 FROM sqlite_master WHERE name LIKE 'chunks_vec%'").fetchone() is None
    rows = store.conn.execute("SELECT id, vector FROM chunk_vectors ORDER BY id").fetchall()
    decoded = unpack_unit_vectors([bytes(v) for _, v in rows], 16)
    for _ in range(5):
        query = _unit(rng, 1)[0]
        found = store.vector_candidates(query, 10)
        scores = decoded @ query
        best = np.lexsort(([i for i, _ in rows], -scores))[:10]
        assert [c for c, _ in found] == [rows[i][0] for i in best]
        assert np.allclose([s for _, s in found], scores[best], atol=1e-5)
        assert store.vector_similarity(query, [rows[0][0]]) == pytest.approx({rows[0][0]: float(scores[0])}, abs=1e-5)
    _fill(store, _unit(rng, 50))
    assert len(store.vector_candidates(query, 400)) == 50
    other = Store(tmp_path / "i.sqlite", tmp_path / "c.sqlite")
    _fill(other, _unit(rng, 20), path="memory/b.md")
    other.close()
    assert len(store.vector_candidates(query, 400)) == 70


def test_a_packed_matrix_grows_past_what_it_was_loaded_with(tmp_path: Path) -> None:
    """A mount's matrix, loaded at its first search, takes the vectors embedded after it one by
    one: past the rows it had room for it grows (it kept counting rows it could not hold, and a
    search then failed with EIO: test_mount_backlog under load)."""
    rng = np.random.default_rng(5)
    store = Store(tmp_path / "i.sqlite", tmp_path / "c.sqlite")
    store.set_fingerprint({"t": 1}, 16)
    _fill(store, _unit(rng, 17))
    query = _unit(rng, 1)[0]
    assert len(store.vector_candidates(query, 100)) == 17  # loaded: room for 17
    for n in range(40):  # each file written after the load: a row added in memory
        _fill(store, _unit(rng, 1), path=f"memory/more-{n}.md")
    found = store.vector_candidates(query, 100)
    assert len(found) == 57 and store._matrix is not None and store._matrix.used == 57
    fresh = Store(tmp_path / "i.sqlite", tmp_path / "c.sqlite")  # the same vectors, loaded at once
    assert [c for c, _ in fresh.vector_candidates(query, 100)] == [c for c, _ in found]
    fresh.close()
    store.close()


def test_matrix_agrees_with_sqlite_vec_and_follows_writes(tmp_path: Path, monkeypatch) -> None:
    """An index of schema 7: sqlite-vec below MATRIX_MIN_VECTORS, the float32 matrix above."""
    rng = np.random.default_rng(3)
    _schema_7(tmp_path / "i.sqlite")
    store = Store(tmp_path / "i.sqlite", tmp_path / "c.sqlite")
    assert not store.packed
    store.set_fingerprint({"t": 1}, 16)
    _fill(store, _unit(rng, 300))
    query = _unit(rng, 1)[0]
    exact = store.vector_candidates(query, 10)  # below the threshold: sqlite-vec
    assert store._matrix is None
    monkeypatch.setattr(store_module, "MATRIX_MIN_VECTORS", 1)
    fast = store.vector_candidates(query, 10)
    assert store._matrix is not None
    assert [c for c, _ in fast] == [c for c, _ in exact]
    assert np.allclose([s for _, s in fast], [s for _, s in exact], atol=1e-5)

    # Our own writes update the matrix in place: replace the file, new ids appear, old ones go.
    _fill(store, _unit(rng, 50))
    ids = {c for c, _ in store.vector_candidates(query, 400)}
    assert len(ids) == 50 and ids == {c for c, _ in store.conn.execute("SELECT rowid, 1 FROM chunks_vec")}

    # Another connection's write is noticed through data_version.
    other = Store(tmp_path / "i.sqlite", tmp_path / "c.sqlite")
    _fill(other, _unit(rng, 20), path="memory/b.md")
    other.close()
    assert len(store.vector_candidates(query, 400)) == 70


def test_matrix_reuses_free_rows() -> None:
    matrix = VectorMatrix(4)
    rows = np.eye(4, dtype=np.float32)
    for i in range(4):
        matrix.add(i + 1, rows[i].tobytes())
    matrix.remove(2)
    matrix.add(9, rows[1].tobytes())
    assert len(matrix) == 4 and matrix.knn(rows[1], 1) == [(9, 1.0)]
    assert matrix.similarity(rows[0], [1, 2]) == {1: 1.0}


def _exact_knn(matrix: VectorMatrix, vectors: dict[int, np.ndarray], private: set[int], query: np.ndarray,
               k: int, include_private: bool) -> list[int]:
    """The k nearest chunk ids by one float32 product over every vector, equal scores by id."""
    ids = sorted(c for c in vectors if include_private or c not in private)
    scores = np.stack([vectors[c] for c in ids]) @ query
    return [ids[i] for i in np.lexsort((ids, -scores))[:k]]


def test_large_matrix_finds_the_nearest_through_int8_codes_exactly() -> None:
    """Past COARSE_MIN_ROWS the nearest are found through int8 codes and a bound on their error:
    the same chunks, in the same order, with the same float32 scores as a product over every
    vector, on clustered vectors (near-equal scores are common: a bound too tight loses some)."""
    rng = np.random.default_rng(5)
    count, dims = vectors_module.COARSE_MIN_ROWS + 3_000, 64
    centres = rng.standard_normal((40, dims)).astype(np.float32)
    rows = centres[rng.integers(0, 40, count)] + 0.35 * rng.standard_normal((count, dims)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    rows[11] = rows[12]  # two chunks with one vector: equal scores, ordered by id
    matrix = VectorMatrix(dims)
    matrix.load([(i + 1, rows[i].tobytes(), i % 9 == 0) for i in range(count)])
    vectors = {i + 1: rows[i] for i in range(count)}
    private = {i + 1 for i in range(count) if i % 9 == 0}
    for chunk_id in range(100, 400, 7):  # free rows, then some taken again by new chunks
        matrix.remove(chunk_id)
        del vectors[chunk_id]
    for chunk_id in range(count + 1, count + 30):
        vector = _unit(rng, 1)[0].repeat(4)
        vector /= np.linalg.norm(vector)
        matrix.add(chunk_id, vector.tobytes())
        vectors[chunk_id] = vector
    assert matrix.used >= vectors_module.COARSE_MIN_ROWS
    for trial in range(120):
        query = rows[rng.integers(0, count)] + 0.25 * rng.standard_normal(dims).astype(np.float32)
        query = (query / np.linalg.norm(query)).astype(np.float32)
        for include_private in (True, False):
            found = matrix.knn(query, 50, include_private)
            assert [c for c, _ in found] == _exact_knn(matrix, vectors, private, query, 50, include_private), trial
            assert all(score == float(vectors[c] @ query) or abs(score - float(vectors[c] @ query)) < 1e-6
                       for c, score in found)


QUESTIONS = ["When did Caroline go to the LGBTQ support group?", "What did Melanie paint recently?",
             "a painting of the sun coming up over the lake", "Where does Caroline want to move?"]


def _unit_blobs(memory) -> dict[str, tuple[bytes, bytes]]:
    """unit hash -> (its stored vector, its float32 vector from the embedding cache)."""
    from memfs.index.storage.sqlite.unitrows import (
        HASH_SQL,  # a unit's hash is kept as its 32 bytes (schema 7)
    )

    rows = memory.store.conn.execute(
        f"SELECT {HASH_SQL} AS h, u.vector, c.vector FROM units u JOIN cache.embedding_cache c "
        f"ON c.hash = {HASH_SQL} WHERE u.vector IS NOT NULL").fetchall()
    return {str(h): (bytes(stored), bytes(full)) for h, stored, full in rows}


def test_unit_vectors_take_dims_plus_four_bytes_and_rank_as_float32(workspace: Path, make_memory_7,
                                                                      locomo_day) -> None:
    """(On an index of schema 7, whose cache keeps every vector as float32 as well.)"""
    locomo_day(workspace)
    memory = make_memory_7(workspace)
    memory.index()
    dims = memory.provider.dims
    blobs = _unit_blobs(memory)
    assert len(blobs) > 20 and {len(stored) for stored, _ in blobs.values()} == {dims + 4}
    from memfs.index.storage.vectors import unpack_unit_vectors
    stored = unpack_unit_vectors([s for s, _ in blobs.values()], dims)
    full = np.stack([np.frombuffer(f, dtype=np.float32) for _, f in blobs.values()])
    for question in QUESTIONS:
        query = memory.provider.embed([question])[0]
        exact, packed = full @ query, stored @ query
        assert np.max(np.abs(exact - packed)) < 0.005
        # The top 5 by the stored vectors are the top 5 by float32, up to ties within the tolerance.
        fifth = np.sort(exact)[-5]
        assert all(exact[i] >= fifth - 0.005 for i in np.argsort(-packed)[:5])


def test_an_index_with_float16_unit_vectors_answers_and_takes_new_ones_packed(workspace: Path, make_memory_7,
                                                                               locomo_day) -> None:
    """An index written before unit vectors were int8 (float16, 2 * dims bytes) is read as it is:
    same results, and units written later are packed beside the old ones."""
    locomo_day(workspace)
    memory = make_memory_7(workspace)
    memory.index()
    dims = memory.provider.dims
    before = [memory.search(q, min_score=0).results for q in QUESTIONS]
    with memory.store.transaction(vectors_only=True) as conn:  # as earlier versions stored them
        for digest, (_, full) in _unit_blobs(memory).items():
            conn.execute("UPDATE units SET vector = ? WHERE hash IN (?, ?)",
                         (np.frombuffer(full, dtype=np.float32).astype(np.float16).tobytes(), digest,
                          bytes.fromhex(digest)))
    assert {len(s) for s, _ in _unit_blobs(memory).values()} == {2 * dims}
    memory.close()
    memory = make_memory_7(workspace)
    after = [memory.search(q, min_score=0).results for q in QUESTIONS]
    for old, new in zip(before, after):
        # The same passages in the same order with the same scores, up to float16's rounding
        # against int8's; a snippet may grow by a neighbour less or more when its cosine sits on
        # the growth threshold (search.MERGE_COHERENCE).
        for a, b in zip(old[:3], new[:3]):
            assert a.path == b.path and a.start_line <= b.end_line and b.start_line <= a.end_line
            assert abs(a.score - b.score) < 0.005
    (workspace / "memory" / "2023-05-09.md").write_text("## 10:00 - Caroline\n\nI adopted a grey kitten named Ash.\n")
    memory.index()
    sizes = {len(s) for s, _ in _unit_blobs(memory).values()}
    assert sizes == {2 * dims, dims + 4}
    top = memory.search("the grey kitten Caroline adopted").results[0]
    assert top.path == "memory/2023-05-09.md" and top.vector_score > 0.5


def test_the_knn_product_runs_on_one_blas_thread() -> None:
    """On a busy machine OpenBLAS's second thread waiting for a core made the product 10x slower;
    the limit holds for the product only."""
    from threadpoolctl import threadpool_info

    from memfs.index.storage.vectors import one_blas_thread

    before = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    with one_blas_thread():
        assert {i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"} == {1}
    assert [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"] == before
