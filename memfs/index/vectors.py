"""An in-memory copy of the index's vectors for exact KNN by one matrix product.

sqlite-vec's KNN over float vectors scans its chunks in SQLite (about 37 ms at 100k x 384 here);
a float32 matrix product over the same vectors takes about 5 ms.  The store keeps this copy in
step with its own writes and reloads it when another connection changed the database (SQLite's
``PRAGMA data_version``).  Small indexes do not need it and use sqlite-vec's KNN directly.

Rows of private chunks are marked, so a shared search leaves them out of its nearest neighbours
instead of filtering them afterwards.

Also the stored form of a unit's vector (``units.vector``): units are ~9 per chunk, so their
vectors were most of the index (float16, 768 of 16,800 bytes per chunk at 384 dimensions x 9.5).
They are kept as int8 with one float32 scale (``dims + 4`` bytes, half of float16): on real model
vectors a cosine moves by at most ~0.003 (float16: ~0.0002), far below the gaps the search's
thresholds and rankings are fitted on (tests/test_vectors.py measures it).  Blobs written as
float16 by earlier versions (``2 * dims`` bytes) are still read, so an existing index keeps
answering without a rebuild; its units are re-encoded as they are rewritten.

The KNN's matrix product runs on one BLAS thread: it reads every vector once (memory-bound, ~150
MB at 100k chunks), so a second thread gains little on a quiet machine, and on a busy one (2
cores shared with other work) OpenBLAS's second thread spinning for a core made a 10k-chunk
product take 40 ms instead of 2 ms.  A search runs it beside its keyword side (see
:meth:`memfs.index.store.Store.nearest_later`), which needs the other core.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

from memfs.lazy import lazy_module

np = lazy_module("numpy")


_SCALE = 4  # bytes of the float32 scale before the int8 components


def pack_unit_vector(vector: bytes) -> bytes:
    """A unit-length float32 vector as stored in ``units.vector``: a float32 scale, then int8
    components.  The scale makes the decoded vector unit length again, so its dot product with a
    query stays a cosine."""
    x = np.frombuffer(vector, dtype=np.float32)
    peak = float(np.max(np.abs(x))) if len(x) else 0.0
    if peak == 0.0:
        return np.zeros(1, dtype="<f4").tobytes() + bytes(len(x))
    q = np.rint(x * (127.0 / peak)).astype(np.int8)
    norm = float(np.linalg.norm(q.astype(np.float32)))
    return np.array([1.0 / norm], dtype="<f4").tobytes() + q.tobytes()


def unpack_unit_vectors(blobs: list[bytes | None], dims: int) -> np.ndarray:
    """Stored unit vectors as float32 rows; NaN rows for a missing vector (not embedded yet) or
    one of another length (another model's)."""
    out = np.full((len(blobs), dims), np.nan, dtype=np.float32)
    packed = [i for i, b in enumerate(blobs) if b is not None and len(b) == dims + _SCALE]
    if packed:
        raw = np.frombuffer(b"".join([blobs[i] for i in packed]), dtype=np.uint8).reshape(len(packed), dims + _SCALE)  # type: ignore[misc]
        scales = raw[:, :_SCALE].copy().view("<f4")
        out[packed] = raw[:, _SCALE:].view(np.int8).astype(np.float32) * scales
    if dims + _SCALE != 2 * dims:  # float16, as earlier versions stored them
        halves = [i for i, b in enumerate(blobs) if b is not None and len(b) == 2 * dims]
        if halves:
            out[halves] = np.frombuffer(b"".join([blobs[i] for i in halves]), dtype=np.float16).reshape(len(halves), dims)  # type: ignore[misc]
    return out


def unpack_unit_vector(blob: bytes | None, dims: int) -> np.ndarray | None:
    """One stored unit vector as float32, or None (missing, or another length)."""
    if not blob:
        return None
    row = unpack_unit_vectors([blob], dims)[0]
    return None if np.isnan(row[0]) else row


_blas_lock = threading.Lock()
_blas: list[object] = []  # threadpoolctl's controller, made on first use (it scans loaded libraries, ~2 ms)


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """BLAS limited to one thread for the block (OpenBLAS's setting is the process's: a product
    on another thread meanwhile runs on one thread too)."""
    with _blas_lock:
        if not _blas:
            from threadpoolctl import ThreadpoolController

            _blas.append(ThreadpoolController())
    with _blas[0].limit(limits=1, user_api="blas"):  # type: ignore[attr-defined]
        yield


class VectorMatrix:
    def __init__(self, dims: int) -> None:
        self.dims = dims
        self.matrix = np.zeros((0, dims), dtype=np.float32)
        self.ids = np.zeros(0, dtype=np.int64)  # -1 marks a free row
        self.private = np.zeros(0, dtype=bool)
        self.rows: dict[int, int] = {}
        self.used = 0
        self.free: list[int] = []

    def __len__(self) -> int:
        return len(self.rows)

    def load(self, items: list[tuple[int, bytes, bool]]) -> None:
        count = len(items)
        self.matrix = np.zeros((max(count, 16), self.dims), dtype=np.float32)
        self.ids = np.full(len(self.matrix), -1, dtype=np.int64)
        self.private = np.zeros(len(self.matrix), dtype=bool)
        for row, (chunk_id, blob, private) in enumerate(items):
            self.matrix[row] = np.frombuffer(blob, dtype=np.float32)
            self.ids[row] = chunk_id
            self.private[row] = private
        self.rows = {int(cid): row for row, (cid, _, _) in enumerate(items)}
        self.used = count
        self.free = []

    def add(self, chunk_id: int, blob: bytes, private: bool = False) -> None:
        if chunk_id in self.rows:
            self.matrix[self.rows[chunk_id]] = np.frombuffer(blob, dtype=np.float32)
            self.private[self.rows[chunk_id]] = private
            return
        if self.free:
            row = self.free.pop()
        else:
            if self.used == len(self.matrix):
                grown = max(16, len(self.matrix) * 2)
                self.matrix = np.resize(self.matrix, (grown, self.dims))
                self.matrix[self.used :] = 0
                ids = np.full(grown, -1, dtype=np.int64)
                ids[: self.used] = self.ids[: self.used]
                self.ids = ids
                flags = np.zeros(grown, dtype=bool)
                flags[: self.used] = self.private[: self.used]
                self.private = flags
            row = self.used
            self.used += 1
        self.matrix[row] = np.frombuffer(blob, dtype=np.float32)
        self.ids[row] = chunk_id
        self.private[row] = private
        self.rows[chunk_id] = row

    def remove(self, chunk_id: int) -> None:
        row = self.rows.pop(chunk_id, None)
        if row is None:
            return
        self.matrix[row] = 0
        self.ids[row] = -1
        self.private[row] = False
        self.free.append(row)

    def knn(self, query: np.ndarray, k: int, include_private: bool = True) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the k nearest vectors, best first; vectors are unit
        length so the dot product is the cosine."""
        if not self.rows:
            return []
        with one_blas_thread():
            scores = self.matrix[: self.used] @ np.asarray(query, dtype=np.float32)
        excluded = self.ids[: self.used] < 0
        if not include_private:
            excluded |= self.private[: self.used]
        scores[excluded] = -np.inf
        k = min(k, int((~excluded).sum()))
        if k <= 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((self.ids[top], -scores[top]))]
        return [(int(self.ids[row]), float(scores[row])) for row in top]

    def similarity(self, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        q = np.asarray(query, dtype=np.float32)
        return {cid: float(self.matrix[self.rows[cid]] @ q) for cid in ids if cid in self.rows}
