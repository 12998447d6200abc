"""Capturing a running session: the transcript a hook names, read again and its new part
appended to its session file in the workspace (:mod:`.writer`), then indexed, so that what was
said is searchable before compaction takes it from the model's view.

"New" is told by the message ids the session file holds, so a capture after every turn, a
capture repeated, or an import beside it adds each message once.  A transcript that has not
changed since the last capture (same size and time) is not read again; a half-written last
line is left for the next capture, and a response that was still growing gets what it grew by
appended then (see :mod:`.writer`).  Answered by the daemon (``capture``, through :mod:`memfs.commands`) or, with
none, in the hook's own worker.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import Any

from memfs.capture import sources, target
from memfs.capture.writer import SessionWriter
from memfs.config import Config
from memfs.index.text.transcripts import UnknownFormat, read_sessions
from memfs.memory import Memory
from memfs.serve.wire import Answer
from memfs.userdirs import write_private

log = logging.getLogger(__name__)
MARKS = "capture-marks.json"  # in the workspace's state folder: each transcript's size and time at its last capture
MARKS_KEPT = 500


def answer(memory: Memory, cfg: Config, args: dict[str, Any]) -> Answer:
    """``args``: runtime (claude-code, codex, gemini), transcript (an absolute path)."""
    runtime = sources.NAMES.get(str(args.get("runtime") or ""))
    path = Path(str(args.get("transcript") or ""))
    if runtime is None:
        return Answer(error=f"unknown runtime {args.get('runtime')!r}")
    if not path.is_absolute():
        return Answer(error="no transcript to capture (the runtime named none)")
    try:
        st = path.stat()
    except OSError as exc:
        return Answer(error=f"cannot read the transcript {path}: {exc.strerror}")
    marks_file = memory.paths.folder / MARKS
    marks = _marks(marks_file)
    mark = [st.st_size, st.st_mtime_ns]
    if marks.get(str(path)) == mark:
        return Answer(stdout=json.dumps({"unchanged": True}) + "\n")
    writer = SessionWriter(cfg.workspace, cfg.workspace, target.lock_dir(cfg))
    new = already = 0
    files: list[str] = []
    began = time.monotonic()
    spent = {"read": 0.0, "write": 0.0, "index": 0.0}
    try:
        clock = time.monotonic()
        for session in read_sessions(path, runtime):
            spent["read"] += time.monotonic() - clock
            if not session.messages:
                continue
            clock = time.monotonic()
            written = writer.write(runtime, session, path)
            spent["write"] += time.monotonic() - clock
            new += written.new
            already += written.already
            if written.new or written.created:
                clock = time.monotonic()
                memory.file_changed(written.rel)
                spent["index"] += time.monotonic() - clock
                files.append(written.rel)
            clock = time.monotonic()
    except (UnknownFormat, ValueError) as exc:
        return Answer(error=f"cannot read the transcript {path}: {exc}")
    log.info("captured %s: %d new message(s) in %.3f s (%s)", path, new, time.monotonic() - began,
             ", ".join(f"{k} {v:.3f} s" for k, v in spent.items()))
    marks[str(path)] = mark
    _save(marks_file, marks)
    return Answer(stdout=json.dumps({"new": new, "already": already, "files": files}) + "\n")


def said(answer: Answer) -> str:
    """A capture's answer in words, for ``memfs status``."""
    if answer.error is not None:
        return "nothing captured"
    done = json.loads(answer.stdout)
    if done.get("unchanged"):
        return "the transcript had not changed"
    where = f" into {', '.join(done['files'])}" if done.get("files") else ""
    return f"{done['new']} new message(s){where}, {done['already']} already there"


def _marks(path: Path) -> dict[str, list[int]]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save(path: Path, marks: dict[str, list[int]]) -> None:
    if len(marks) > MARKS_KEPT:  # the oldest go first (dicts keep insertion order)
        for key in list(marks)[: len(marks) - MARKS_KEPT]:
            del marks[key]
    write_private(path, json.dumps(marks) + "\n")


def codex_rollout(thread_id: str, env: dict[str, str] | os._Environ[str] | None = None) -> Path | None:
    """The rollout file of Codex session ``thread_id`` (its notify names no file): newest day
    folders first, where a running session's file is."""
    if not thread_id or "/" in thread_id:
        return None
    base = sources.default_folder(sources.CODEX, env)
    try:
        years = sorted((p for p in base.iterdir() if p.is_dir()), reverse=True)
    except OSError:
        return None
    for year in years:
        for month in sorted((p for p in year.iterdir() if p.is_dir()), reverse=True):
            for day in sorted((p for p in month.iterdir() if p.is_dir()), reverse=True):
                for name in (f"*{thread_id}.jsonl", f"*{thread_id}.json"):
                    found = sorted(day.glob(name))
                    if found:
                        return found[-1]
    return None
