"""An in-memory copy of the index's vectors for exact KNN by one matrix product.

sqlite-vec's KNN over float vectors scans its chunks in SQLite (about 37 ms at 100k x 384 here);
a float32 matrix product over the same vectors 17-20 ms, and the two passes of
:meth:`VectorMatrix.knn` (int8 codes, then the few rows that may be nearest) 11-12 ms, with the
same answer.  The store keeps this copy in
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

The KNN's matrix product runs on one BLAS thread: it reads every vector once (memory-bound, ~40
MB of codes at 100k chunks), so a second thread gains little on a quiet machine, and on a busy one (2
cores shared with other work) OpenBLAS's second thread spinning for a core made a 10k-chunk
product take 40 ms instead of 2 ms.  A search runs it beside its keyword side (see
:meth:`memfs.index.storage.sqlite.store.Store.nearest_later`), which needs the other core; once the keyword side
is done, its thread takes blocks of the coarse pass too (:mod:`memfs.index.storage.sharedwork`).
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Iterator

from memfs.index.storage.sharedwork import SharedWork
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


def as_packed(blob: bytes, dims: int) -> bytes:
    """A vector in the packed form (``dims + 4`` bytes, :func:`pack_unit_vector`) whatever form it
    comes in: packed already (copied as it is: packing a decoded vector again gives the same
    bytes), float32 (``4 * dims``) or float16 (``2 * dims``, units of earlier versions)."""
    if len(blob) == dims + _SCALE:
        return bytes(blob)
    if len(blob) == 4 * dims:
        return pack_unit_vector(bytes(blob))
    if len(blob) == 2 * dims:
        return pack_unit_vector(np.frombuffer(blob, dtype=np.float16).astype(np.float32).tobytes())
    raise ValueError(f"a vector of {len(blob)} bytes is not one of {dims} dimensions")


def as_float32(blob: bytes, dims: int) -> np.ndarray:
    """A vector as float32 whatever form it is kept in (see :func:`as_packed`)."""
    if len(blob) == 4 * dims and dims + _SCALE != 4 * dims:
        return np.frombuffer(blob, dtype=np.float32)
    row = unpack_unit_vector(blob, dims)
    if row is None:
        raise ValueError(f"a vector of {len(blob)} bytes is not one of {dims} dimensions")
    return row


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


# Below this many rows one float32 product is as quick as the coarse pass (and a small index
# needs no second copy of its vectors).
COARSE_MIN_ROWS = 20_000
# Rows converted from int8 at a time: a block's float32 copy (3 MB at 384 dimensions) stays in
# the core's cache for the product that reads it (4096 rows: 12.1 ms at 100k; 16384: 37 ms).
COARSE_BLOCK = 2048
# Added to every row's error bound: the coarse and exact products round differently in float32
# (~1e-6 on a cosine here), so the bound holds with a wide margin.
ROUNDING = 1e-4


class VectorMatrix:
    """Every chunk vector as float32 rows, and, once there are many, as int8 codes beside them;
    or, ``packed`` (an index that keeps its chunk vectors packed, as units' are), as their int8
    codes alone: the codes are then the vectors themselves, so one pass over them is exact (a
    quarter of the memory, and no second pass).

    The exact KNN used to read every float32 row (~150 MB at 100k chunks, 17-20 ms, bound by
    memory).  Now the nearest are found in two passes that give the same answer: the codes (a
    quarter of the bytes; 11-12 ms with their conversion) give each row's cosine within a bound
    (its quantisation error's norm times the query's, plus :data:`ROUNDING`), and only the rows
    whose bound can reach the k-th best lower bound are scored exactly from the float32 rows
    (a few hundred).  A row left out scores below k rows that are surely better, so the k
    nearest, ties and all, are those of one float32 product."""

    def __init__(self, dims: int, packed: bool = False) -> None:
        self.dims = dims
        self.packed = packed  # rows come as pack_unit_vector's bytes, and are kept as those codes
        self.matrix = np.zeros((0, dims), dtype=np.float32)
        self.codes = np.zeros((0, dims), dtype=np.int8)
        self.scales = np.zeros(0, dtype=np.float32)  # a row's code times its scale is about the row
        self.errors = np.zeros(0, dtype=np.float32)  # the norm of what the codes leave out
        self.ids = np.zeros(0, dtype=np.int64)  # -1 marks a free row
        self.private = np.zeros(0, dtype=bool)
        self.rows: dict[int, int] = {}
        self.used = 0
        self.free: list[int] = []

    def __len__(self) -> int:
        return len(self.rows)

    def load(self, items: list[tuple[int, bytes, bool]]) -> None:
        count = len(items)
        self._allocate(max(count, 16))
        if self.packed:
            if count:
                raw = np.frombuffer(b"".join([blob for _, blob, _ in items]), dtype=np.uint8).reshape(
                    count, self.dims + _SCALE)
                self.scales[:count] = raw[:, :_SCALE].copy().view("<f4").ravel()
                self.codes[:count] = raw[:, _SCALE:].view(np.int8)
                self.ids[:count] = [chunk_id for chunk_id, _, _ in items]
                self.private[:count] = [bool(private) for _, _, private in items]
        else:
            for row, (chunk_id, blob, private) in enumerate(items):
                self.matrix[row] = np.frombuffer(blob, dtype=np.float32)
                self.ids[row] = chunk_id
                self.private[row] = private
            self._encode(0, count)
        self.rows = {int(cid): row for row, (cid, _, _) in enumerate(items)}
        self.used = count
        self.free = []

    def _allocate(self, size: int) -> None:
        self.matrix = np.zeros((0 if self.packed else size, self.dims), dtype=np.float32)
        self.codes = np.zeros((size, self.dims), dtype=np.int8)
        self.scales = np.zeros(size, dtype=np.float32)
        self.errors = np.zeros(size, dtype=np.float32)
        self.ids = np.full(size, -1, dtype=np.int64)
        self.private = np.zeros(size, dtype=bool)

    def _encode(self, start: int, end: int) -> None:
        """The codes of rows ``start:end`` from their float32 values (a zero row: zero codes)."""
        for begin in range(start, end, COARSE_BLOCK):
            stop = min(end, begin + COARSE_BLOCK)
            rows = self.matrix[begin:stop]
            peak = np.abs(rows).max(axis=1) if self.dims else np.zeros(stop - begin, dtype=np.float32)
            scale = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
            codes = np.clip(np.rint(rows / scale[:, None]), -127, 127).astype(np.int8)
            self.codes[begin:stop] = codes
            self.scales[begin:stop] = scale
            self.errors[begin:stop] = np.linalg.norm(rows - codes.astype(np.float32) * scale[:, None], axis=1)

    def _set(self, row: int, blob: bytes, private: bool) -> None:
        self.private[row] = private
        if self.packed:
            self.scales[row] = np.frombuffer(blob[:_SCALE], dtype="<f4")[0]
            self.codes[row] = np.frombuffer(blob[_SCALE:], dtype=np.int8)
            return
        self.matrix[row] = np.frombuffer(blob, dtype=np.float32)
        self._encode(row, row + 1)

    def add(self, chunk_id: int, blob: bytes, private: bool = False) -> None:
        if chunk_id in self.rows:
            self._set(self.rows[chunk_id], blob, private)
            return
        if self.free:
            row = self.free.pop()
        else:
            if self.used == len(self.ids):  # full (a packed matrix keeps no float32 rows: not len(matrix))
                old = (self.matrix, self.codes, self.scales, self.errors, self.ids, self.private)
                self._allocate(max(16, len(self.ids) * 2))
                for new, before in zip((self.matrix, self.codes, self.scales, self.errors, self.ids, self.private), old):
                    new[: min(self.used, len(before))] = before[: self.used]
            row = self.used
            self.used += 1
        self.ids[row] = chunk_id
        self._set(row, blob, private)
        self.rows[chunk_id] = row

    def remove(self, chunk_id: int) -> None:
        row = self.rows.pop(chunk_id, None)
        if row is None:
            return
        if not self.packed:
            self.matrix[row] = 0
        self.codes[row] = 0
        self.scales[row] = 0
        self.errors[row] = 0
        self.ids[row] = -1
        self.private[row] = False
        self.free.append(row)

    def knn(self, query: np.ndarray, k: int, include_private: bool = True,
            share: SharedWork | None = None) -> list[tuple[int, float]]:
        """(chunk id, cosine similarity) of the k nearest vectors, best first; vectors are unit
        length so the dot product is the cosine.  ``share``: a thread waiting for the answer may
        take blocks of the coarse pass (see :mod:`memfs.index.storage.sharedwork`)."""
        if not self.rows:
            return []
        q = np.asarray(query, dtype=np.float32)
        excluded = self.ids[: self.used] < 0
        if not include_private:
            excluded |= self.private[: self.used]
        k = min(k, int((~excluded).sum()))
        if k <= 0:
            return []
        if self.packed:
            with one_blas_thread():
                scores = self._coarse(q, share)  # the codes are the vectors: exact
            scores[excluded] = -np.inf
            top = np.argpartition(-scores, k - 1)[:k]
            return self._ranked(top, scores[top])
        if self.used < COARSE_MIN_ROWS:
            with one_blas_thread():
                scores = self.matrix[: self.used] @ q
            scores[excluded] = -np.inf
            top = np.argpartition(-scores, k - 1)[:k]
            return self._ranked(top, scores[top])
        with one_blas_thread():
            coarse = self._coarse(q, share)
        bound = self.errors[: self.used] * float(np.linalg.norm(q)) + ROUNDING
        coarse[excluded] = -np.inf
        # The k-th best lower bound: at least k rows score that much or more, so a row whose
        # upper bound is below it cannot be among the k nearest.
        floor = np.partition(coarse - bound, self.used - k)[self.used - k]
        candidates = np.flatnonzero(coarse + bound >= floor)
        with one_blas_thread():
            exact = self.matrix[candidates] @ q
        if len(candidates) > k:
            best = np.argpartition(-exact, k - 1)[:k]
            candidates, exact = candidates[best], exact[best]
        return self._ranked(candidates, exact)

    def _coarse(self, q: np.ndarray, share: SharedWork | None = None) -> np.ndarray:
        out = np.empty(self.used, dtype=np.float32)
        starts = range(0, self.used, COARSE_BLOCK)
        taken = itertools.count()  # its next() is atomic under the interpreter lock: each block once

        def blocks() -> None:
            block = np.empty((COARSE_BLOCK, self.dims), dtype=np.float32)  # each thread its own
            for index in taken:
                if index >= len(starts):
                    return
                begin = starts[index]
                stop = min(self.used, begin + COARSE_BLOCK)
                part = block[: stop - begin]
                np.copyto(part, self.codes[begin:stop], casting="unsafe")
                np.matmul(part, q, out=out[begin:stop])

        if share is None:
            blocks()
        else:
            share.offer(blocks)
            try:
                blocks()
            finally:
                share.withdraw()
        out *= self.scales[: self.used]
        return out

    def _ranked(self, rows: np.ndarray, scores: np.ndarray) -> list[tuple[int, float]]:
        """Best first; equal scores by chunk id."""
        order = np.lexsort((self.ids[rows], -scores))
        return [(int(self.ids[rows[i]]), float(scores[i])) for i in order]

    def similarity(self, query: np.ndarray, ids: list[int]) -> dict[int, float]:
        q = np.asarray(query, dtype=np.float32)
        if self.packed:
            return {cid: float((self.codes[self.rows[cid]].astype(np.float32) @ q) * self.scales[self.rows[cid]])
                    for cid in ids if cid in self.rows}
        return {cid: float(self.matrix[self.rows[cid]] @ q) for cid in ids if cid in self.rows}
