"""Where captured sessions are written: through a mount of the workspace when one serves it (the
mount versions and indexes each file as it is closed), else into the workspace folder itself
(and the caller has it indexed: a daemon's ``index``, or ``Memory.index`` here).  Light: no
index, no click."""

from __future__ import annotations

from pathlib import Path

from memfs.config import Config
from memfs.mounttable import is_mounted
from memfs.serve.listing import serving

LOCKS = "capture-locks"  # in the state folder: one lock file per session file being written


def lock_dir(cfg: Config) -> Path:
    return cfg.state_dir / LOCKS


def mount_of(cfg: Config) -> Path | None:
    """The mountpoint of a live main-mode mount of ``cfg``'s workspace for its agent (a shared
    mount may not write ``sessions/``, which is private), or None."""
    for process in serving(cfg.state_dir, cfg.workspace, cfg.agent):
        point = process.get("mountpoint")
        if point and process.get("mode") == "main" and is_mounted(Path(point)):
            return Path(point)
    return None


def write_root(cfg: Config) -> tuple[Path, Path | None]:
    """(the folder session files are written under, the mountpoint if that is a mount)."""
    point = mount_of(cfg)
    return (point, point) if point is not None else (cfg.workspace, None)
