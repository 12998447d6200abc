"""The in-memory matrix used for large indexes must agree with sqlite-vec's KNN and follow every
write, including writes made by another connection."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from memfs.index import store as store_module
from memfs.index.chunking import Chunk
from memfs.index.store import FileRecord, Store
from memfs.index.vectors import VectorMatrix


def _fill(store: Store, vectors: np.ndarray, path: str = "memory/a.md") -> None:
    chunks = [Chunk(i + 1, i + 1, f"chunk {i}") for i in range(len(vectors))]
    hashes = [f"{path}-{i}" for i in range(len(vectors))]
    cached = {h: v.tobytes() for h, v in zip(hashes, vectors)}
    store.replace_file(FileRecord(path, "daily_log", path, 0, 0, 0, ""), chunks, hashes, [c.text for c in chunks], cached)


def _unit(rng: np.random.Generator, n: int) -> np.ndarray:
    x = rng.standard_normal((n, 16)).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_matrix_agrees_with_sqlite_vec_and_follows_writes(tmp_path: Path, monkeypatch) -> None:
    rng = np.random.default_rng(3)
    store = Store(tmp_path / "i.sqlite", tmp_path / "c.sqlite")
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
