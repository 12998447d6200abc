"""What the mount does when memory files change: index them (off the event loop) before the
writer's close()/fsync() returns, embed new chunks in the background, and remember our own writes
so the workspace watcher can tell them from changes made beside the mount."""

from __future__ import annotations

import functools
import logging
import os
from pathlib import Path

import trio

from memfs.memory import Memory
from memfs.workspace import is_memory

log = logging.getLogger(__name__)


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
        self._wakeup = trio.Event()
        # path -> (mtime_ns, size) after our last write, so the watcher skips its own echo.
        self.own: dict[str, tuple[int, int]] = {}
        # paths open for writing through the mount: their inotify events are ours (mid-write)
        self.writing: dict[str, int] = {}

    def _classify(self, rel: str) -> bool:
        return is_memory(rel, self.extra)

    def note_own(self, rel: str) -> None:
        if not self.track_own:
            return
        try:
            st = os.stat(self.prefix + rel)
        except OSError:
            self.own.pop(rel, None)
            return
        self.own[rel] = (st.st_mtime_ns, st.st_size)

    def is_own(self, rel: str, st: os.stat_result) -> bool:
        return rel in self.writing or self.own.get(rel) == (st.st_mtime_ns, st.st_size)

    def open_for_write(self, rel: str) -> None:
        self.writing[rel] = self.writing.get(rel, 0) + 1

    def closed_for_write(self, rel: str) -> None:
        left = self.writing.get(rel, 0) - 1
        if left > 0:
            self.writing[rel] = left
        else:
            self.writing.pop(rel, None)

    async def changed(self, rel: str) -> None:
        """A file's content changed through the mount; index it now if it is memory."""
        self.note_own(rel)
        if not self.is_memory(rel):
            return
        outcome = await trio.to_thread.run_sync(self.memory.file_changed, rel)
        if outcome.pending:
            self._wakeup.set()

    async def removed(self, rel: str) -> None:
        """A file was unlinked (rmdir only ever removes empty directories: nothing indexed)."""
        self.own.pop(rel, None)
        if self.is_memory(rel):
            await trio.to_thread.run_sync(self.memory.path_removed, rel)

    async def moved(self, old: str, new: str) -> None:
        self.own.pop(old, None)
        self.note_own(new)
        if not (self.is_memory(old) or self.is_memory(new) or (self.workspace / new).is_dir()):
            return  # a plain file moved (an editor's backup, a temp file): nothing to index
        await trio.to_thread.run_sync(self.memory.path_moved, old, new)
        self._wakeup.set()

    async def embed_worker(self) -> None:
        """Embeds pending chunks whenever there are some; never on the event loop itself."""
        while True:
            await self._wakeup.wait()
            self._wakeup = trio.Event()
            while self.memory.pending:
                embedded = await trio.to_thread.run_sync(self.memory.embed_pending, 16)
                if not embedded:
                    break  # provider failing: the chunks stay keyword-only until the next write

    def kick(self) -> None:
        self._wakeup.set()
