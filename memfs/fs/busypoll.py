"""Keeps the daemon's event loop polling for a short while after each FUSE request.

On a virtual machine an idle vCPU halts, and waking it for the next request costs more than the
request itself: measured here (firecracker, haltpoll with guest polling off), a getattr through
pyfuse3 took about 95 us when the loop slept between requests and about 75 us when it kept
polling.  Ordinary tools issue their requests back to back (open, write, flush, ...), so after
each request the loop stays awake for ``mount.busy_poll_us`` and picks the next one up without
the halt.  When no request comes within the window the poller parks and the daemon sleeps
(no CPU at all while the mount is idle).

Polling only pays while a core would otherwise idle.  On a busy machine (an agent, its model
client and memfs's own embedding on two cores) the polling loop takes a core from the very
processes whose requests it waits for, so it is skipped while more tasks are runnable than there
are cores (the kernel's instantaneous count in /proc/loadavg, read at most every
``CROWD_CHECK_S``).
"""

from __future__ import annotations

import os
import time

import trio

CROWD_CHECK_S = 0.05  # how stale the "machine is busy" answer may be (reading it costs ~10 us)
CORES = os.cpu_count() or 1


def runnable_tasks() -> int:
    """Tasks running or waiting for a core right now, this daemon's thread included."""
    try:
        with open("/proc/loadavg", "rb") as loadavg:
            return int(loadavg.read().split()[3].split(b"/")[0])
    except (OSError, ValueError, IndexError):
        return 0


class BusyPoll:
    def __init__(self, window_us: int) -> None:
        self.window = window_us / 1e6
        self.last = 0.0
        self.parked = True
        self._wake = trio.Event()
        self._crowd_checked = -CROWD_CHECK_S
        self._crowded = False

    def crowded(self, now: float) -> bool:
        if now - self._crowd_checked >= CROWD_CHECK_S:
            self._crowd_checked = now
            self._crowded = runnable_tasks() > CORES
        return self._crowded

    def touch(self) -> None:
        """Called at the start of every request: keep (or start) polling."""
        self.last = now = time.perf_counter()
        if self.parked and self.window > 0 and not self.crowded(now):
            self.parked = False
            self._wake.set()

    async def run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            # Each pass through trio's scheduler polls epoll with a zero timeout, so a request
            # that arrives meanwhile is picked up at once; epoll_wait releases the GIL, so the
            # indexing threads keep running.
            while (now := time.perf_counter()) - self.last < self.window and not self.crowded(now):
                await trio.lowlevel.checkpoint()
            self.parked = True
