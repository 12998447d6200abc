"""What the mount does when memory files change: index them (off the event loop) before the
writer's close()/fsync() returns, embed new chunks in the background, and remember our own writes
so the workspace watcher can tell them from changes made beside the mount."""

from __future__ import annotations

import functools
import logging
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

from memfs import longpath
from memfs.config import CONFIG_FILE
from memfs.bursts import Bursts
from memfs.embedder import BackgroundEmbedder
from memfs.memory import BESIDE, MOUNT, Memory, Provenance
from memfs.workspace import is_memory, shown

log = logging.getLogger(__name__)

# The watcher sees the echo of our own write within its debounce (50 ms); a record older than
# this has served its purpose.  Forgetting one early only costs a redundant re-index.
OWN_WRITE_MEMORY_S = 30.0
GONE = (-1, -1)  # the (mtime, size) we record for a path we removed or renamed away
# A completion that failed (an index locked past its busy timeout by another process's long
# write) is tried again after RETRY_S, RETRIES times in all; then the next start's reconcile does it.
RETRIES = 5
RETRY_S = 1.0


class MemoryWrites:
    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        # Remembering our own writes only serves the watcher; without it, skip the stat per close.
        self.track_own = memory.cfg.mount.watch
        self.workspace: Path = memory.cfg.workspace
        self.extra = memory.cfg.index.extra_paths
        self.prefix = str(self.workspace) + "/"
        # Asked at every open, flush and close: classify each path once.
        self.is_memory = functools.lru_cache(maxsize=16384)(self._classify)
        # Closes in a burst leave their files' exact chunks and vectors for the pause after it.
        self.bursts = Bursts()
        self.embedder = BackgroundEmbedder(memory, self.bursts)
        self.completer = Completer(memory, self.embedder.kick, self.bursts)
        memory.complete_here()
        # path -> (mtime_ns, size, when) after our last write, so the watcher skips its own echo;
        # oldest first, pruned as new writes come in.
        self.own: OrderedDict[str, tuple[int, int, float]] = OrderedDict()
        # paths open for writing through the mount: their inotify events are ours (mid-write)
        self.writing: dict[str, int] = {}
        # memory path -> the lowest offset written (or truncated to) through the mount since its
        # last version: a change at or past the version's end is an append, kept from its new
        # bytes alone.  No entry: not known, so the history reads the file whole.
        self.lowest: dict[str, int] = {}
        # Called when the workspace's .memfs.toml changes through the mount (the daemon reloads).
        self.on_config_change: Callable[[], Awaitable[None]] | None = None

    def _is_folder(self, rel: str) -> bool:
        try:
            return stat.S_ISDIR(longpath.lstat(self.prefix + rel).st_mode)
        except OSError:  # gone
            return False

    def _classify(self, rel: str) -> bool:
        return is_memory(rel, self.extra)

    def note_own(self, rel: str) -> None:
        if not self.track_own:
            return
        try:
            st = longpath.lstat(self.prefix + rel)  # as the watcher looks: a symlink is not its target
        except OSError:
            self._remember(rel, GONE)
            return
        self._remember(rel, (st.st_mtime_ns, st.st_size))

    def _remember(self, rel: str, state: tuple[int, int]) -> None:
        if not self.track_own:
            return
        now = time.monotonic()
        self.own[rel] = (*state, now)
        self.own.move_to_end(rel)
        while self.own:
            oldest = next(iter(self.own.values()))
            if now - oldest[2] <= OWN_WRITE_MEMORY_S:
                break
            self.own.popitem(last=False)

    def is_own(self, rel: str, st: os.stat_result | None) -> bool:
        """Whether the watcher's view of ``rel`` (its stat, None if gone) is our own doing."""
        if rel in self.writing:
            return True
        record = self.own.get(rel)
        if record is None:
            return False
        return record[:2] == (GONE if st is None else (st.st_mtime_ns, st.st_size))

    def open_for_write(self, rel: str) -> None:
        self.writing[rel] = self.writing.get(rel, 0) + 1

    def closed_for_write(self, rel: str) -> None:
        left = self.writing.get(rel, 0) - 1
        if left > 0:
            self.writing[rel] = left
        else:
            self.writing.pop(rel, None)

    def wrote(self, rel: str, offset: int) -> None:
        """Bytes of memory file ``rel`` were written (or it was truncated) at ``offset``."""
        if not self.is_memory(rel):  # only memory files are versioned (and popped at close)
            return
        low = self.lowest.get(rel)
        if low is None or offset < low:
            self.lowest[rel] = offset

    # A file opened under another name and renamed onto a memory file before it was closed.
    unknown_caller = Provenance(MOUNT)

    @staticmethod
    def who(uid: int, pid: int) -> Provenance:
        """The caller of a FUSE request, as its versions record it."""
        return Provenance.of_process(MOUNT, uid, pid)

    def caller(self, rel: str, uid: int, pid: int) -> Provenance:
        """Who is changing ``rel``: looked up (in /proc) only for a memory file, whose versions
        record it; ``rm -rf`` of a build folder should not read a /proc file per file."""
        return self.who(uid, pid) if self.is_memory(rel) else self.unknown_caller

    async def before_change(self, rel: str, own_handles: int = 0) -> None:
        """``rel`` is about to be truncated, written, replaced or removed through the mount: what
        it holds is kept first if the history does not have it yet (it was changed beside the
        mount and the watcher has not caught up).  Cheap when it has: one stat, one lookup.
        ``own_handles``: how many of the file's open writers are the caller's own."""
        if not self.is_memory(rel):
            return
        if self.writing.get(rel, 0) > own_handles:
            return  # what it holds that is not kept is another writer's, kept when that one closes
        history = self.memory.history
        if history is not None and history.unseen(rel):
            await trio.to_thread.run_sync(self.memory.before_change, rel)

    def settled_at_close(self, rel: str) -> bool:
        """Whether a write to ``rel`` is settled before close() returns (at FLUSH): memory files
        (indexed) and the workspace's settings (a read right after close() must see them)."""
        return rel == CONFIG_FILE or self.is_memory(rel)

    async def changed(self, rel: str, who: Provenance = BESIDE) -> None:
        """A file's content changed through the mount; keep the version and index it now if it
        is memory."""
        self.note_own(rel)
        if rel == CONFIG_FILE and self.on_config_change is not None:
            await self.on_config_change()
        if not self.is_memory(rel):
            return
        change = functools.partial(self.memory.file_changed, rel, who, appended_from=self.lowest.pop(rel, None),
                                   defer=True, burst=self.bursts.continues())
        outcome = await trio.to_thread.run_sync(change)
        if outcome.provisional:
            self.completer.add(rel)
        self.embedder.closed(bool(outcome.pending))

    async def removed(self, rel: str, who: Provenance = BESIDE) -> None:
        """A file or an (empty) directory was removed through the mount."""
        self._remember(rel, GONE)
        self._forget_writes(rel)
        if rel == CONFIG_FILE and self.on_config_change is not None:
            await self.on_config_change()
        if self.is_memory(rel):
            try:
                await trio.to_thread.run_sync(self.memory.path_removed, rel, who)
            except Exception:
                # The file is gone already: an error here must not tell the kernel it is not (it
                # would keep the name, and a write to it would land on whatever took its place).
                log.exception("%s was removed, but its index rows were not: the next reconcile drops them",
                              shown(rel))

    async def moved(self, old: str, new: str, who: Provenance = BESIDE) -> None:
        self.note_own(old)  # gone, or (RENAME_EXCHANGE) the other file now
        self.note_own(new)
        self._forget_writes(old)
        self._forget_writes(new)
        if CONFIG_FILE in (old, new) and self.on_config_change is not None:
            await self.on_config_change()
        if not (self.is_memory(old) or self.is_memory(new) or self._is_folder(new)):
            return  # a plain file moved (an editor's backup, a temp file): nothing to index
        try:
            await trio.to_thread.run_sync(self.memory.path_moved, old, new, who)
        except Exception:  # renamed already: as for a removal, the kernel must be told it was
            log.exception("%s was renamed to %s, but its index was not updated: the next reconcile does it",
                          shown(old), shown(new))
        self.embedder.kick()

    def _forget_writes(self, rel: str) -> None:
        """``rel`` (a file or a folder) was moved or removed: its next version is read whole."""
        for path in [p for p in self.lowest if p == rel or p.startswith(rel + "/")]:
            del self.lowest[path]

    async def embed_worker(self) -> None:
        await self.embedder.run()

    async def complete_worker(self) -> None:
        await self.completer.run()

    def kick(self) -> None:
        self.embedder.kick()


