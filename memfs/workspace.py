"""What a path inside a memory workspace is, the dates that name daily files, and the template.

A workspace is a plain directory: ``MEMORY.md`` or ``memory.md`` (long-term memory), ``memory/YYYY-MM-DD.md``
(daily logs), ``clawgpt-memory/YYYY-MM-DD.jsonl`` (ClawGPT sync), ``sessions/**/*.jsonl`` (session
transcripts) and anything else, which memfs passes through without indexing.
"""

from __future__ import annotations

import datetime as dt
import enum
import fnmatch
import functools
import logging
import os
import re
import shutil
import stat
import time
import zoneinfo
from pathlib import Path, PurePosixPath

from memfs import longpath
from memfs.config import Config

log = logging.getLogger(__name__)


def _template_dir() -> Path:
    # Installed wheels carry the template inside the package; a source checkout has it at the root.
    packaged = Path(__file__).resolve().parent / "workspace_template"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "workspace_template"


TEMPLATE_DIR = _template_dir()
SYNC_DIR = "clawgpt-memory"
# The long-term memory file; OpenClaw reads either spelling.
LONG_TERM_NAMES = ("MEMORY.md", "memory.md")
SESSIONS_DIR = "sessions"
DAILY_NAME = re.compile(r"^(\d{4}-\d{2}-\d{2})(?:[-_. ].*)?\.md$")
_MEMORY_FOLDERS = ("memory/", f"{SYNC_DIR}/", f"{SESSIONS_DIR}/")
SESSION_NAME = re.compile(r"^[^/]+\.jsonl(?:\.reset\.[^/]+)?$")


class FileKind(enum.Enum):
    LONG_TERM = "long_term"  # MEMORY.md (or memory.md)
    DAILY_LOG = "daily_log"  # memory/YYYY-MM-DD*.md
    MEMORY_NOTE = "memory_note"  # other memory/**/*.md and configured extra Markdown
    SYNC = "sync"  # clawgpt-memory/*.jsonl
    SESSION = "session"  # sessions/**/*.jsonl and rotated *.jsonl.reset.*
    OTHER = "other"

    @property
    def is_jsonl(self) -> bool:
        return self in (FileKind.SYNC, FileKind.SESSION)


class OutsideWorkspace(ValueError):
    """A path that does not name anything inside the workspace."""


def classify(relpath: str, extra_patterns: list[str] | tuple[str, ...] = ()) -> FileKind:
    """The kind of a workspace-relative POSIX path (no leading slash)."""
    if not extra_patterns and relpath not in LONG_TERM_NAMES and not relpath.startswith(_MEMORY_FOLDERS):
        return FileKind.OTHER  # most paths a mount sees (a build, a checkout) are decided here, cheaply
    path = PurePosixPath(relpath)
    parts = path.parts
    if not parts or any(p.startswith(".") for p in parts):
        # Hidden files and folders (.git, .rejected, editor swap files) are never memory.
        return FileKind.OTHER
    if relpath in LONG_TERM_NAMES:
        return FileKind.LONG_TERM
    if parts[0] == "memory" and len(parts) >= 2 and path.suffix == ".md":
        if len(parts) == 2 and DAILY_NAME.match(parts[1]):
            return FileKind.DAILY_LOG
        return FileKind.MEMORY_NOTE
    if parts[0] == SYNC_DIR and len(parts) == 2 and path.suffix == ".jsonl":
        return FileKind.SYNC
    if parts[0] == SESSIONS_DIR and len(parts) >= 2 and SESSION_NAME.match(parts[-1]):
        # sessions/*.jsonl, and below it what `memfs import` and the hooks write:
        # sessions/<runtime>/<project>/<date>-<id>.jsonl
        return FileKind.SESSION
    for pattern in extra_patterns:
        if fnmatch.fnmatchcase(relpath, pattern):
            if relpath.endswith(".jsonl"):
                return FileKind.SESSION
            return FileKind.MEMORY_NOTE
    return FileKind.OTHER


def is_memory(relpath: str, extra_patterns: list[str] | tuple[str, ...] = ()) -> bool:
    return classify(relpath, extra_patterns) is not FileKind.OTHER


def shown(relpath: str) -> str:
    """A path as text that can be stored and printed: the bytes of a name that are not UTF-8
    (``os.fsdecode`` gives them as lone surrogates, which SQLite and UTF-8 output refuse)
    written as ``\\xNN``."""
    return os.fsencode(relpath).decode("utf-8", "backslashreplace")


