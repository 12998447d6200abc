"""Where a user's memfs lives when nothing else says: the state directory and the user's own
config file.  Standard library only, so the CLI can find a running daemon without loading the
config machinery."""

from __future__ import annotations

import os
import tomllib
import typing
from pathlib import Path

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
        table = tomllib.loads(user.read_text(encoding="utf-8"))
        if isinstance(table.get("state_dir"), str):
            return Path(os.path.expanduser(table["state_dir"])).resolve()
    except (OSError, tomllib.TOMLDecodeError, UnicodeDecodeError):
        pass
    return default_state_dir().resolve()
