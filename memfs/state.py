"""Where the derived state of one (workspace, agent) pair lives, and how it is found again.

Layout under the state directory (``$MEMFS_STATE_DIR``, default ``~/.local/state/memfs``)::

    workspaces/<name>-<hash>/workspace.json     which workspace this folder belongs to
    workspaces/<name>-<hash>/<agent>.sqlite     that workspace's index for that agent
    <agent>.embcache.sqlite                     embedding cache: (provider, model, text hash) ->
                                                vector; holds no text, so workspaces share it
    mounts/                                     pid records and logs of running mounts

``<hash>`` is taken from the workspace's real path, so a workspace reached through a symlink
is the same workspace.  A workspace that was moved (same device and inode, old path gone, and
most of the same names at its top: file systems reuse the inode of a deleted folder at once)
takes its folder along instead of starting over.  Folders are private to their user (0700): an index
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
from memfs.userdirs import UnsafeStateDir, make_private_dir, private_opener, write_private  # noqa: F401

log = logging.getLogger(__name__)

WORKSPACES_DIR = "workspaces"
IDENTITY_FILE = "workspace.json"
PRIVATE_DIR_MODE = 0o700
MAX_ENTRIES = 200


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
    history: Path  # versions of the memory files (memfs/history/)




def folder_name(identity: WorkspaceIdentity) -> str:
    name = re.sub(r"[^A-Za-z0-9._-]+", "_", Path(identity.path).name)[:40] or "root"
    return f"{name}-{hashlib.sha256(identity.path.encode()).hexdigest()[:12]}"


@contextlib.contextmanager
def _locked(root: Path) -> Iterator[None]:
    """One process at a time decides where a workspace's state is (and moves files)."""
    with open(root / ".lock", "a", opener=private_opener) as lock:
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


def top_entries(workspace: Path) -> list[str]:
    """The names at the top of a workspace (a sample that tells a moved workspace from a new one)."""
    try:
        return sorted(os.listdir(workspace))[:MAX_ENTRIES]
    except OSError:
        return []


def read_entries(folder: Path) -> list[str]:
    try:
        raw = json.loads((folder / IDENTITY_FILE).read_text(encoding="utf-8"))
        return [str(e) for e in raw.get("entries", [])]
    except (OSError, ValueError, AttributeError):
        return []


def _write_identity(folder: Path, identity: WorkspaceIdentity, entries: list[str]) -> None:
    record = {**json.loads(identity.as_json()), "entries": entries}
    write_private(folder / IDENTITY_FILE, json.dumps(record, sort_keys=True) + "\n")


def _moved_here(root: Path, identity: WorkspaceIdentity, entries: list[str]) -> Path | None:
    """The folder of a workspace that is now at ``identity.path``: same device and inode,
    nothing with that identity left at its recorded path, and at least half of the names it
    had at its top still there (a new folder that got a deleted one's inode has none)."""
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
        before = set(read_entries(folder))
        if not before or len(before & set(entries)) * 2 < len(before):
            continue
        return folder
    return None


def _in_use(path: Path) -> bool:
    """Whether any process has ``path`` open (an older memfs still serving its index)."""
    target = str(path)
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) == target:
                    return True
        except OSError:
            continue
    return False


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


def indexed_agents(cfg: Config) -> list[str]:
    """The agents that have an index of ``cfg``'s workspace, found without creating anything."""
    folder = cfg.state_dir / WORKSPACES_DIR / folder_name(WorkspaceIdentity.of(cfg.workspace))
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    return sorted(name.removesuffix(".sqlite") for name in names
                  if name.endswith(".sqlite") and not name.endswith(".history.sqlite"))


def locate(cfg: Config) -> StatePaths:
    """The state files of ``cfg``'s (workspace, agent), creating, adopting or migrating them."""
    identity = WorkspaceIdentity.of(cfg.workspace)
    make_private_dir(cfg.state_dir)
    root = cfg.state_dir / WORKSPACES_DIR
    make_private_dir(root)
    folder = root / folder_name(identity)
    index = folder / f"{cfg.agent}.sqlite"
    cache = cfg.state_dir / f"{cfg.agent}.embcache.sqlite"
    entries = top_entries(cfg.workspace)
    if read_identity(folder) != identity or not index.exists() or read_entries(folder) != entries:
        with _locked(root):
            if not folder.exists():
                moved = _moved_here(root, identity, entries)
                if moved is not None:
                    old = read_identity(moved)
                    os.rename(moved, folder)
                    log.warning("workspace moved from %s to %s: its index moves along",
                                old.path if old else "?", identity.path)
            make_private_dir(folder)
            if read_identity(folder) != identity or read_entries(folder) != entries:
                _write_identity(folder, identity, entries)
            legacy = cfg.state_dir / f"{cfg.agent}.sqlite"
            if not index.exists() and legacy.exists():
                if _in_use(legacy):
                    log.warning("the index of an earlier memfs (%s) is still open (a mount of the old "
                                "version?): leaving it there and starting a fresh index (the embedding cache is shared, so nothing is embedded again)", legacy)
                else:
                    _move_sqlite(legacy, index)
                    log.warning("moved the index of an earlier memfs (%s) to %s; it is rebuilt for this "
                                "workspace before use", legacy, index)
    return StatePaths(folder, index, cache, identity, folder / f"{cfg.agent}.history.sqlite")
