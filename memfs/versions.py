"""The history of the memory files as one reader sees it: the privacy of its mode applied to
every listing, version, diff and restore.  ``Memory.versions(mode)`` hands one out; the CLI,
the MCP server and the mount's ``history/`` folder all read through it, so a path a mode may not
see has no history for it either (the same "no history" as a path that never had one).
Forgetting versions is for the main mode only: a reader who may not see every version may
neither remove nor probe one (``--containing`` would tell whether a private version holds a text).
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Callable

from memfs.history.keeper import Forgetting, History, NoSuchVersion
from memfs.history.provenance import Provenance
from memfs.history.store import FAILURES, SEVERAL_NAMES, Forgotten, HistoryError, Version
from memfs.privacy import Privacy

log = logging.getLogger(__name__)


class VersionsError(ValueError):
    """A history request that cannot be answered, with the message to show."""


@dataclasses.dataclass
class Versions:
    history: History | None
    privacy: Privacy
    may_write: Callable[[str], bool]
    reindex: Callable[[str, Provenance], object]

    def _history(self) -> History:
        if self.history is None:
            raise VersionsError("history is off (history.enabled = false)")
        return self.history

    def _private_digests(self) -> frozenset[str]:
        """Contents a private file ever had (or a file with hard links, which a shared mount
        does not show either).  A reader who may not see private files does not see them under
        a public name either: ``mv MEMORY.md memory/x.md`` and back would otherwise leave
        MEMORY.md's text in memory/x.md's history for as long as it is kept, and
        ``ln MEMORY.md memory/x.md`` would give memory/x.md versions of MEMORY.md's text."""
        if self.history is None or not self.privacy.shared:
            return frozenset()
        by_path = self.history.store.digests_by_path()
        return frozenset().union(*(d for p, d in by_path.items() if p == SEVERAL_NAMES or self.privacy.hides(p)))

    def visible(self, rel: str) -> bool:
        return not self.privacy.hides(rel) and self._has_public_version(rel, self._private_digests())

    def _has_public_version(self, rel: str, private: frozenset[str]) -> bool:
        if not private or self.history is None:
            return True
        kept = self.history.store.digests_by_path().get(rel)
        return kept is None or not kept <= private

    def paths(self) -> list[str]:
        """Every path with versions this reader may see (deleted files included)."""
        if self.history is None:
            return []
        private = self._private_digests()
        return self.history.paths(lambda p: not self.privacy.hides(p) and self._has_public_version(p, private))

    def list(self, rel: str) -> list[Version]:
        """The versions of ``rel``, oldest first; VersionsError when it has none to show."""
        history = self._history()
        private = self._private_digests()
        found = [v for v in history.versions(rel) if v.sha256 not in private] if not self.privacy.hides(rel) else []
        if not found:
            raise VersionsError(f"{rel}: no history (not a memory file, or never changed while memfs ran)")
        return found

    def get(self, rel: str, name: str) -> Version:
        history = self._history()
        if not self.privacy.hides(rel):  # the usual case, by its exact name: one row, not the list
            found = history.store.version(rel, name)
            if found is not None and found.sha256 not in self._private_digests():
                return found
        versions = self.list(rel)
        for version in versions:
            if name in (version.name, os.path.splitext(version.name)[0]):  # the extension may be left off
                return version
        raise VersionsError(f"{rel} has no version {name!r}; `memfs history {rel}` lists them "
                            f"(newest: {versions[-1].name})")

    def content(self, version: Version) -> bytes:
        try:
            return self._history().content(version)
        except HistoryError as exc:
            raise VersionsError(str(exc)) from None

    def previous(self, version: Version) -> Version | None:
        earlier = [v for v in self.list(version.path) if v.id < version.id]
        return earlier[-1] if earlier else None

    def diff(self, rel: str, older: str | None, newer: str | None) -> str:
        """From version ``older`` (default: the one before ``newer``) to version ``newer``
        (default: the file as it is now)."""
        history = self._history()
        new = self.get(rel, newer) if newer else None
        if older:
            old: Version | None = self.get(rel, older)
        elif new is not None:
            old = self.previous(new)
        else:
            old = self.list(rel)[-1]
        return history.diff(rel, old, new)

    def deleted(self) -> list[tuple[str, int]]:
        if self.history is None:
            return []
        private = self._private_digests()
        return [(p, t) for p, t in self.history.store.deleted_paths()
                if not self.privacy.hides(p) and self._has_public_version(p, private)]

    def deleted_at(self, rel: str) -> int | None:
        if self.history is None or not self.visible(rel):
            return None
        return self.history.store.deleted_at(rel)

    def restore(self, rel: str, name: str, who: Provenance) -> Version | None:
        """Put version ``name`` back as ``rel`` and index it; None when the file holds it already."""
        version = self.get(rel, name)
        if not self.may_write(rel):
            raise VersionsError(f"{self.privacy.mode} mode may not change {rel} (privacy.shared_writable)")
        try:
            restored = self._history().restore(rel, version, who)
        except (HistoryError, NoSuchVersion, OSError) as exc:
            raise VersionsError(f"could not restore {rel}: {exc}") from None
        self.reindex(rel, who)
        return restored

    # -- forgetting on purpose -----------------------------------------------------------------

    def _main_only(self) -> History:
        if self.privacy.shared:
            raise VersionsError(f"{self.privacy.mode} mode may not forget versions: only the main mode, which "
                                "sees every version, may (--mode main, from outside any shared-mode mount)")
        return self._history()

    def to_forget(self, rel: str | None, names: list[str], text: str | None) -> list[Version]:
        """What forgetting would take, oldest first: versions ``names`` of ``rel``, or (with
        ``text``) every version of any file, deleted or private ones included, whose bytes
        contain ``text``."""
        history = self._main_only()
        if text is not None:
            try:
                return history.containing(text.encode("utf-8", "surrogateescape"))
            except HistoryError as exc:
                raise VersionsError(str(exc)) from None
        if not rel or not names:
            raise VersionsError("name a file and its version (memfs history forget PATH VERSION)")
        chosen = {v.id: v for v in (self.get(rel, name) for name in names)}
        return [chosen[i] for i in sorted(chosen)]

    def forget(self, versions: list[Version], who: Provenance, text: str | None = None) -> Forgetting:
        history = self._main_only()
        try:
            return history.forget(versions, who, text.encode("utf-8", "surrogateescape") if text else None)
        except FAILURES as exc:
            raise VersionsError(f"could not forget: {exc}") from None

    def forgotten(self, rel: str) -> list[Forgotten]:
        """The versions of ``rel`` forgotten on purpose, for the main mode; to a shared reader
        they are simply gone, like pruned ones (a record may be of a version it never saw)."""
        if self.history is None or self.privacy.shared:
            return []
        return self.history.forgotten(rel)
