"""Where a user's memfs lives when nothing else says: the state directory and the user's own
config file.  Standard library only, so the CLI can find a running daemon without loading the
config machinery."""

from __future__ import annotations

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
