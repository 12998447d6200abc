"""Changes to memory files, as the front ends report them: a write closed (its version kept, then
indexed; a big one in two steps), removed, moved or renamed; what a note appended by a command
adds; and the history as a mode may see it.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
from pathlib import Path

from memfs import notes
from memfs.history.provenance import BESIDE, Provenance
from memfs.index.bigwrites import threshold
from memfs.index.indexer import Outcome
from memfs.index.storage.interface import IndexOffline
from memfs.services.lifecycle import Engine
from memfs.versions import Versions
from memfs.workspace import (
    classify,
    is_memory,
    name_is_text,
    shown,
    timezone,
)

log = logging.getLogger(__name__)


class Changes:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def before_change(self, rel: str) -> None:
        """``rel`` is about to be changed (truncated, written, replaced, removed): whatever it
        holds now is kept first, if it is not kept already."""
        if self.engine.history is not None:
            self.engine.history.before_change(rel)

    def file_changed(self, rel: str, who: Provenance = BESIDE, appended_from: int | None = None,
                     defer: bool = False, burst: bool = False) -> Outcome:
        """A file was written (closed, fsynced, renamed into place, changed beside the mount) by
        ``who``: its new content is kept as a version, then indexed.  ``appended_from``: nothing
        before this offset was written since its last version (see History.changed).  ``defer``:
        a big write gets its keyword rows only (Outcome.provisional; :meth:`complete` does the
        rest, see :mod:`memfs.index.bigwrites`).  ``burst``: the close is one of a burst (see
        :mod:`memfs.bursts`): a Markdown file of any size gets its keyword rows only.  A JSONL
        file keeps its one step: an append to it is read from its last chunk on, cheaper than
        its keyword rows, where its exact chunks made later would read it whole."""
        if burst and not classify(rel, self.engine.cfg.index.extra_paths).is_jsonl:
            defer_over: int | None = 0
        else:
            defer_over = threshold(self.engine.cfg.index.defer_mb) if defer else None
        # Under the path's lock: a watcher in this process that sees the write before its writer
        # got here waits, then finds the version kept already (not one of its own, "via watcher").
        with self.engine._indexing.held(rel):
            self.engine._after_change(lambda history: history.changed(rel, who, appended_from), rel)
            return self.engine._index_changed(rel, defer_over)

    def complete(self, rel: str) -> Outcome | None:
        """The exact chunks of a file indexed provisionally (None if it is not any more)."""
        return self.engine.complete(rel)

    def provisional_paths(self) -> list[str]:
        """Files whose exact chunks are still owed (see :mod:`memfs.index.bigwrites`); none while
        the index's server is away (the catch-up's reconcile completes them)."""
        try:
            return self.engine.store.provisional_paths()
        except IndexOffline as exc:
            self.engine.outage.down(exc)
            return []

    def file_removed(self, rel: str) -> bool:
        try:
            return self.engine.indexer.remove(rel)
        except IndexOffline as exc:
            self.engine._owed(rel, exc)
            return False

    def file_moved(self, old: str, new: str) -> Outcome:
        try:
            return self.engine.indexer.rename(old, new)
        except IndexOffline as exc:
            return self.engine._owed(new, exc)

    def path_removed(self, rel: str, who: Provenance = BESIDE) -> int:
        """A file or a whole directory is gone: drop every indexed file at or below ``rel``
        (their versions stay, with the deletion recorded)."""
        self.engine._after_change(lambda history: history.removed(rel, who), rel)
        try:
            paths = self.engine.store.paths_under(shown(rel))  # a name that is not UTF-8 is indexed as shown()
            # Under their locks: a completion reading one of them (the worker, a search) stores
            # nothing for it after this (its record gone, complete() finds nothing to do).
            with self.engine._indexing.held(*paths):
                for path in paths:
                    self.engine.indexer.remove(path)
        except IndexOffline as exc:
            self.engine._owed(rel, exc)
            return 0
        return len(paths)

    def path_moved(self, old: str, new: str, who: Provenance = BESIDE) -> list[Outcome]:
        """A file or directory was renamed: move indexed files along (no re-embedding), drop
        those that left the memory paths, index memory files that arrived.  In the history the
        old name is deleted and the new one has a new version."""
        self.engine._after_change(lambda history: history.moved(old, new, who), new)
        try:
            return self._index_moved(old, new)
        except IndexOffline as exc:
            return [self.engine._owed(new, exc)]

    def _index_moved(self, old: str, new: str) -> list[Outcome]:
        outcomes = []
        moved = set()
        if name_is_text(old) and name_is_text(new):
            for path in self.engine.store.paths_under(old):
                target = new + path[len(old):]
                with self.engine._indexing.held(path, target):  # see path_removed
                    outcomes.append(self.engine.indexer.rename(path, target))
                moved.add(target)
        else:
            # A name that is not UTF-8 is indexed as shown() and holds no chunks (it is skipped):
            # its rows go, and whatever arrived under the new name is indexed below.
            for path in self.engine.store.paths_under(shown(old)):
                self.engine.indexer.remove(path)
        full = self.engine.cfg.workspace / new
        candidates = [new] if not full.is_dir() else [
            (Path(d).relative_to(self.engine.cfg.workspace) / name).as_posix()
            for d, _, names in os.walk(full) for name in names
        ]
        for path in candidates:
            if path not in moved and is_memory(path, self.engine.cfg.index.extra_paths):
                outcomes.append(self.engine.indexer.index_file(path))
        return outcomes

    def versions(self, mode: str | None = None) -> Versions:
        """The history as ``mode`` may see it (see :mod:`memfs.versions`)."""
        privacy = self.engine.privacy(mode)
        writable = tuple(w.rstrip("/") for w in self.engine.cfg.privacy.shared_writable)

        def may_write(rel: str) -> bool:
            return not privacy.shared or any(rel == w or rel.startswith(w + "/") for w in writable)

        return Versions(self.engine.history, privacy, may_write, self.file_changed)

    def append(self, text: str, section: str | None = None, mode: str | None = None,
               now: dt.datetime | None = None, who: Provenance = BESIDE, create_section: bool = False) -> str:
        """Append Markdown to today's daily log (today in bundle.timezone, the day the context
        bundle reads), or to ``section`` of MEMORY.md (which must exist unless ``create_section``),
        and index it; returns the file's path.  Raises AppendError."""
        privacy = self.engine.privacy(mode)
        if section is not None and not section.strip():
            raise notes.AppendError("the section name is empty")
        if section:
            rel = self.engine._long_term_spelling("MEMORY.md")
        else:
            moment = (now or dt.datetime.now(dt.timezone.utc)).astimezone(timezone(self.engine.cfg.bundle.timezone))
            rel = f"memory/{moment.date().isoformat()}.md"
            text = notes.daily_entry(text, moment)
        with self.engine._indexing.held(rel):  # the write and its version as one, for a watcher (file_changed)
            if not privacy.hides(rel):
                self.before_change(rel)
            notes.append(self.engine.cfg.workspace, rel, text, section, privacy, tuple(self.engine.cfg.privacy.shared_writable),
                         create_section)
            self.file_changed(rel, who)
        return rel
