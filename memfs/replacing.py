"""Replacing a workspace file whole, the way editors save: the new bytes go to a temporary file
beside it, fsynced, with the old file's mode and owner, and are then renamed over it, so a
reader sees the old content or the new one, never half of it.  Used by ``memfs restore`` and by
section appends to MEMORY.md (``memory_append``)."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def umask() -> int:
    """This process's umask, read without changing it (os.umask would, for a moment, for all threads)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022


def staged_replacement(target: Path, data: bytes, like: os.stat_result | None, suffix: str = ".tmp") -> Path:
    """A new file beside ``target`` holding ``data`` (fsynced), with ``like``'s mode and owner (a
    new file's default mode when None), for the caller to rename over ``target`` or remove."""
    # The name is cut so the temporary one stays within NAME_MAX (255 bytes) for a long name.
    stem = os.fsencode(target.name)[:200].decode("utf-8", "ignore")
    handle, temp = tempfile.mkstemp(dir=target.parent, prefix=f".{stem}.", suffix=suffix)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        if like is not None:
            os.chmod(temp, stat.S_IMODE(like.st_mode))
            if os.geteuid() == 0:
                os.chown(temp, like.st_uid, like.st_gid)
        else:
            os.chmod(temp, 0o666 & ~umask())
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return Path(temp)


def sync_folder(folder: Path) -> None:
    """Make a rename inside ``folder`` durable."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
