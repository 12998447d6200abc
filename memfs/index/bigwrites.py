"""Big writes indexed in two steps: keyword rows before the writer's close() returns, the rest
after.

Chunking a 30 MB file exactly (a token count per line, units, their rows) costs some 15 s of CPU;
its keyword rows alone a tenth of that.  So a write through the mount of at least
``index.defer_mb`` of new text (one file, or one sync batch) is stored first as *provisional*
chunks (:func:`memfs.index.text.chunking.provisional`: the file's own lines, grouped by length, in the
FTS5 table its privacy picks) in one transaction with a mark on the file; close() returns then,
and the file is searchable by any of its words, cited by its real line numbers.  The daemon's
completion worker (:class:`memfs.fs.writes.MemoryWrites`) then makes the exact chunks, units and
embedding queue entries (:meth:`memfs.index.indexer.Indexer.complete`), swapped in by one
transaction, so a reader sees either the one or the other.  The mark is the file's hash with a
prefix no file's hash has: a daemon stopped before the worker finished leaves it, and the next
reconcile (at the next start) indexes the file again, exactly.

A sync batch lands in hundreds of day files: those it creates get their keyword rows from the
bytes it wrote (:meth:`memfs.index.indexer.Indexer.provisional_written`), not by reading each
back, and their versions are kept meanwhile in another thread (see ``Memory.ingest_sync``).

Writes below the threshold keep the one-step path (everything before close() returns): a
megabyte costs about half a second of CPU that way, which a note, a day's log or an append never
reaches.  Unless they come in a burst (a notes folder copied in: :mod:`memfs.bursts`): a Markdown
file closed right after another is stored provisionally whatever its size, so each close costs
only its keyword rows (1,000 notes of 1-10 KB: about 2 ms a close in process instead of 4), and
the worker makes the exact chunks once the closes pause.

Indexing of one path is serialised (:class:`PathLocks`): a close() and the worker never swap a
file's chunks at the same time, so the worker cannot store chunks of a version older than a
close() stored after it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager

MB = 1 << 20


def threshold(defer_mb: float) -> int:
    """``index.defer_mb`` in bytes (0: every write through the mount is deferred)."""
    return int(defer_mb * MB)


class PathLocks:
    """One lock per indexed path, made when first needed.  A path's lock is always taken before
    the store's (indexing takes the store's inside): one thread holding the store's while it
    waits for a path's would deadlock with another indexing that path."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: dict[str, threading.RLock] = {}

    @contextmanager
    def held(self, *paths: str) -> Iterator[None]:
        """The locks of ``paths``, taken in one order (their sorted order), so two threads that
        each take several never wait for each other."""
        with self._guard:
            locks = [self._locks.setdefault(rel, threading.RLock()) for rel in sorted(set(paths))]
        with ExitStack() as stack:
            for lock in locks:
                stack.enter_context(lock)
            yield
