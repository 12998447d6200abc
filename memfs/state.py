"""Where the derived state of one (workspace, agent) pair lives, and how it is found again.

Layout under the state directory (``$MEMFS_STATE_DIR``, default ``~/.local/state/memfs``)::

    workspaces/<name>-<hash>/workspace.json     which workspace this folder belongs to
    workspaces/<name>-<hash>/<agent>.sqlite     that workspace's index for that agent
    <agent>.embcache.sqlite                     embedding cache: (provider, model, text hash) ->
                                                vector; holds no text, so workspaces share it
    mounts/                                     pid records and logs of running mounts

``<hash>`` is taken from the workspace's real path, so a workspace reached through a symlink
is the same workspace.  A workspace that was moved (same device and inode, old path gone) takes
its folder along instead of starting over.  Folders are private to their user (0700): an index
holds the text of MEMORY.md.

Index files of earlier versions (``<agent>.sqlite`` beside the cache, one per agent whatever the
workspace) are moved into the first workspace that opens them; that workspace then reconciles
the index with its own files before serving from it (see ``Memory``), because such a file may
hold another workspace's text.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import logging
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memfs.config import Config

log = logging.getLogger(__name__)

WORKSPACES_DIR = "workspaces"
IDENTITY_FILE = "workspace.json"
PRIVATE_DIR_MODE = 0o700


@dataclass(frozen=True)
class WorkspaceIdentity:
    """What a workspace is: its real path, and the device and inode of its folder."""

    path: str
    dev: int
    ino: int

    @classmethod
    def of(cls, workspace: Path) -> WorkspaceIdentity:
        real = Path(os.path.realpath(workspace))
        try:
            st = os.stat(real)
        except OSError:
            return cls(str(real), -1, -1)
        return cls(str(real), st.st_dev, st.st_ino)

    def as_json(self) -> str:
        return json.dumps({"path": self.path, "dev": self.dev, "ino": self.ino}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> WorkspaceIdentity | None:
        try:
            raw = json.loads(text)
            return cls(str(raw["path"]), int(raw["dev"]), int(raw["ino"]))
        except (ValueError, KeyError, TypeError):
            return None


@dataclass(frozen=True)
class StatePaths:
    """The files of one (workspace, agent) pair."""

    folder: Path  # the workspace's folder under workspaces/
    index: Path
    cache: Path
    identity: WorkspaceIdentity


def make_private_dir(path: Path) -> None:
    path.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    st = path.stat()
    if st.st_uid == os.geteuid() and st.st_mode & 0o077:
        os.chmod(path, PRIVATE_DIR_MODE)


def folder_name(identity: WorkspaceIdentity) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(identity.path).name)[:40] or "root"
    return f"{name}-{hashlib.sha256(identity.path.encode()).hexdigest()[:12]}"


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One process at a time decides where a workspace's state is (and moves files)."""
    with open(root / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def read_identity(folder: Path) -> WorkspaceIdentity | None:
    try:
        return WorkspaceIdentity.from_json((folder / IDENTITY_FILE).read_text(encoding="utf-8"))
    except OSError:
        return None


def _write_identity(folder: Path, identity: WorkspaceIdentity) -> None:
    scratch = folder / (IDENTITY_FILE + ".tmp")
    scratch.write_text(identity.as_json() + "\n", encoding="utf-8")
    os.replace(scratch, folder / IDENTITY_FILE)


def _moved_here(root: Path, identity: WorkspaceIdentity) -> Path | None:
    """The folder of a workspace that is now at ``identity.path``: same device and inode, and
    nothing with that identity is left at its recorded path."""
    if identity.dev < 0:
        return None
    for folder in sorted(root.iterdir()):
        recorded = read_identity(folder) if folder.is_dir() else None
        if recorded is None or (recorded.dev, recorded.ino) != (identity.dev, identity.ino):
            continue
        if recorded.path == identity.path:
            continue
        if WorkspaceIdentity.of(Path(recorded.path)) == WorkspaceIdentity(recorded.path, identity.dev, identity.ino):
            continue  # still there: a bind mount or the like, not a move
        return folder
    return None


def _move_sqlite(source: Path, target: Path) -> None:
    """Move an SQLite file with its WAL (the WAL holds committed transactions)."""
    os.replace(source, target)
    for suffix in ("-wal", "-shm"):
        extra = Path(str(source) + suffix)
        if extra.exists():
            if suffix == "-shm":
                extra.unlink()  # rebuilt from the WAL on the next open
            else:
                os.replace(extra, Path(str(target) + suffix))


def locate(cfg: Config) -> StatePaths:
    """The state files of ``cfg``'s (workspace, agent), creating, adopting or migrating them."""
    identity = WorkspaceIdentity.of(cfg.workspace)
    make_private_dir(cfg.state_dir)
    root = cfg.state_dir / WORKSPACES_DIR
    make_private_dir(root)
    folder = root / folder_name(identity)
    index = folder / f"{cfg.agent}.sqlite"
    cache = cfg.state_dir / f"{cfg.agent}.embcache.sqlite"
    recorded = read_identity(folder)
    if recorded != identity or not index.exists():
        with _locked(root):
            recorded = read_identity(folder)
            if not folder.exists():
                moved = _moved_here(root, identity)
                if moved is not None:
                    os.rename(moved, folder)
                    log.warning("workspace moved from %s to %s: its index moves along",
                                (read_identity(folder) or identity).path, identity.path)
            make_private_dir(folder)
            if read_identity(folder) != identity:
                _write_identity(folder, identity)
            legacy = cfg.state_dir / f"{cfg.agent}.sqlite"
            if not index.exists() and legacy.exists():
                _move_sqlite(legacy, index)
                log.warning("moved the index of an earlier memfs (%s) to %s; it is reconciled with "
                            "this workspace's files before use", legacy, index)
    return StatePaths(folder, index, cache, identity)