class Completer:
    """Makes the exact chunks of files indexed provisionally (big writes and a burst's files, see
    :mod:`memfs.index.bigwrites`), one file at a time in a worker thread, the oldest write first,
    in the pauses of a burst of closes.  Stopping does not wait: a file left provisional is marked
    so in the index, and the next start's reconcile completes it."""

    def __init__(self, memory: Memory, embed: Callable[[], None], bursts: Bursts) -> None:
        self.memory = memory
        self.embed = embed
        self.bursts = bursts
        self.queue: OrderedDict[str, None] = OrderedDict()
        self.failures: dict[str, int] = {}  # path -> completions that failed in a row
        self._wakeup = trio.Event()
        self.working = False

    def add(self, rel: str) -> None:
        self.queue[rel] = None
        self._wakeup.set()

    async def run(self) -> None:
        # Left by a stop between a reconcile and now (a reconcile completes what it finds).
        for rel in await trio.to_thread.run_sync(self.memory.provisional_paths):
            self.queue.setdefault(rel, None)
        while True:
            if not self.queue:
                self._wakeup = trio.Event()
                await self._wakeup.wait()
            await self.bursts.pause()
            if not self.queue:
                continue
            rel, _ = self.queue.popitem(last=False)
            self.working = True
            try:
                # Abandoned on cancel: the thread finishes its transaction (or not, and the mark
                # stays) while the process goes on unmounting.
                outcome = await trio.to_thread.run_sync(self.memory.complete, rel, abandon_on_cancel=True)
            except Exception as exc:  # a locked index, say: tried again a little later
                tries = self.failures.get(rel, 0) + 1
                if tries < RETRIES:
                    self.failures[rel] = tries
                    log.info("indexing %s exactly postponed (%s); trying again", rel, exc)
                    self.queue.setdefault(rel, None)
                    await trio.sleep(RETRY_S)
                else:
                    self.failures.pop(rel, None)
                    log.warning("indexing %s exactly postponed: %s; the next start's reconcile does it",
                                rel, exc)
                continue
            finally:
                self.working = False
            self.failures.pop(rel, None)
            if outcome is not None and outcome.pending:
                self.embed()
