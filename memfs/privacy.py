"""What is private, and what each mode may see.

``privacy.private_paths`` lists paths or glob patterns (``*``, ``?``, ``[...]``): a pattern
without ``/`` matches a file or folder of that name at any depth; a pattern with ``/`` is
anchored at the workspace root (``**/`` in front: at any depth).  A folder that matches covers
everything below it.  Always private, whatever the list says: the long-term file (MEMORY.md,
memory.md) and version-control folders (``.git`` and the like hold the history of every file).

The ``main`` mode sees everything.  Every other mode is shared: for it a private path does not
exist, through any route (files on the mount, search results, the context bundle, status,
``memfs get``).  So that copies of private text do not slip through under other names, a shared
mode also does not see

- names tools derive from a private file's name (``.MEMORY.md.swp``, ``MEMORY.md~``,
  ``#MEMORY.md#``, ``MEMORY.md.XXXXXX`` of an atomic save, ``MEMORY.md.bak``), in any component;
- a symlink that leads to a private file or out of the workspace, and a file with more than one
  name (a hard link could be a private file's other name).

Symlinks are followed one ``readlink`` at a time inside the workspace (:func:`resolve_within`),
never through a path outside it: a link into a FUSE mount is judged, not entered.  Files are
judged by what was opened, not by what a path said a moment before (:func:`read_visible`).
"""

from __future__ import annotations

import errno
import fnmatch
import functools
import os
import re
import stat
from collections.abc import Iterable, Sequence
from pathlib import Path

from memfs import longpath
from memfs.config import MAIN_MODE
from memfs.workspace import LONG_TERM_NAMES

_GLOB = frozenset("*?[")
# Version-control folders: their objects hold every version of every file.
VCS_DIRS = (".git", ".hg", ".svn", ".bzr", ".jj")
ALWAYS_PRIVATE = (*LONG_TERM_NAMES, *VCS_DIRS)
# Names tools make from the name of the file they save: vim's swap files, emacs auto-save and
# lock files, LibreOffice's lock.
_DERIVED = (
    re.compile(r"^\.(?P<name>.+)\.sw[a-p]$"),
    re.compile(r"^#(?P<name>.+)#$"),
    re.compile(r"^\.#(?P<name>.+)$"),
    re.compile(r"^\.~lock\.(?P<name>.+)#$"),
)
# After a private name, what an atomic save, a backup or a numbered copy appends.
_SUFFIX_START = re.compile(r"^(?:$|[.~_#-]|\d)")
MAX_LINK_HOPS = 40


class Privacy:
    def __init__(self, patterns: Sequence[str], mode: str) -> None:
        self.mode = mode
        self.shared = mode != MAIN_MODE
        patterns = [*ALWAYS_PRIVATE, *patterns]
        self.names = frozenset(p for p in patterns if "/" not in p and not _GLOB & set(p))
        self.name_globs = tuple(p for p in patterns if "/" not in p and _GLOB & set(p))
        anchored = [p for p in patterns if "/" in p]
        self.anchored = tuple(p.removeprefix("**/") for p in anchored)
        self.deep = tuple(p.removeprefix("**/") for p in anchored if p.startswith("**/"))
        # Asked for every name a shared mount looks up: remember the answers.
        self.is_private = functools.lru_cache(maxsize=16384)(self._is_private)

    def _name_is_private(self, name: str) -> bool:
        """A path component: a private name, or one a tool made from a private name."""
        if name in self.names or any(fnmatch.fnmatchcase(name, g) for g in self.name_globs):
            return True
        bases = [name.lstrip(".#"), name.removeprefix(".~lock.")]
        bases += [m["name"] for d in _DERIVED if (m := d.match(name))]
        for base in bases:
            for private in self.names:
                if base.startswith(private) and _SUFFIX_START.match(base[len(private):]):
                    return True
            if any(fnmatch.fnmatchcase(base, g) for g in self.name_globs):
                return True
        return False

    def _is_private(self, rel: str) -> bool:
        parts = [p for p in rel.strip("/").split("/") if p]
        if not parts:
            return False
        if any(self._name_is_private(part) for part in parts):
            return True
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(fnmatch.fnmatchcase(prefix, p) for prefix in prefixes for p in self.anchored):
            return True
        for start in range(1, len(parts)):
            tail = parts[start:]
            for end in range(1, len(tail) + 1):
                if any(fnmatch.fnmatchcase("/".join(tail[:end]), p) for p in self.deep):
                    return True
        return False

    def hides(self, rel: str) -> bool:
        """Whether ``rel`` (workspace-relative) must not exist for this mode, by its name."""
        return self.shared and self.is_private(rel)

    def hides_entry(self, workspace: Path, rel: str, st: os.stat_result) -> bool:
        """Whether a directory entry (its lstat) must not exist for this mode: by name, as a
        symlink that leads to a private file or out of the workspace, or as a file with more
        than one name."""
        if not self.shared:
            return False
        if self.is_private(rel):
            return True
        if stat.S_ISLNK(st.st_mode):
            target = resolve_within(workspace, rel)
            return target is None or self.is_private(target)
        return stat.S_ISREG(st.st_mode) and st.st_nlink > 1

    def hidden_among(self, paths: Iterable[str]) -> frozenset[str]:
        """The paths of ``paths`` this mode must not see, by name."""
        if not self.shared:
            return frozenset()
        return frozenset(p for p in paths if self.is_private(p))