def name_is_text(relpath: str) -> bool:
    """Whether a path's bytes are UTF-8 (what memfs can store, search and cite)."""
    try:
        relpath.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def daily_date(relpath: str) -> dt.date | None:
    """The date a daily log or sync file is named after, if it is one."""
    name = PurePosixPath(relpath).name
    match = re.match(r"^(\d{4}-\d{2}-\d{2})", name)
    if not match:
        return None
    try:
        return dt.date.fromisoformat(match.group(1))
    except ValueError:
        return None


@functools.cache
def warn_unknown_tz() -> None:
    """The C library takes a TZ it does not know (a typo: America/New_Yrok) as UTC without a
    word, and every "today" is then a UTC one: say so, once (every command asks, not only those
    that date something: a search's --after and the context bundle's days depend on it too)."""
    value = os.environ.get("TZ", "")
    if not value or time.timezone or time.daylight or time.tzname[0] in ("UTC", "GMT", "UCT", "Zulu"):
        return
    try:
        zoneinfo.ZoneInfo(value.lstrip(":"))
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        log.warning("TZ=%s is not a time zone this machine knows: dates are taken in UTC "
                    "(set bundle.timezone, or TZ to a name from /usr/share/zoneinfo)", value)


def timezone(name: str) -> dt.tzinfo:
    """A configured time zone name; empty means the machine's local zone."""
    if not name:
        warn_unknown_tz()
        local = dt.datetime.now().astimezone().tzinfo
        assert local is not None
        return local
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def today(tz: dt.tzinfo, now: dt.datetime | None = None) -> dt.date:
    moment = now or dt.datetime.now(dt.timezone.utc)
    return moment.astimezone(tz).date()


def relative(workspace: Path, path: str | Path) -> str:
    """A path given by a user (absolute, or relative to the workspace) as a workspace-relative
    POSIX path; raises OutsideWorkspace if it escapes the workspace."""
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = workspace / candidate
    resolved = Path(os.path.normpath(candidate))
    root = Path(os.path.normpath(workspace))
    try:
        rel = resolved.relative_to(root)
    except ValueError:
        raise OutsideWorkspace(f"{path} is outside the workspace {workspace}") from None
    if str(rel) == ".":
        raise OutsideWorkspace(f"{path} is the workspace itself, not a file in it")
    # A symlink inside the workspace may still point out of it (past PATH_MAX too).
    real = Path(longpath.realpath(candidate))
    try:
        real.relative_to(workspace.resolve())
    except ValueError:
        raise OutsideWorkspace(f"{path} resolves to {real}, outside the workspace") from None
    return rel.as_posix()


def iter_memory_files(cfg: Config) -> list[str]:
    """Every memory file of the workspace, as sorted workspace-relative paths.  Each folder is
    opened relative to its parent's descriptor (``os.fwalk``), so folders deeper than PATH_MAX
    from here are walked too (``os.walk`` stops at them without a word); symlinked folders are
    not entered."""
    root = cfg.workspace
    found: list[str] = []
    for dirpath, dirnames, filenames, dirfd in os.fwalk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        base = Path(dirpath).relative_to(root)
        for name in filenames:
            rel = (base / name).as_posix()
            if is_memory(rel, cfg.index.extra_paths) and _is_file_at(dirfd, name):
                found.append(rel)
    return sorted(found)


def _is_file_at(dirfd: int, name: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(name, dir_fd=dirfd).st_mode)  # through a symlink, as Path.is_file
    except OSError:
        return False


def init_workspace(dest: Path) -> tuple[list[str], list[str]]:
    """Copy the template into ``dest`` without overwriting anything; returns (created, kept)."""
    created: list[str] = []
    kept: list[str] = []
    dest.mkdir(parents=True, exist_ok=True)
    for src in sorted(TEMPLATE_DIR.rglob("*")):
        rel = src.relative_to(TEMPLATE_DIR)
        target = dest / rel
        if src.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        if src.name == ".keep":
            continue
        if target.exists() or target.is_symlink():
            kept.append(rel.as_posix())
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        # O_EXCL so a file created meanwhile by someone else is not overwritten either.
        try:
            with open(target, "xb") as out, open(src, "rb") as inp:
                shutil.copyfileobj(inp, out)
        except FileExistsError:
            kept.append(rel.as_posix())
            continue
        created.append(rel.as_posix())
    return created, kept
