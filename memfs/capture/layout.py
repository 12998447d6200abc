"""Where an imported or captured session lives in the workspace, and the lines of its file.

    sessions/<runtime>/<project>/<YYYY-MM-DD>-<session id>.jsonl

``<project>`` is the session's working directory by its last two folder names
(``/home/ada/src/kettle`` -> ``src-kettle``; ``no-project`` when the runtime names none), so
``memfs search --in sessions/claude-code/src-kettle`` keeps to one project.  The file is an
OpenClaw session file, which memfs indexes: a ``session`` header, then one ``message`` line per
message, each with the runtime's own id so that importing the same session again appends only
what the file does not hold yet::

    {"type":"session","id":"claude-code:<id>","timestamp":"...Z","title":"...","cwd":"...",
     "runtime":"claude-code","source":"<the runtime's file>"}
    {"type":"message","id":"<message id>","timestamp":"...Z","kind":"prompt",
     "message":{"role":"user","content":"..."}}

A title that changes later (a runtime names its session after a while) is appended as a
``session_info`` line, as OpenClaw does: the file is only ever appended to.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from pathlib import Path
from typing import Any

import orjson

from memfs.index.text.transcripts import Message, Session

SESSIONS = "sessions"
NO_PROJECT = "no-project"
SLUG_CHARS = 60  # of a project's slug
ID_CHARS = 80  # of a session id in a file name
_NOT_SLUG = re.compile(r"[^\w.]+")
_NOT_ID = re.compile(r"[^A-Za-z0-9._-]+")
_DATED = re.compile(r"^\d{4}-\d{2}-\d{2}-(.+)\.jsonl$")


def project_slug(cwd: str) -> str:
    """``/home/ada/src/kettle`` -> ``src-kettle``: the last two folder names, lower-cased, every
    run of other characters one ``-``; ``no-project`` when there is none."""
    parts = [p for p in re.split(r"[\\/]+", cwd.strip()) if p and p not in (".", "..")]
    slug = _NOT_SLUG.sub("-", "-".join(parts[-2:]).lower()).strip("-._")[:SLUG_CHARS].strip("-._")
    return slug or NO_PROJECT


def id_slug(session_id: str) -> str:
    """A session id as a file name part: itself when it is made of ``[A-Za-z0-9._-]`` (a UUID),
    else its readable part and a hash of the whole, so two ids never share a name."""
    plain = _NOT_ID.sub("-", session_id).strip("-.")
    if plain == session_id and len(plain) <= ID_CHARS:
        return plain
    digest = hashlib.sha256(session_id.encode()).hexdigest()[:12]
    return f"{plain[:ID_CHARS - 13]}-{digest}".lstrip("-")


def slug_of_name(name: str) -> str | None:
    """The id slug in a session file's name (``2025-11-03-<slug>.jsonl``), or None."""
    m = _DATED.match(name)
    return m.group(1) if m else None


def file_name(started: dt.datetime | None, slug: str, fallback: dt.datetime) -> str:
    return f"{(started or fallback).astimezone(dt.UTC).date().isoformat()}-{slug}.jsonl"


def folder(runtime: str, cwd: str) -> str:
    return f"{SESSIONS}/{runtime}/{project_slug(cwd)}"


def iso(moment: dt.datetime | None) -> str | None:
    if moment is None:
        return None
    return moment.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _line(record: dict[str, Any]) -> bytes:
    # orjson writes UTF-8 and never a raw newline inside a string: one record, one line.
    return orjson.dumps(record) + b"\n"


def header(runtime: str, session_id: str, session: Session, source: str) -> bytes:
    record: dict[str, Any] = {"type": "session", "id": f"{runtime}:{session_id}"}
    if (when := iso(session.started)) is not None:
        record["timestamp"] = when
    record.update({"title": session.title, "cwd": session.project, "runtime": runtime, "source": source})
    return _line(record)


def message(m: Message, ident: str, text: str | None = None) -> bytes:
    """A message's line; ``text``: only this part of it (what it grew by), under its own id."""
    record: dict[str, Any] = {"type": "message", "id": ident}
    if (when := iso(m.timestamp)) is not None:
        record["timestamp"] = when
    record["kind"] = m.kind
    record["message"] = {"role": m.role, "content": m.text if text is None else text}
    if m.sidechain:
        record["sidechain"] = True
    return _line(record)


def title_line(title: str) -> bytes:
    return _line({"type": "session_info", "name": title})


GREW = "~+"  # a message's id, this, and where its continuation starts: the part a message grew by


class Held:
    """What a session file holds already: each message's text by id (with the parts it grew by
    since), and the title it last gave."""

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}
        self.title = ""
        self.complete = True  # False: its last line has no newline (a write that broke off)

    @property
    def ids(self) -> set[str]:
        return set(self.texts)

    def missing(self, ident: str, text: str) -> str | None:
        """What of a message the file lacks: all of it (not there), the part it grew by since
        (a response still being written when it was captured), or None."""
        held = self.texts.get(ident)
        if held is None:
            return text
        if len(text) > len(held) and text.startswith(held):
            return text[len(held):]
        return None

    @classmethod
    def read(cls, path: Path) -> Held:
        held = cls()
        with open(path, "rb") as fp:
            last = b""
            for raw in fp:
                last = raw
                try:
                    record = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    continue
                if not isinstance(record, dict):
                    continue
                kind = record.get("type")
                if kind == "message" and isinstance(record.get("id"), str):
                    body = record.get("message")
                    text = body.get("content") if isinstance(body, dict) else None
                    text = text if isinstance(text, str) else ""
                    base, grew, _ = record["id"].partition(GREW)
                    if grew and base in held.texts:
                        held.texts[base] += text
                    else:
                        held.texts[record["id"]] = text
                elif kind == "session" and isinstance(record.get("title"), str):
                    held.title = record["title"]
                elif kind == "session_info" and isinstance(record.get("name"), str):
                    held.title = record["name"]
            held.complete = not last or last.endswith(b"\n")
        return held


def unique_ids(messages: list[Message]) -> list[tuple[Message, str]]:
    """Each message with an id no other message of the session has: a runtime that reuses one
    (or a reader's fallback ids that meet) gets ``~2``, ``~3`` on the later ones, in file order,
    which is stable as the session grows."""
    seen: dict[str, int] = {}
    out = []
    for m in messages:
        n = seen.get(m.id, 0) + 1
        seen[m.id] = n
        out.append((m, m.id if n == 1 else f"{m.id}~{n}"))
    return out
