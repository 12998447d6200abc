"""Reaching a path longer than PATH_MAX, for every layer that opens workspace files.

A memory file may sit at a relative path of up to PATH_MAX - 1 bytes (written through the mount,
or beside it with ``*at`` calls); ``workspace + "/" + path`` is then longer than the kernel takes
in one system call (ENAMETOOLONG).  Such a path is reached through its folder: the folder is
opened a piece at a time (``O_PATH``, each piece shorter than PATH_MAX) and the file is named
``/proc/self/fd/<folder>/<name>``, which every path-taking system call accepts, so callers keep
using plain paths.  Short paths, nearly all of them, are used as they are.

The kernel cannot name such a file either: ``readlink("/proc/self/fd/N")`` of a descriptor
opened on it is ENAMETOOLONG, so :func:`open_nofollow` walks a path one component at a time
without following a symlink anywhere, which is what that readlink is used to check.

Standard library only: the indexer, the history, ``Memory`` and the FUSE layer all use it.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator

PATH_MAX = 4096  # Linux's, including the terminating NUL: a usable path is at most 4095 bytes
FOLDER_FLAGS = os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC

StrPath = str | bytes | os.PathLike


def fits(path: StrPath) -> bool:
    """Whether the kernel takes ``path`` in one system call."""
    return len(os.fsencode(path)) < PATH_MAX


def open_folder(path: bytes) -> int:
    """An ``O_PATH`` descriptor of the folder ``path`` (absolute, any length), opened a piece at
    a time; symlinks on the way are followed as the kernel would follow them in one call."""
    fd = os.open(b"/", FOLDER_FLAGS)
    rest = path.lstrip(b"/")
    try:
        while rest:
            if len(rest) < PATH_MAX:
                piece, rest = rest, b""
            else:
                cut = rest.rfind(b"/", 0, PATH_MAX - 1)  # names are at most NAME_MAX (255): there is one
                piece, rest = rest[:cut], rest[cut + 1 :]
            inner = os.open(piece, FOLDER_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = inner
    except BaseException:
        os.close(fd)
        raise
    return fd


@contextlib.contextmanager
def reach(path: StrPath) -> Iterator[str]:
    """``path`` itself if the kernel takes it, else an equivalent short path through an open
    descriptor of its folder, valid for the ``with`` block."""
    if fits(path):
        yield os.fsdecode(path)
        return
    folder, _, name = os.path.abspath(os.fsencode(path)).rpartition(b"/")
    fd = open_folder(folder or b"/")
    try:
        yield os.fsdecode(b"/proc/self/fd/%d/%s" % (fd, name))
    finally:
        os.close(fd)


def lstat(path: StrPath) -> os.stat_result:
    with reach(path) as short:
        return os.lstat(short)


def stat_of(path: StrPath) -> os.stat_result:
    with reach(path) as short:
        return os.stat(short)


def is_file(path: StrPath) -> bool:
    """``Path.is_file`` that also answers for long paths (and says False, not raises, for any
    path it cannot look at)."""
    try:
        return stat.S_ISREG(stat_of(path).st_mode)
    except (OSError, ValueError):
        return False


def exists(path: StrPath) -> bool:
    try:
        stat_of(path)
    except (OSError, ValueError):
        return False
    return True


def lexists(path: StrPath) -> bool:
    try:
        lstat(path)
    except (OSError, ValueError):
        return False
    return True


def open_nofollow(root: StrPath, rel: str, flags: int) -> int:
    """Open ``root/rel`` (``root`` an absolute folder, followed as it is) without following a
    symlink in any component of ``rel``: ELOOP or ENOTDIR where one is.  The file opened is
    then the one at that name, which ``/proc/self/fd`` cannot tell for a path this long."""
    parts = [p for p in rel.split("/") if p]
    if not parts or any(p in (".", "..") for p in parts):
        raise OSError(22, f"not a plain relative path: {rel[:200]}")
    fd = open_folder(os.fsencode(root))
    try:
        for part in parts[:-1]:
            inner = os.open(part, FOLDER_FLAGS | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        return os.open(parts[-1], flags | os.O_NOFOLLOW, dir_fd=fd)
    finally:
        os.close(fd)


def realpath(path: StrPath) -> str:
    """``os.path.realpath`` (not strict: a missing component ends the resolving) that also
    resolves symlinks past PATH_MAX, where ``os.path.realpath`` takes every component as a
    plain name because it cannot lstat it."""
    text = os.path.abspath(os.fsdecode(path))
    if fits(text):
        return os.path.realpath(text)
    pending = [p for p in text.split("/") if p]
    done = "/"
    hops = 0
    while pending:
        part = pending.pop(0)
        if part in (".", ""):
            continue
        if part == "..":
            done = os.path.dirname(done)
            continue
        candidate = os.path.join(done, part)
        try:
            st = lstat(candidate)
        except OSError:
            return os.path.join(candidate, *pending)
        if not stat.S_ISLNK(st.st_mode):
            done = candidate
            continue
        hops += 1
        if hops > 40:
            raise OSError(40, "too many levels of symbolic links", text[:200])  # ELOOP
        with reach(candidate) as short:
            target = os.readlink(short)
        if target.startswith("/"):
            done = "/"
        pending = target.split("/") + pending
    return done



def files_below(folder: StrPath) -> Iterator[str]:
    """The paths, relative to ``folder`` (any length), of everything below it that is not a
    folder, as ``os.walk`` lists them (symlinked folders not entered, unreadable ones passed
    over); each folder is opened relative to its parent's descriptor (``os.fwalk``), so a tree
    deeper than PATH_MAX is walked whole where ``os.walk`` stops without a word."""
    with reach(folder) as short:
        for dirpath, _, names, _ in os.fwalk(short):
            below = os.path.relpath(dirpath, short)
            for name in names:
                yield name if below == "." else f"{below}/{name}"
