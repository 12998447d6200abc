"""Who made a version: when, which uid and process, and through which route."""

from __future__ import annotations

import os
from dataclasses import dataclass

MOUNT, WATCHER, CLI, MCP, SCAN = "mount", "watcher", "cli", "mcp", "scan"
ROUTES = (MOUNT, WATCHER, CLI, MCP, SCAN)


def process_name(pid: int | None) -> str | None:
    """The command name of ``pid`` (as ``ps -o comm`` shows it), None once it has exited."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/comm", "rb") as comm:
            return comm.read().decode("utf-8", "replace").strip() or None
    except OSError:
        return None


@dataclass(frozen=True)
class Provenance:
    via: str
    uid: int | None = None
    pid: int | None = None
    process: str | None = None

    @classmethod
    def of_process(cls, via: str, uid: int | None, pid: int | None) -> Provenance:
        """A change made by process ``pid`` (a FUSE request's caller, a CLI client)."""
        return cls(via, uid, pid, process_name(pid))

    @classmethod
    def this_process(cls, via: str) -> Provenance:
        return cls.of_process(via, os.getuid(), os.getpid())


# Changes made beside the mount: the watcher sees that a file changed, not who changed it.
BESIDE = Provenance(WATCHER)
# Changes made while nothing watched, found when the workspace was scanned (`memfs index`, a
# mount's or a daemon's start): nobody saw them happen, the scan found them done.
FOUND = Provenance(SCAN)
