"""What is private, and what each mode may see.

``privacy.private_paths`` lists paths or glob patterns (``*``, ``?``, ``[...]``): a pattern
without ``/`` matches a file or folder of that name at any depth; a pattern with ``/`` is
anchored at the workspace root (``**/`` in front: at any depth).  A folder that matches covers
everything below it.  The long-term file (MEMORY.md, or memory.md) is always private.

The ``main`` mode sees everything.  Every other mode is shared: for it a private path does not
exist, through any route (files on the mount, search results, the context bundle, status,
``memfs get``).  So that copies of private text do not slip through under other names, a shared
mode also does not see

- names an editor or a tool derives from a private file: ``.MEMORY.md.swp``, ``MEMORY.md~``,
  ``#MEMORY.md#``, ``.#MEMORY.md``, ``MEMORY.md.bak`` / ``.orig`` / ``.tmp`` / ``.save``;
- a symlink that leads to a private file (wherever it points from), and a hard link to one.

Files are judged by what was opened, not by what a path said a moment before
(:func:`read_visible`), so swapping a symlink in between cannot smuggle a private file out.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import re
import stat
import threading
import time
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from memfs.config import MAIN_MODE
from memfs.workspace import LONG_TERM_NAMES

_GLOB = frozenset("*?[")
# Names tools derive from the file they save: vim's swap files, backups, emacs auto-save and
# lock files, nano's save file, patch's .orig, LibreOffice's lock.
_DERIVED = (
    re.compile(r"^\.(?P<name>.+)\.sw[a-p]$"),
    re.compile(r"^(?P<name>.+)~$"),
    re.compile(r"^(?P<name>.+)\.(?:bak|orig|tmp|save|swp|rej)$"),
    re.compile(r"^#(?P<name>.+)#$"),
    re.compile(r"^\.#(?P<name>.+)$"),
    re.compile(r"^\.~lock\.(?P<name>.+)#$"),
)
# How long a computed set of private inodes is trusted (hard links are rare; the set is only
# looked at for files with more than one link).
INODE_CACHE_S = 1.0


class Privacy:
    def __init__(self, patterns: Sequence[str], mode: str) -> None:
        self.mode = mode
        self.shared = mode != MAIN_MODE
        patterns = [*LONG_TERM_NAMES, *patterns]
        self.anywhere = frozenset(p for p in patterns if "/" not in p and not _GLOB & set(p))
        self.anywhere_globs = tuple(p for p in patterns if "/" not in p and _GLOB & set(p))
        anchored = [p for p in patterns if "/" in p]
        self.anchored = tuple(p.removeprefix("**/") for p in anchored)
        self.deep = tuple(p.removeprefix("**/") for p in anchored if p.startswith("**/"))
        # Asked for every name a shared mount looks up: remember the answers.
        self.is_private = functools.lru_cache(maxsize=16384)(self._is_private)
        self._inodes: tuple[float, Path | None, frozenset[tuple[int, int]]] = (0.0, None, frozenset())
        self._inode_lock = threading.Lock()

    def _matches(self, rel: str) -> bool:
        parts = rel.split("/")
        for part in parts:
            if part in self.anywhere or any(fnmatch.fnmatchcase(part, g) for g in self.anywhere_globs):
                return True
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        for prefix in prefixes:
            if any(fnmatch.fnmatchcase(prefix, p) for p in self.anchored):
                return True
        for start in range(1, len(parts)):
            tail = parts[start:]
            for end in range(1, len(tail) + 1):
                if any(fnmatch.fnmatchcase("/".join(tail[:end]), p) for p in self.deep):
                    return True
        return False

    def _is_private(self, rel: str) -> bool:
        rel = rel.strip("/")
        if not rel:
            return False
        if self._matches(rel):
            return True
        folder, _, name = rel.rpartition("/")
        for derived in _DERIVED:
            match = derived.match(name)
            if match and self._matches(f"{folder}/{match['name']}" if folder else match["name"]):
                return True
        return False

    def hides(self, rel: str) -> bool:
        """Whether ``rel`` (workspace-relative) must not exist for this mode, by its name."""
        return self.shared and self.is_private(rel)

    def private_inodes(self, workspace: Path) -> frozenset[tuple[int, int]]:
        """(st_dev, st_ino) of the private files that have other names (hard links); cached
        briefly, since a hard link to MEMORY.md made a moment ago must not stay visible long."""
        with self._inode_lock:
            when, root, keys = self._inodes
            if root == workspace and time.monotonic() - when < INODE_CACHE_S:
                return keys
            found = set()
            for dirpath, dirnames, filenames in os.walk(workspace):
                base = os.path.relpath(dirpath, workspace)
                for name in filenames:
                    rel = name if base == "." else f"{base}/{name}"
                    if not self.is_private(rel):
                        continue
                    try:
                        st = os.lstat(os.path.join(dirpath, name))
                    except OSError:
                        continue
                    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
                        found.add((st.st_dev, st.st_ino))
            self._inodes = (time.monotonic(), workspace, frozenset(found))
            return self._inodes[2]

    def is_private_file(self, workspace: Path, rel: str, st: os.stat_result, real: str | None) -> bool:
        """Whether an opened (or lstat'ed) file is private: by its name, by where it really is
        (``real``: its path relative to the workspace after symlinks, None if outside), or as a
        hard link to a private file."""
        if self.is_private(rel) or (real is not None and self.is_private(real)):
            return True
        return stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and (st.st_dev, st.st_ino) in self.private_inodes(workspace)

    def hides_entry(self, workspace: Path, rel: str, st: os.stat_result) -> bool:
        """Whether a directory entry (its lstat) must not exist for this mode: by name, as a
        symlink that leads to a private file, or as a hard link to one."""
        if not self.shared:
            return False
        if self.is_private(rel):
            return True
        if stat.S_ISLNK(st.st_mode):
            target = real_relative(workspace, workspace / rel)
            return target is not None and self.is_private(target)
        return stat.S_ISREG(st.st_mode) and st.st_nlink > 1 and (st.st_dev, st.st_ino) in self.private_inodes(workspace)

    def hidden_among(self, paths: Iterable[str]) -> frozenset[str]:
        """The paths of ``paths`` this mode must not see, by name."""
        if not self.shared:
            return frozenset()
        return frozenset(p for p in paths if self.is_private(p))


def real_relative(workspace: Path, path: Path | str) -> str | None:
    """Where ``path`` really is (symlinks followed), relative to the workspace; None outside."""
    try:
        real = os.path.realpath(path)
    except OSError:
        return None
    root = os.path.realpath(workspace)
    if real == root:
        return ""
    if not real.startswith(root + "/"):
        return None
    return real[len(root) + 1 :]


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def read_visible(workspace: Path, rel: str, privacy: Privacy) -> bytes:
    """The bytes of a workspace file, judged by what was actually opened: FileNotFoundError if
    it is missing or private for ``privacy`` (the same answer, so a shared reader learns
    nothing), IsADirectoryError for a folder."""
    fd = os.open(workspace / rel, os.O_RDONLY | os.O_CLOEXEC)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(rel)
        if privacy.shared:
            opened = _fd_path(fd)
            root = os.path.realpath(workspace)
            real = opened[len(root) + 1 :] if opened.startswith(root + "/") else None
            if privacy.is_private_file(workspace, rel, st, real):
                raise FileNotFoundError(rel)
        chunks = []
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
        return b"".join(chunks)
    finally:
        os.close(fd)


def opened_relative(workspace: Path, fd: int) -> str | None:
    """Where an open file really is, relative to the workspace (None outside it)."""
    opened = _fd_path(fd)
    root = os.path.realpath(workspace)
    return opened[len(root) + 1 :] if opened.startswith(root + "/") else None
