"""A workspace's stable identity: a random UUID kept in the workspace itself (``.memfs-id``).

The state directory finds a workspace by its real path (and its device and inode, see
:mod:`memfs.state`); that identity belongs to one host.  A shared index (PostgreSQL, for a fleet of
agents on several hosts) needs one that travels with the files: the same workspace mounted on
another host, reached through another path, or moved, must find the same tenant.  The id is written
once (linked into place, so two processes racing agree on the first one) and never changed; a file that
is there but not a UUID is an error, not something to overwrite.  A copy of the folder carries the
id along: a copy that should be a workspace of its own needs ``.memfs-id`` removed.
"""

from __future__ import annotations

import os
import uuid
from pathlib import Path

ID_FILE = ".memfs-id"  # hidden: never memory (memfs.workspace.classify), and beside .memfs.toml


class WorkspaceIdError(ValueError):
    pass


def read_id(workspace: Path) -> uuid.UUID | None:
    """The workspace's id, or None when it has none yet."""
    try:
        text = (workspace / ID_FILE).read_text(encoding="ascii").strip()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise WorkspaceIdError(f"cannot read {workspace / ID_FILE}: {exc}") from None
    try:
        return uuid.UUID(text)
    except ValueError:
        raise WorkspaceIdError(f"{workspace / ID_FILE} does not hold a workspace id (a UUID): "
                               f"restore it, or remove it to give the workspace a new identity") from None


def workspace_id(workspace: Path) -> uuid.UUID:
    """The workspace's id, made (once) if it has none."""
    found = read_id(workspace)
    if found is not None:
        return found
    return write_id(workspace, uuid.uuid4())


def check_writable(workspace: Path) -> None:
    """WorkspaceIdError unless an id could be written into ``workspace`` now (asked before a
    change elsewhere, a login granted for it, that is useless without the id written)."""
    if not workspace.is_dir():
        raise WorkspaceIdError(f"workspace {workspace} is not a directory")
    if not os.access(workspace, os.W_OK | os.X_OK):
        raise WorkspaceIdError(f"cannot write {workspace / ID_FILE}: the folder is not writable")


def write_id(workspace: Path, made: uuid.UUID) -> uuid.UUID:
    """Give ``workspace`` the id ``made`` unless it has one already: the id it has after."""
    if not workspace.is_dir():
        raise WorkspaceIdError(f"workspace {workspace} is not a directory")
    # Written aside, then linked into place: link() fails if the name exists, so the first writer
    # wins, and nobody ever reads a half-written id.
    aside = workspace / f"{ID_FILE}.{os.getpid()}.{made.hex[:8]}"
    try:
        with open(aside, "x", encoding="ascii") as out:
            out.write(f"{made}\n")
            out.flush()
            os.fsync(out.fileno())
        os.link(aside, workspace / ID_FILE)
    except FileExistsError:
        return workspace_id(workspace)  # another process wrote it first: theirs is the id
    except OSError as exc:
        raise WorkspaceIdError(f"cannot write {workspace / ID_FILE}: {exc.strerror}") from None
    finally:
        aside.unlink(missing_ok=True)
    return made
