"""Backing paths longer than PATH_MAX.

A program on the mount may name a file by a relative path of up to PATH_MAX - 1 bytes; the daemon
reaches it as ``workspace + "/" + path``, which can be longer than the kernel takes
(ENAMETOOLONG where a native file system succeeds).  Such a path is reached through its folder
instead: the folder is opened a piece at a time (``O_PATH``, each piece shorter than PATH_MAX)
and the file is named ``/proc/self/fd/<folder>/<name>``, which every path-taking system call
accepts, so the rest of the daemon keeps using plain paths.  The folder's descriptor lives until
the FUSE request that needed it ends (:func:`request_ended`, called by every guarded handler).
Short paths, nearly all of them, are returned as they are at the cost of one length check.
How a folder is opened piecewise lives in :mod:`memfs.longpath`, which the layers below this one
(the indexer, the history, ``Memory``) use for the same files.
"""

from __future__ import annotations

import contextvars
import os

from memfs.longpath import PATH_MAX, open_folder

# The descriptors opened for the request being handled (None outside a request).
_opened: contextvars.ContextVar[list[int] | None] = contextvars.ContextVar("memfs_long_path_fds", default=None)


def request_started() -> tuple[contextvars.Token[list[int] | None], list[int]]:
    """Open a request's scope (every guarded handler, so kept to two calls, not a context
    manager: this runs for each FUSE request); pass what it returns to :func:`request_ended`."""
    fds: list[int] = []
    return _opened.set(fds), fds


def request_ended(token: contextvars.Token[list[int] | None], fds: list[int]) -> None:
    """Close the folders :func:`reachable` opened for the request."""
    _opened.reset(token)
    for fd in fds:
        os.close(fd)


def reachable(full: bytes) -> bytes:
    """``full`` itself if the kernel takes it, else an equivalent short path through an open
    descriptor of its folder (only inside a request; outside one the long path is returned and
    the call gives ENAMETOOLONG as before)."""
    if len(full) < PATH_MAX:
        return full
    fds = _opened.get()
    if fds is None:
        return full
    folder, _, name = full.rpartition(b"/")
    fd = open_folder(folder)
    fds.append(fd)
    return b"/proc/self/fd/%d/%s" % (fd, name)
