"""What a mount shows and what it lets change: the names its virtual folders take at the root,
and, on a shared-mode mount, everything private (see :mod:`memfs.privacy`).

A shared mount hides private paths, names derived from them, symlinks that lead to them or out of
the workspace, files with more than one name, and anonymous temporary files it did not make
itself (``sed -i``, Python's tempfile, perl -i and vim write a file's new text under such names
before renaming it into place).

It changes only what a group-chat agent has to write: the folders of ``privacy.shared_writable``
(``memory/`` and ``clawgpt-memory/`` by default).  Everything else, among it AGENTS.md and the
other instructions the main agent reads, ``.memfs.toml`` (which decides what is private) and
``.git`` (whose hooks run as the main user), is read-only to it: EACCES.  Inside those folders it
may not create, replace, move or link a private path, make a symlink that leads to one or out of
the workspace, or write to a file with more than one name.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import time
from pathlib import Path

from pyfuse3 import FUSEError

from memfs.config import CONFIG_FILE
from memfs.privacy import Privacy, opened_relative, resolve_within
from memfs.workspaceid import ID_FILE

log = logging.getLogger(__name__)

# Anonymous temporary files of common tools: GNU sed -i, Python's tempfile, vim's write test,
# GLib's atomic save, python-atomicwrites.
ANONYMOUS_TEMP = re.compile(
    r"^(?:sed[A-Za-z0-9]{6}|tmp[a-z0-9_]{8}(?:\.\w+)?|4913|\.goutputstream-[A-Z0-9]{6}|\.___atomic_write.*)$")
# perl -i and others use eight random characters: such a name is hidden only while it is fresh.
RANDOM_NAME = re.compile(r"^[A-Za-z0-9]{8}$")
FRESH_S = 120.0
WORKSPACE_FILES = (CONFIG_FILE, ID_FILE)


class MountView:
    def __init__(self, root: Path, privacy: Privacy, top_names: frozenset[str], writable: list[str]) -> None:
        self.root = root
        self.privacy = privacy
        self.top_names = top_names
        self.writable = tuple(w.strip("/") for w in writable)
        # Anonymous temporary files made through this mount (ours to see until they go).
        self.own_temps: set[str] = set()

    @property
    def shared(self) -> bool:
        return self.privacy.shared

    def hidden(self, rel: str, st: os.stat_result | None = None) -> bool:
        """Whether an entry of the workspace must not exist on this mount."""
        if rel in self.top_names:
            return True  # the virtual folder answers for this name
        if not self.shared:
            return False
        if self.privacy.is_private(rel):
            return True
        name = rel.rpartition("/")[2]
        if rel not in self.own_temps:
            if ANONYMOUS_TEMP.match(name):
                return True
            if st is not None and RANDOM_NAME.match(name) and time.time() - st.st_mtime < FRESH_S:
                return True
        return st is not None and self.privacy.hides_entry(self.root, rel, st)

    def opened_private(self, fd: int, st: os.stat_result) -> bool:
        """Whether an open file is, by now, something a shared mount must not read: it was
        renamed onto a private path or out of the workspace, or it has another name."""
        if not self.shared:
            return False
        where = opened_relative(self.root, fd)
        return where is None or self.privacy.is_private(where) or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1)

    # -- refusals (EACCES) ------------------------------------------------------------------------

    def _refuse(self, rel: str, why: str) -> None:
        log.warning("refused on a shared mount: %s %s", rel, why)
        raise FUSEError(errno.EACCES)

    def _writable(self, rel: str) -> bool:
        return any(rel == w or rel.startswith(w + "/") for w in self.writable)

    def refuse_change(self, rel: str) -> None:
        """Writing to, truncating, re-owning or removing ``rel``."""
        if not self.shared:
            return
        if not self._writable(rel):
            self._refuse(rel, f"is outside the folders a shared mount may change ({', '.join(self.writable)})")
        if self.privacy.is_private(rel):
            self._refuse(rel, "is a private path (privacy.private_paths)")

    def refuse_create(self, rel: str) -> None:
        """Making a new entry named ``rel`` (file, folder, node, symlink or hard link).  A
        configuration file anywhere is refused too: a folder holding one would read as a
        workspace of its own to a command run there."""
        self.refuse_change(rel)
        if self.shared and rel.rpartition("/")[2] in WORKSPACE_FILES:
            self._refuse(rel, "is a memfs configuration file name")

    def refuse_symlink(self, rel: str, target: bytes) -> None:
        """A symlink named ``rel`` pointing at ``target``, judged as the kernel would follow it
        but without ever looking outside the workspace (a target in this very mount would
        otherwise make the daemon wait for itself)."""
        self.refuse_create(rel)
        if not self.shared:
            return
        where = os.fsdecode(target)
        if os.path.isabs(where):
            root = os.path.realpath(self.root)
            where = os.path.normpath(where)
            if where != root and not where.startswith(root + "/"):
                self._refuse(rel, f"would lead out of the workspace ({where})")
            leads = resolve_within(self.root, where[len(root) + 1 :])
        else:
            leads = resolve_within(self.root, os.path.join(rel.rpartition("/")[0], where))
        if leads is None:
            self._refuse(rel, "would lead out of the workspace")
        elif self.privacy.is_private(leads):
            self._refuse(rel, f"would lead to {leads}, a private path")

    def refuse_link(self, sources: list[str], new: str) -> None:
        """A hard link: never on a shared mount (EPERM, as on a file system without them).  A
        file with more than one name may be a private file's other name, so a shared view hides
        every such file: a link made here would make both of its names vanish."""
        if not self.shared:
            return
        log.warning("refused on a shared mount: a hard link %s -> %s (a file with two names is hidden from a "
                    "shared view; copy it instead)", new, ", ".join(sources) or "?")
        raise FUSEError(errno.EPERM)

    def refuse_move(self, old: str, new: str, exchange: bool = False) -> None:
        """A rename: both ends must be changeable, and nothing below a moved folder may be, or
        become, private (with RENAME_EXCHANGE both trees move)."""
        if not self.shared:
            return
        for rel in (old, new):
            self.refuse_change(rel)
        for rel in (new, old) if exchange else (new,):
            if rel.rpartition("/")[2] in WORKSPACE_FILES:
                self._refuse(rel, "is a memfs configuration file name")
        moves = [(old, new), (new, old)] if exchange else [(old, new)]
        for source, target in moves:
            full = self.root / source
            if not full.is_dir() or full.is_symlink():
                continue
            for below in self._tree(source):
                if self.privacy.is_private(below):
                    self._refuse(source, f"holds {below}, a private path")
                moved = target + below[len(source):]
                if self.privacy.is_private(moved):
                    self._refuse(source, f"would make {moved} private")

    def _tree(self, rel: str) -> list[str]:
        found = []
        for dirpath, dirnames, filenames in os.walk(self.root / rel):
            base = os.path.relpath(dirpath, self.root)
            found += [f"{base}/{name}" for name in dirnames + filenames]
        return found

    # -- what this mount made ---------------------------------------------------------------------

    def created(self, rel: str) -> None:
        name = rel.rpartition("/")[2]
        if self.shared and (ANONYMOUS_TEMP.match(name) or RANDOM_NAME.match(name)):
            self.own_temps.add(rel)

    def gone(self, rel: str) -> None:
        self.own_temps.discard(rel)

    def moved(self, old: str, new: str) -> None:
        if old in self.own_temps:
            self.own_temps.discard(old)
            self.created(new)
