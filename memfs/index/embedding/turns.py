"""One process at a time embeds an index's waiting passages: turns taken a model call at a time.

Every warm process of a workspace (two mounts of it, a mount and ``memfs index``, a mount and a
``memfs serve``) embeds what waits in the index, and each picks the passages to embed in the same
order.  Without turns two of them read the same passages at the same moment and the model did the
work twice (a newcomer's second mount made every search of the first six times slower while a
backlog was embedded: the shared embedding service was busy with both).  A turn is an exclusive
``flock`` on a file beside the index, held from choosing a call's passages until their vectors
are stored, so the next turn, in whichever process, chooses among those still waiting.

A process that finds the turn taken looks again every ``POLL_S`` and gives up when it is stopping;
the kernel lets go of a turn however its process ends.  Turns are per machine: hosts sharing one
PostgreSQL index each take their own.
"""

from __future__ import annotations

import contextlib
import fcntl
import threading
from collections.abc import Iterator

from memfs.userdirs import private_opener

POLL_S = 0.05  # a turn lasts a model call (a few tenths of a second): a look costs a system call


class EmbedTurns:
    def __init__(self, path: str) -> None:
        self.path = path
        self._threads = threading.Lock()  # a process's threads share its file, and flock with it

    @contextlib.contextmanager
    def turn(self, stop: threading.Event | None = None) -> Iterator[bool]:
        """Yields True holding the turn, or False when ``stop`` was set while waiting for it."""
        with self._threads, open(self.path, "a", opener=private_opener) as held:
            while True:
                try:
                    fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if stop is None:
                        threading.Event().wait(POLL_S)
                    elif stop.wait(POLL_S):
                        yield False
                        return
            yield True  # closing the file lets the turn go
