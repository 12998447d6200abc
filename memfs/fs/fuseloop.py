"""Picking up the next FUSE request without a trip through trio's scheduler when it is already there.

pyfuse3's workers wait for each request the same way: take a ``trio.Lock``, register the
/dev/fuse descriptor with trio's epoll (``wait_readable``), give way to the scheduler, and read
once woken.  Ordinary tools send their requests back to back (open, read, flush, release; one
lstat after another), so the next request is often queued by the time the last reply is written,
and that whole trip costs more than most handlers.  :func:`install` replaces pyfuse3's wait
(``pyfuse3._wait_fuse_readable``, which its worker loop looks up by name each time) with one that
first asks the kernel directly (``poll`` with no timeout) and returns at once when a request is
waiting; only otherwise does it wait through trio as before.

Why it is safe: trio runs one task at a time, and a worker reads right after this returns, with
no ``await`` in between, so no other worker can take the request this one saw.  A worker that
trio woke for a request another worker took meanwhile checks again before it returns, and waits
again if nothing is there (pyfuse3's read blocks, so it must never be called for nothing).  So
that a stream of requests cannot starve the daemon's other tasks (the watcher, the socket,
indexing), every ``YIELD_EVERY``-th request goes through the scheduler.

When pyfuse3 does not have the function this replaces (another version), nothing is installed
and pyfuse3 waits as it always did.
"""

from __future__ import annotations

import logging
import os
import select
from collections.abc import Awaitable, Callable

import pyfuse3
import trio

log = logging.getLogger(__name__)

YIELD_EVERY = 16  # requests taken without a scheduler pass before giving the other tasks a turn
_READY = select.POLLIN | select.POLLERR | select.POLLHUP | select.POLLNVAL


def fuse_fd() -> int | None:
    """The descriptor of this process's FUSE session: its only open /dev/fuse."""
    found = []
    for name in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{name}") == "/dev/fuse":
                found.append(int(name))
        except OSError:
            continue
    return found[0] if len(found) == 1 else None


class QuickWait:
    """pyfuse3's ``_wait_fuse_readable``, with a direct look at the descriptor first."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN)
        self.lock = trio.Lock()  # trio lets one task at a time wait for a descriptor
        self.streak = 0
        self.closed = False
        self.quick = 0  # requests taken without the scheduler (for the benchmark and tests)
        self.waited = 0

    def ready(self) -> bool:
        return any(events & _READY for _, events in self.poller.poll(0))

    async def __call__(self) -> bool:
        if self.closed:
            return False
        if self.streak < YIELD_EVERY and self.ready():
            self.streak += 1
            self.quick += 1
            return True
        self.streak = 0
        while True:
            try:
                async with self.lock:
                    if self.closed:
                        return False
                    await trio.lowlevel.wait_readable(self.fd)
            except trio.ClosedResourceError:  # pyfuse3.terminate(): every worker's loop ends
                self.closed = True
                return False
            # Woken for a request that another worker may have taken meanwhile: look again,
            # with no await between this and pyfuse3's read.
            if self.ready():
                self.waited += 1
                return True


def install() -> QuickWait | None:
    """Put the quick wait in place for the session pyfuse3.init() opened; None if it cannot be."""
    original: Callable[[], Awaitable[bool]] | None = getattr(pyfuse3, "_wait_fuse_readable", None)
    fd = fuse_fd()
    if original is None or fd is None:
        log.info("FUSE requests are picked up through trio only (pyfuse3 %s)", pyfuse3.__version__)
        return None
    quick = QuickWait(fd)
    pyfuse3._wait_fuse_readable = quick  # type: ignore[attr-defined]
    return quick
