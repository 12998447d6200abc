"""A waiting thread lends a hand: work split in pieces that a second thread can take a share of.

A search finds its nearest chunks on a worker thread while its own thread does the keyword side;
when the keyword side is done first, its thread used to sit waiting for the worker's matrix
product.  :class:`SharedWork` lets the worker offer the product's remaining blocks and the waiting
thread take some of them (numpy releases the interpreter lock in both), so on two cores the wait
is shortened by up to half of what was left of the product.

The owner offers a task that takes pieces until none is left (each piece taken once, e.g. by
``next()`` of an ``itertools.count``, atomic under the interpreter lock) and withdraws it when
its own call of the task returns: withdrawing waits for helpers still in their last piece, so the
owner never reads results a helper is still writing.  A helper returns when the owner is done
(:meth:`finish`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Executor, Future
from typing import TypeVar

T = TypeVar("T")


class SharedWork:
    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._task: Callable[[], None] | None = None
        self._offers = 0  # a task's number: a helper takes each task once
        self._helpers = 0  # helpers inside the task now
        self._finished = False

    def offer(self, task: Callable[[], None]) -> None:
        """(Owner) ``task`` may now be run by a helper too, beside the owner's own call."""
        with self._cond:
            self._task = task
            self._offers += 1
            self._cond.notify_all()

    def withdraw(self) -> None:
        """(Owner, after its own call of the task returned) No helper starts the task any more;
        returns once every helper that did has left it."""
        with self._cond:
            self._task = None
            while self._helpers:
                self._cond.wait()

    def finish(self) -> None:
        """(Owner) Nothing more will be offered: waiting helpers return."""
        with self._cond:
            self._finished = True
            self._cond.notify_all()

    def help(self) -> None:
        """(Helper) Run each task offered until the owner finishes."""
        done = 0
        while True:
            with self._cond:
                while not self._finished and (self._task is None or self._offers == done):
                    self._cond.wait()
                if self._finished:
                    return
                task, done = self._task, self._offers
                self._helpers += 1
            try:
                task()  # type: ignore[misc]
            finally:
                with self._cond:
                    self._helpers -= 1
                    self._cond.notify_all()


class HelpingFuture(Future[T]):
    """A future whose ``result()``, asked while the work is still to do, lends the asking thread
    to it (``share``) instead of only waiting."""

    def __init__(self, share: SharedWork) -> None:
        super().__init__()
        self.share = share

    def result(self, timeout: float | None = None) -> T:
        if timeout is None and not self.done():
            self.share.help()
        return super().result(timeout)


def run_shared(pool: Executor, work: Callable[[SharedWork], T]) -> HelpingFuture[T]:
    """``work(share)`` on ``pool``, its result in the future returned."""
    share = SharedWork()
    future: HelpingFuture[T] = HelpingFuture(share)

    def run() -> None:
        try:
            if not future.set_running_or_notify_cancel():
                return
            try:
                future.set_result(work(share))
            except BaseException as exc:  # the future carries it to whoever asks
                future.set_exception(exc)
        finally:
            share.finish()

    pool.submit(run)
    return future
