"""Where a user's memfs lives when nothing else says: the state directory and the user's own
config file.  Standard library only, so the CLI can find a running daemon without loading the
config machinery."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

TYPE_CHECKING = False  # typing is not imported by a command a daemon answers (see memfs.quickcli)
if TYPE_CHECKING:
    import typing

CONFIG_FILE = ".memfs.toml"


def default_state_dir() -> Path:
    base = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return Path(base) / "memfs"


def config_file_candidates(workspace: Path | None) -> list[Path]:
    paths: list[Path] = []
    if workspace is not None:
        paths.append(workspace / CONFIG_FILE)
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    paths.append(Path(xdg) / "memfs" / "config.toml")
    return paths


def trusted_state_dir(env: typing.Mapping[str, str] | None = None) -> Path:
    """The state directory as the user set it (env, then the user's own config file), never as a
    workspace's .memfs.toml says: what a workspace holds may have been written by a shared agent."""
    env = os.environ if env is None else env
    if env.get("MEMFS_STATE_DIR"):
        return Path(os.path.expanduser(env["MEMFS_STATE_DIR"])).resolve()
    user = config_file_candidates(None)[0]
    try:
        text = user.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return default_state_dir().resolve()
    import tomllib  # only with a config file: every command asks, most users have none

    try:
        table = tomllib.loads(text)
        if isinstance(table.get("state_dir"), str):
            return Path(os.path.expanduser(table["state_dir"])).resolve()
    except tomllib.TOMLDecodeError:
        pass
    return default_state_dir().resolve()


PRIVATE_DIR = 0o700
PRIVATE_FILE = 0o600


class UnsafeStateDir(PermissionError):
    """A folder or file of the state directory belongs to another user or others may change it:
    nothing is written there (the index holds MEMORY.md's text).  The message says which, and how
    to fix it."""


def _safe_ancestor(st: os.stat_result) -> bool:
    """A folder above the state directory: owned by this user or root, and nobody else may
    rename what is in it (a sticky /tmp is fine; a user-private group's writable home is too)."""
    uid = os.geteuid()
    if st.st_uid not in (uid, 0):
        return False
    if st.st_mode & stat.S_ISVTX:
        return True
    if st.st_mode & stat.S_IWOTH:
        return False
    return not (st.st_mode & stat.S_IWGRP) or st.st_uid == uid


def check_ancestors(path: Path) -> None:
    """UnsafeStateDir unless every existing folder above ``path`` is safe (:func:`_safe_ancestor`):
    another user who may replace a folder on the way may put their own folder at ``path``."""
    for above in reversed(Path(os.path.abspath(path)).parents):
        try:
            st = os.stat(above)
        except FileNotFoundError:
            return
        if not _safe_ancestor(st):
            raise UnsafeStateDir(
                f"{above} (on the way to memfs's state folder {path}) belongs to uid {st.st_uid} with mode "
                f"{stat.S_IMODE(st.st_mode):o}: another user could put their own folder in its place; "
                "set MEMFS_STATE_DIR to a folder of your own")


def make_private_dir(path: Path) -> None:
    """Make ``path`` (and what is missing above it) a folder of this user's alone (0700), or
    UnsafeStateDir if it exists and is another user's or not a folder.  A folder of this user's
    that others may enter is closed (0700)."""
    missing = []
    for folder in (path, *path.parents):
        if os.path.lexists(folder):
            break
        missing.append(folder)
    check_ancestors(missing[-1] if missing else path)
    for folder in reversed(missing):
        try:
            os.mkdir(folder, PRIVATE_DIR)
        except FileExistsError:
            pass  # made by another process of ours meanwhile: checked below
    for folder in [*reversed(missing), path] if missing else [path]:
        info = os.lstat(folder)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid():
            raise UnsafeStateDir(
                f"{folder} is {'not a folder' if not stat.S_ISDIR(info.st_mode) else f'owned by uid {info.st_uid}'}, "
                f"not a folder of this user (uid {os.geteuid()}): memfs keeps the index (MEMORY.md's text) only in "
                "folders of its own; remove it, or set MEMFS_STATE_DIR to a folder of your own")
        if info.st_mode & 0o077:
            os.chmod(folder, PRIVATE_DIR)


def private_file(path: Path) -> None:
    """Make ``path`` a file of this user's alone (0600) before a library opens it (SQLite makes
    its -wal and -shm with the file's own mode), or UnsafeStateDir if it is another user's."""
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise UnsafeStateDir(f"{path} is a symlink: memfs keeps its state in files of its own") from None
        raise
    try:
        info = os.fstat(fd)
        if info.st_uid != os.geteuid() or not stat.S_ISREG(info.st_mode):
            raise UnsafeStateDir(f"{path} belongs to uid {info.st_uid}, not this user (uid {os.geteuid()}): "
                                 "memfs does not keep the index in another user's file; remove it")
        if info.st_mode & 0o077:
            os.fchmod(fd, PRIVATE_FILE)
    finally:
        os.close(fd)


def private_opener(path: str | os.PathLike[str], flags: int) -> int:
    """``open(path, mode, opener=private_opener)``: a file made for this user alone (0600), never
    through a symlink."""
    return os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)


def write_private(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` as a file of this user's alone (0600), replaced whole."""
    scratch = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(scratch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, PRIVATE_FILE)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(scratch, path)


class RuntimeDirError(OSError):
    """The per-user runtime folder exists but is not this user's private folder."""


def runtime_dir() -> Path:
    """The user's private folder for per-user services (the embedding service's socket): one
    per user whatever state directory or workspace a command uses, so every process of the user
    finds the same service.  ``$XDG_RUNTIME_DIR/memfs`` when the session has one, else
    ``/tmp/memfs-<uid>`` (as tmux does); created 0700 and checked to be a real folder of this
    user that nobody else can enter, since a socket planted there would receive memory text."""
    base = os.environ.get("XDG_RUNTIME_DIR")
    folder = Path(base) / "memfs" if base and os.path.isabs(base) else Path(f"/tmp/memfs-{os.getuid()}")
    try:
        os.mkdir(folder, 0o700)
    except FileExistsError:
        pass
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid() or info.st_mode & 0o077:
        raise RuntimeDirError(f"{folder} is not a private folder of this user (owner uid {info.st_uid}, "
                              f"mode {stat.S_IMODE(info.st_mode):o}): remove it or set XDG_RUNTIME_DIR")
    return folder
