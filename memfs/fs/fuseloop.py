"""Picking up the next FUSE request without a trip through trio's scheduler when it is already there.

pyfuse3's workers wait for each request the same way: take a ``trio.Lock``, register the
/dev/fuse descriptor with trio's epoll (``wait_readable``), give way to the scheduler, and read
once woken.  Ordinary tools send their requests back to back (open, read, flush, release; one
lstat after another), so the next request is often queued by the time the last reply is written,
and that whole trip costs more than most handlers.  :func:`install` replaces pyfuse3's wait
(``pyfuse3._wait_fuse_readable``, which its worker loop looks up by name each time) with one that
first asks the kernel directly (``poll`` with no timeout), for a few tens of microseconds (the
program that got the last reply is sending its next request), and returns at once when a
request is there; only otherwise does it wait through trio as before.

Why it is safe: trio runs one task at a time, and a worker reads right after this returns, with
no ``await`` in between, so no other worker can take the request this one saw.  A worker that
trio woke for a request another worker took meanwhile checks again before it returns, and waits
again if nothing is there (pyfuse3's read blocks, so it must never be called for nothing).  So
that a stream of requests cannot starve the daemon's other tasks (the watcher, the socket,
indexing), every ``YIELD_EVERY``-th request goes through the scheduler.

pyfuse3 counts its idle readers inside the function this replaces, so with it replaced it sees
none and starts workers up to its ``max_tasks`` (64, see :mod:`memfs.fs.mount`); the extra ones
wait on the lock, which costs a little memory and nothing per request.

When pyfuse3 does not have the function this replaces (another version), nothing is installed
and pyfuse3 waits as it always did.
"""

from __future__ import annotations

import logging
import os
import select
import time

import pyfuse3
import trio

log = logging.getLogger(__name__)

# How long a worker that has just answered spins for the next request before it waits through
# trio.  Measured here (2 vCPUs, an lstat loop, medians of 5): a getattr round trip took 165 us
# when the worker waited through trio, 62 us with a 30 or a 100 us spin (passthrough_hp: 49 us);
# with two busy loops beside, 171 us through trio, 101 us spinning, and 125 us when the spin
# stepped aside while the cores were busy (as the longer busy poll does), so it spins whatever
# the load.  A miss costs at most this much CPU.
SPIN_S = 50e-6
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

    def __init__(self, fd: int, spin_s: float = 0.0) -> None:
        self.fd = fd
        self.spin_s = spin_s
        self.poller = select.poll()
        self.poller.register(fd, select.POLLIN)
        self.lock = trio.Lock()  # trio lets one task at a time wait for a descriptor
        self.streak = 0
        self.closed = False
        self.quick = 0  # requests taken without the scheduler (for the benchmark and tests)
        self.waited = 0

    def ready(self) -> bool:
        return any(events & _READY for _, events in self.poller.poll(0))

    def soon(self) -> bool:
        """Whether a request arrives within the spin window."""
        if self.spin_s <= 0:
            return False
        deadline = time.perf_counter() + self.spin_s
        while time.perf_counter() < deadline:
            if self.ready():
                return True
        return False

    async def __call__(self) -> bool:
        if self.closed:
            return False
        if self.streak < YIELD_EVERY and (self.ready() or self.soon()):
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


def install(spin_s: float = SPIN_S) -> QuickWait | None:
    """Put the quick wait in place for the session pyfuse3.init() opened; None if it cannot be."""
    fd = fuse_fd()
    if not hasattr(pyfuse3, "_wait_fuse_readable") or fd is None:
        log.info("FUSE requests are picked up through trio only (pyfuse3 %s)", pyfuse3.__version__)
        return None
    quick = QuickWait(fd, spin_s)
    pyfuse3._wait_fuse_readable = quick  # type: ignore[attr-defined]
    return quick