def resolve_within(workspace: Path, rel: str) -> str | None:
    """Where ``workspace/rel`` leads, following symlinks one readlink at a time, relative to the
    workspace; None when it leaves the workspace or loops.  Nothing outside the workspace is
    ever looked at (a link into a FUSE mount, even this memfs's own, is judged, not entered),
    and a missing component ends the walk: the rest is taken as written."""
    root = os.path.realpath(workspace)
    pending = [p for p in rel.split("/") if p not in ("", ".")]
    resolved: list[str] = []
    hops = 0
    while pending:
        part = pending.pop(0)
        if part == "..":
            if not resolved:
                return None
            resolved.pop()
            continue
        candidate = os.path.join(root, *resolved, part)
        try:
            st = longpath.lstat(candidate)
        except OSError:  # missing: the rest of the path is taken as written
            for rest in [part, *pending]:
                if rest != "..":
                    resolved.append(rest)
                elif not resolved:
                    return None
                else:
                    resolved.pop()
            return "/".join(resolved)
        if not stat.S_ISLNK(st.st_mode):
            resolved.append(part)
            continue
        hops += 1
        if hops > MAX_LINK_HOPS:
            return None
        with longpath.reach(candidate) as short:
            target = os.readlink(short)
        if os.path.isabs(target):
            target = os.path.normpath(target)
            if target != root and not target.startswith(root + "/"):
                return None
            resolved = []
            target = target[len(root) + 1 :]
        pending = [p for p in target.split("/") if p not in ("", ".")] + pending
    return "/".join(resolved)


def _fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


DELETED = " (deleted)"  # what /proc/self/fd adds to the name of a file that has no name left


def opened_relative(workspace: Path, fd: int) -> str | None:
    """Where an open file really is, relative to the workspace (None outside it)."""
    opened = _fd_path(fd)
    if opened.endswith(DELETED) and os.fstat(fd).st_nlink == 0:
        opened = opened[: -len(DELETED)]  # replaced or removed since: judged by the name it had
    root = os.path.realpath(workspace)
    return opened[len(root) + 1 :] if opened.startswith(root + "/") else None


def open_resolved(workspace: Path, resolved: str, flags: int) -> int:
    """Open ``resolved`` (what :func:`resolve_within` gave) in the workspace.  Past PATH_MAX and
    with ``O_NOFOLLOW``, no component at all is followed (see :func:`opened_at`)."""
    root = os.path.realpath(workspace)
    full = os.path.join(root, resolved)
    if longpath.fits(full):
        return os.open(full, flags)
    if flags & os.O_NOFOLLOW:
        return longpath.open_nofollow(root, resolved, flags)
    with longpath.reach(full) as short:
        return os.open(short, flags)


def opened_at(workspace: Path, fd: int, resolved: str) -> bool:
    """Whether ``fd`` (from :func:`open_resolved` with ``O_NOFOLLOW``) is the file at
    ``resolved`` now.  Past PATH_MAX the kernel cannot name what is open
    (``/proc/self/fd`` says ENAMETOOLONG): the open followed no symlink on the way, and what is
    at that name now must still be the file that was opened."""
    try:
        return opened_relative(workspace, fd) == resolved
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
    try:
        now = longpath.lstat(os.path.join(os.path.realpath(workspace), resolved))
    except OSError:
        return False
    st = os.fstat(fd)
    return (now.st_dev, now.st_ino) == (st.st_dev, st.st_ino)


def read_visible(workspace: Path, rel: str, privacy: Privacy) -> bytes:
    """The bytes of a regular workspace file, judged by what was actually opened:
    FileNotFoundError if it is missing, leads out of the workspace (a symlink to ~/.ssh/id_rsa
    is not memory, in any mode: the one rule of `memfs get`, the bundle and the mount's virtual
    files), or is private for ``privacy`` (the same answer, so a shared reader learns nothing,
    not even that a private folder exists); IsADirectoryError for a folder.  A FIFO or device is
    never waited on."""
    resolved = resolve_within(workspace, rel)
    if resolved is None or (privacy.shared and (privacy.is_private(rel) or privacy.is_private(resolved))):
        raise FileNotFoundError(rel)
    target = resolved
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW
    try:
        fd = open_resolved(workspace, target, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # swapped for a symlink since it was resolved
            raise FileNotFoundError(rel) from None
        raise
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise IsADirectoryError(rel)
        if not stat.S_ISREG(st.st_mode):
            raise FileNotFoundError(rel)
        if (privacy.shared and st.st_nlink > 1) or not opened_at(workspace, fd, target):
            raise FileNotFoundError(rel)
        chunks = []
        while block := os.read(fd, 1 << 20):
            chunks.append(block)
        return b"".join(chunks)
    finally:
        os.close(fd)
