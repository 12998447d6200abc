"""A thread waiting for the nearest chunks takes blocks of the matrix product (memfs.index.storage.sharedwork):
the answer is the one a single thread gives, every block is computed once, and the waiting
thread never returns while the owner could still read what it writes."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from memfs.index.storage import vectors as vectors_module
from memfs.index.storage.sharedwork import SharedWork, run_shared
from memfs.index.storage.vectors import VectorMatrix


def _matrix(rng: np.random.Generator, count: int, dims: int) -> VectorMatrix:
    rows = rng.standard_normal((count, dims)).astype(np.float32)
    rows /= np.linalg.norm(rows, axis=1, keepdims=True)
    matrix = VectorMatrix(dims)
    matrix.load([(i + 1, rows[i].tobytes(), i % 5 == 0) for i in range(count)])
    return matrix


def test_a_waiting_thread_takes_blocks_of_the_product_and_the_answer_is_unchanged(monkeypatch) -> None:
    rng = np.random.default_rng(3)
    matrix = _matrix(rng, vectors_module.COARSE_MIN_ROWS + 5_000, 48)
    queries = rng.standard_normal((6, 48)).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    alone = [matrix.knn(q, 50, private) for q in queries for private in (True, False)]

    # Count which thread multiplies each block (np.matmul is what a block ends with).
    taken: dict[str, int] = {}
    real = np.matmul

    def counting(*args, **kwargs):
        name = threading.current_thread().name
        taken[name] = taken.get(name, 0) + 1
        if name.startswith("owner"):
            time.sleep(0.002)  # a slow owner: the asker, waiting by now, surely gets some blocks
        return real(*args, **kwargs)

    monkeypatch.setattr(vectors_module.np, "matmul", counting)
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="owner")
    started = threading.Event()

    def slow_query(q: np.ndarray):
        # The owner's part before the product (the query's embedding) ends once the asker has
        # its future.
        def work(share: SharedWork):
            started.wait()
            return matrix.knn(q, 50, private, share)
        return work

    shared = []
    try:
        for q in queries:
            for private in (True, False):
                future = run_shared(pool, slow_query(q))
                started.set()
                shared.append(future.result())
                started.clear()
    finally:
        pool.shutdown()
    assert shared == alone
    blocks = -(-matrix.used // vectors_module.COARSE_BLOCK)
    assert sum(taken.values()) == blocks * len(shared)  # every block once
    assert taken.get("MainThread", 0) > 0, taken  # the asking thread took some


def test_withdraw_waits_for_a_helper_inside_the_task_and_help_returns_when_finished() -> None:
    share = SharedWork()
    inside, release = threading.Event(), threading.Event()
    log: list[str] = []

    def task() -> None:
        if threading.current_thread().name == "helper" and not inside.is_set():
            inside.set()
            release.wait(5)
            log.append("helper left")

    helper = threading.Thread(target=share.help, name="helper")
    helper.start()
    share.offer(task)
    assert inside.wait(5)
    withdrawn = threading.Thread(target=lambda: (share.withdraw(), log.append("withdrawn")))
    withdrawn.start()
    time.sleep(0.1)
    assert log == []  # the owner waits while the helper is still in its piece
    release.set()
    withdrawn.join(5)
    assert log == ["helper left", "withdrawn"]
    share.finish()
    helper.join(5)
    assert not helper.is_alive()


def test_an_error_in_the_work_reaches_the_asker_and_a_cancelled_future_runs_nothing() -> None:
    pool = ThreadPoolExecutor(max_workers=1)
    try:
        def fails(share: SharedWork) -> int:
            raise ValueError("no vector")

        future = run_shared(pool, fails)
        try:
            future.result()
            raise AssertionError("no error")
        except ValueError as exc:
            assert str(exc) == "no vector"
        gate = threading.Event()
        blocker = pool.submit(gate.wait, 5)
        ran: list[int] = []
        queued = run_shared(pool, lambda share: ran.append(1))
        assert queued.cancel()
        gate.set()
        blocker.result()
        pool.submit(lambda: None).result()
        assert ran == [] and queued.cancelled()
    finally:
        pool.shutdown()
