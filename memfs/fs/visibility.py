"""What a mount shows and what it refuses, by name: the names its virtual folders take at the
root, and, on a shared-mode mount, everything private (see :mod:`memfs.privacy`).

A shared mount hides private paths, names derived from them, symlinks and hard links that lead
to them, and anonymous temporary files it did not make itself (``sed -i``, Python's tempfile
and vim write a private file's new text under such names before renaming it into place, beside
the file).  It refuses with EACCES anything that would create, replace, move or link a private
path, a symlink that leads to one, and any change to ``.memfs.toml``, which decides what is
private.
"""

from __future__ import annotations

import errno
import logging
import os
import re
from pathlib import Path

from pyfuse3 import FUSEError

from memfs.privacy import Privacy, real_relative

log = logging.getLogger(__name__)

# What only the main mode may change: the workspace's own configuration.
PROTECTED = frozenset({".memfs.toml"})
# Anonymous temporary files of common tools: GNU sed -i, Python's tempfile, vim's write test,
# GLib's atomic save.
ANONYMOUS_TEMP = re.compile(r"^(?:sed[A-Za-z0-9]{6}|tmp[a-z0-9_]{8}|4913|\.goutputstream-[A-Z0-9]{6})$")


class MountView:
    def __init__(self, root: Path, privacy: Privacy, top_names: frozenset[str]) -> None:
        self.root = root
        self.privacy = privacy
        self.top_names = top_names
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
        if ANONYMOUS_TEMP.match(name) and rel not in self.own_temps:
            return True
        return st is not None and self.privacy.hides_entry(self.root, rel, st)

    # -- refusals (EACCES) ------------------------------------------------------------------------

    def _refuse(self, rel: str, why: str) -> None:
        log.warning("refused on a shared mount: %s %s", rel, why)
        raise FUSEError(errno.EACCES)

    def refuse_change(self, rel: str) -> None:
        """Writing to, truncating, removing or re-owning ``rel``."""
        if self.shared and rel in PROTECTED:
            self._refuse(rel, "is the workspace's configuration (only the main mode may change it)")

    def refuse_create(self, rel: str) -> None:
        """Making a new entry named ``rel`` (file, folder, node, symlink or hard link)."""
        if not self.shared:
            return
        self.refuse_change(rel)
        if self.privacy.is_private(rel):
            self._refuse(rel, "is a private path (privacy.private_paths)")

    def refuse_symlink(self, rel: str, target: bytes) -> None:
        """A symlink named ``rel`` pointing at ``target`` (resolved as the kernel would)."""
        self.refuse_create(rel)
        if not self.shared:
            return
        where = os.fsdecode(target)
        base = self.root / rel.rpartition("/")[0]
        resolved = real_relative(self.root, where if os.path.isabs(where) else base / where)
        if resolved is not None and self.privacy.is_private(resolved):
            self._refuse(rel, f"would lead to {resolved}, a private path")

    def refuse_move(self, old: str, new: str, exchange: bool = False) -> None:
        """A rename: neither end, nor anything below a moved folder at either place, may be
        private (with RENAME_EXCHANGE both trees move)."""
        if not self.shared:
            return
        for rel in (old, new):
            self.refuse_create(rel)
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
        if self.shared and ANONYMOUS_TEMP.match(rel.rpartition("/")[2]):
            self.own_temps.add(rel)

    def gone(self, rel: str) -> None:
        self.own_temps.discard(rel)

    def moved(self, old: str, new: str) -> None:
        if old in self.own_temps:
            self.own_temps.discard(old)
            self.created(new)
