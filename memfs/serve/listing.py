"""Which processes serve a workspace, for ``memfs status`` (and to name the one that goes on
embedding when another stops or `memfs index` waits for it): the daemons announced in
``STATE/run/`` (a mount, ``memfs serve`` started by hand or on demand, an MCP server keeping the
index current itself; each answers commands for one workspace, agent and mode) and the mounts
recorded in ``STATE/mounts/`` (a second mount of one workspace keeps it current but leaves the
commands to the first, until that one stops).  Standard library only; no content of any file,
so every mode may see it."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from memfs.mounttable import alive, is_mounted, mounts_dir


def _records(folder: Path) -> list[dict[str, Any]]:
    try:
        names = sorted(n for n in os.listdir(folder) if n.endswith(".json"))
    except OSError:
        return []
    found = []
    for name in names:
        try:
            info = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(info, dict) and isinstance(info.get("pid"), int) and alive(info["pid"]):
            found.append(info)
    return found


def serving(state_dir: Path, workspace: Path, agent: str) -> list[dict[str, Any]]:
    """pid, kind, mode, mountpoint, idle_s (None: runs until stopped) and answers (whether it
    answers commands) of each live process serving ``workspace`` for ``agent``, by pid."""
    wanted = os.path.realpath(workspace)
    out: dict[int, dict[str, Any]] = {}
    for info in _records(state_dir / "run"):
        if os.path.realpath(str(info.get("workspace", ""))) != wanted or info.get("agent") != agent:
            continue
        out[info["pid"]] = {"pid": info["pid"], "kind": str(info.get("kind") or ("mount" if info.get("mountpoint")
                                                                                  else "serve")),
                            "mode": info.get("mode", "main"), "mountpoint": info.get("mountpoint"),
                            "idle_s": info.get("idle_s"), "answers": True}
    for info in _records(mounts_dir(state_dir)):
        if os.path.realpath(str(info.get("workspace", ""))) != wanted or info.get("agent") != agent \
                or info["pid"] in out or not is_mounted(Path(str(info.get("mountpoint")))):
            continue
        out[info["pid"]] = {"pid": info["pid"], "kind": "mount", "mode": info.get("mode", "main"),
                            "mountpoint": info.get("mountpoint"), "idle_s": None, "answers": False}
    return [out[pid] for pid in sorted(out)]


_NAMES = {"serve": "`memfs serve`", "on-demand": "`memfs serve` (started on demand)", "mcp": "`memfs mcp`"}


def named(process: dict[str, Any]) -> str:
    """A process of :func:`serving` as a sentence names it: ``the mount on /mnt (pid 12)``."""
    if process.get("mountpoint"):
        return f"the mount on {process['mountpoint']} (pid {process['pid']})"
    return f"{_NAMES.get(str(process['kind']), str(process['kind']))} (pid {process['pid']})"


def names(processes: list[dict[str, Any]]) -> str:
    """Processes of :func:`serving` named in one phrase, mounts first: ``the mount on /m (pid 12)
    and `memfs serve` (pid 30)``."""
    ordered = sorted(processes, key=lambda p: (not p.get("mountpoint"), p["pid"]))
    return " and ".join(named(p) for p in ordered)


def memfs_processes(state_dir: Path) -> dict[int, str]:
    """Every live memfs process recorded in ``state_dir`` (mounts and daemons of any workspace),
    by pid, as a sentence names it: `memfs umount` says so when one keeps a mount busy."""
    out = {int(info["pid"]): named({"kind": "serve", **info}) for info in _records(state_dir / "run")}
    for info in _records(mounts_dir(state_dir)):
        out[int(info["pid"])] = f"the memfs mount on {info.get('mountpoint')} (pid {info['pid']})"
    return out


def embedded_by(state_dir: Path, workspace: Path, agent: str, otherwise: str) -> str:
    """Who embeds what a stopping process leaves waiting, said as ``... embeds them``: another
    live process serving the same index (a second mount, a daemon), which goes on with it now;
    else ``otherwise`` (the next start)."""
    others = [p for p in serving(state_dir, workspace, agent) if p["pid"] != os.getpid()]
    if not others:
        return otherwise
    return f"{names(others)}, still running, embed{'s' if len(others) == 1 else ''} them"
