"""What the hooks did last, where ``memfs status`` shows it: a hook prints nothing but the context
it adds (anything else on its output would reach the agent, or break Gemini CLI's JSON), so what
went wrong is written here instead: ``hooks.json`` in the workspace's state folder, beside its
index.  Its last run per (runtime, event), and the last problems, newest first.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from memfs.config import Config
from memfs.state import WORKSPACES_DIR, WorkspaceIdentity, folder_name
from memfs.userdirs import make_private_dir, private_opener, write_private

FILE = "hooks.json"
PROBLEMS_KEPT = 10


def path_for(cfg: Config) -> Path:
    return cfg.state_dir / WORKSPACES_DIR / folder_name(WorkspaceIdentity.of(cfg.workspace)) / FILE


def read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with open(path.with_name(FILE + ".lock"), "a", opener=private_opener) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def record(path: Path, hook: str, outcome: str, problem: str = "", seconds: float | None = None) -> None:
    """Note that ``hook`` ("claude-code PreCompact") ran and what came of it; ``problem``: what
    went wrong, kept among the last few."""
    make_private_dir(path.parent)
    now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
    with _locked(path):
        data = read(path)
        runs = data.get("runs") if isinstance(data.get("runs"), dict) else {}
        runs[hook] = {"at": now, "outcome": outcome, **({"seconds": round(seconds, 3)} if seconds is not None else {}),
                      **({"problem": problem} if problem else {})}
        problems = [p for p in data.get("problems") or [] if isinstance(p, dict)]
        if problem:
            problems = [{"at": now, "hook": hook, "problem": problem}, *problems][:PROBLEMS_KEPT]
        write_private(path, json.dumps({"runs": runs, "problems": problems}, ensure_ascii=False, indent=1) + "\n")


def summary(cfg: Config) -> dict[str, Any]:
    """For ``memfs status``: the hooks' last runs and problems ({} when no hook ever ran)."""
    data = read(path_for(cfg))
    return {"runs": data.get("runs") or {}, "problems": data.get("problems") or []} if data else {}
