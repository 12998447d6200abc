"""Where each runtime keeps its sessions, which files of a folder are its sessions, and reading
them one session at a time with the bytes read so far (for a progress bar).

    claude-code  ~/.claude/projects/<project>/<session>.jsonl       ($CLAUDE_CONFIG_DIR/projects)
    codex        ~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl        ($CODEX_HOME/sessions)
    gemini       ~/.gemini/tmp/<project>/chats/session-*.json(l), checkpoint-*.json
    aider        .aider.chat.history.md in the current folder and the folders below it
    chatgpt      the data export: conversations.json, or the zip that holds it (no default)
    claude       Claude.ai's export: the same (no default)

A file is taken by what it holds (:func:`memfs.index.text.transcripts.detect_path`), not by its
name, when a folder is searched; a file named on the command line is read as the runtime asked.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

from memfs.index.text.transcripts import (
    AIDER,
    CHATGPT,
    CLAUDE_AI,
    CLAUDE_CODE,
    CODEX,
    GEMINI,
    Session,
    Stats,
    UnknownFormat,
    detect_path,
    masked,
    read_sessions,
)
from memfs.index.text.transcripts.exports import chatgpt_conversation, claude_conversation, open_export
from memfs.index.text.transcripts.jsonscan import ScanError, iter_array

# The names `memfs import` and `memfs hook` take, and the runtime each stands for.
NAMES = {"claude-code": CLAUDE_CODE, "codex": CODEX, "gemini": GEMINI, "aider": AIDER, "chatgpt": CHATGPT,
         "claude": CLAUDE_AI, "claude-ai": CLAUDE_AI}
AIDER_HISTORY = ".aider.chat.history.md"
AIDER_DEPTH = 4  # folders below the current one searched for aider histories
SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "venv", ".venv", "site-packages"})
_SUFFIXES = {CLAUDE_CODE: (".jsonl",), CODEX: (".jsonl", ".json"), GEMINI: (".jsonl", ".json")}


class NoSource(ValueError):
    """Nothing to import: no such file or folder, or a runtime that has no default folder."""


def default_folder(runtime: str, env: dict[str, str] | os._Environ[str] | None = None) -> Path:
    env = os.environ if env is None else env
    home = Path(env.get("HOME") or Path.home())
    if runtime == CLAUDE_CODE:
        return Path(env["CLAUDE_CONFIG_DIR"]) / "projects" if env.get("CLAUDE_CONFIG_DIR") else home / ".claude" / "projects"
    if runtime == CODEX:
        return Path(env["CODEX_HOME"]) / "sessions" if env.get("CODEX_HOME") else home / ".codex" / "sessions"
    if runtime == GEMINI:
        return home / ".gemini" / "tmp"
    raise NoSource(f"{runtime} has no folder of its own: name the export file (conversations.json or the zip)")


@dataclass
class Source:
    path: Path
    size: int
    named: bool  # named on the command line (read as the runtime asked), not found in a folder


@dataclass
class Found:
    sources: list[Source] = field(default_factory=list)
    other: int = 0  # files in the folders searched that are not this runtime's sessions


def find(runtime: str, paths: list[Path], cwd: Path) -> Found:
    """The files to import for ``runtime``: those named, and the sessions in the folders named
    (with no path, in the runtime's own folder; for aider, the current folder's histories)."""
    found = Found()
    if not paths:
        if runtime == AIDER:
            for path in _aider_histories(cwd):
                found.sources.append(Source(path, _size(path), named=False))
            if not found.sources:
                raise NoSource(f"no {AIDER_HISTORY} in {cwd} or the folders below it: name one, or run this "
                               "where aider ran")
            return found
        paths = [default_folder(runtime)]
        if not paths[0].is_dir():
            raise NoSource(f"{paths[0]} does not exist: is {runtime} installed for this user? Name its "
                           "sessions' folder or files")
    for given in paths:
        path = given.expanduser()
        if path.is_dir():
            _walk(runtime, path, found)
        elif path.is_file():
            found.sources.append(Source(path, _size(path), named=True))
        else:
            raise NoSource(f"{given}: no such file or folder")
    return found


def _walk(runtime: str, folder: Path, found: Found) -> None:
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in SKIPPED_FOLDERS)
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if runtime == AIDER:
                wanted = name == AIDER_HISTORY
            elif runtime in (CHATGPT, CLAUDE_AI):
                wanted = name.endswith((".json", ".zip"))
            else:
                wanted = name.endswith(_SUFFIXES[runtime])
            if not wanted:
                continue
            try:
                what = detect_path(path)
            except OSError:
                what = None
            if what == runtime or (runtime == AIDER and what == AIDER):
                found.sources.append(Source(path, _size(path), named=False))
            else:
                found.other += 1


def _aider_histories(cwd: Path) -> list[Path]:
    out = []
    base_depth = len(cwd.parts)
    for dirpath, dirnames, filenames in os.walk(cwd):
        here = Path(dirpath)
        if len(here.parts) - base_depth >= AIDER_DEPTH:
            dirnames[:] = []
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in SKIPPED_FOLDERS)
        if AIDER_HISTORY in filenames:
            out.append(here / AIDER_HISTORY)
    return out


def _size(path: Path) -> int:
    """Bytes to read: a zip export's conversations.json, uncompressed; any other file's size."""
    try:
        if path.suffix == ".zip" and zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                return sum(i.file_size for i in archive.infolist() if i.filename.rsplit("/", 1)[-1] == "conversations.json")
        return path.stat().st_size
    except (OSError, zipfile.BadZipFile):
        return 0


class _Counted:
    """A binary file whose reads are counted (how far into an export the scan has got)."""

    def __init__(self, fp: IO[bytes]) -> None:
        self.fp = fp
        self.read_bytes = 0

    def read(self, size: int = -1) -> bytes:
        data = self.fp.read(size)
        self.read_bytes += len(data)
        return data


def sessions(runtime: str, source: Source, stats: Stats) -> Iterator[tuple[Session, int]]:
    """Each session of one file, masked, with the bytes of the file read so far.  A file that is
    not what it should be raises UnknownFormat (or OSError); bad records inside it are counted
    in ``stats`` (an export's conversations) or in each session's own stats."""
    if runtime in (CHATGPT, CLAUDE_AI):
        yield from _export(runtime, source.path, stats)
        return
    what = detect_path(source.path)
    if what is not None and what != runtime:
        name = next(n for n, r in NAMES.items() if r == what) if what in NAMES.values() else what
        raise UnknownFormat(f"this is a {what} file: memfs import {name} {source.path}")
    # A file detection cannot place (its first records cut short) is read as the runtime asked.
    for session in read_sessions(source.path, runtime):
        yield session, source.size


def _export(runtime: str, path: Path, stats: Stats) -> Iterator[tuple[Session, int]]:
    """An export one conversation at a time (memory: one conversation, never the export)."""
    try:
        with open_export(path) as raw:
            fp = _Counted(raw)
            try:
                for _, item in iter_array(fp):  # type: ignore[arg-type]
                    stats.records += 1
                    if isinstance(item, dict) and isinstance(item.get("mapping"), dict):
                        yield masked(chatgpt_conversation(item)), fp.read_bytes
                    elif isinstance(item, dict) and isinstance(item.get("chat_messages"), list):
                        yield masked(claude_conversation(item)), fp.read_bytes
                    else:
                        stats.bad_lines += 1
                        stats.skip("not-a-conversation")
            except ScanError as exc:
                stats.bad_lines += 1
                stats.skip(f"broken JSON: {exc}")
    except (FileNotFoundError, zipfile.BadZipFile) as exc:
        raise UnknownFormat(f"{path}: {exc}") from None
