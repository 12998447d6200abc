"""Reading JSONL memory files as messages: ClawGPT sync lines and session transcripts.

A transcript in OpenClaw's JSONL (and in the same shape as ``memfs import`` and the hooks write
it) is read line by line here: session records other than ``type: "message"`` are left out,
and of the roles only the user's, the assistant's and a tool's (what the importers kept of a
tool call or its output) are kept.  Any other runtime's session file (Claude Code, Codex CLI,
Gemini CLI) is recognised by its content and read whole by :mod:`memfs.index.text.transcripts`
(:func:`parse_transcript`), into the same messages.  Lines that are not valid JSON are skipped
and reported to the caller, who logs them (sync files are validated on the way in by
:mod:`memfs.sync`, but can be edited beside the mount; transcripts are whatever the agent runtime
wrote).  So are lines no reader should be made to take: longer than the caller's bound, or
nested deeper than the json module can recurse (it raises RecursionError some 1000 levels
down): skipped with the reason, the rest read.  Credentials in a message are masked
(:mod:`memfs.index.text.secrets`).

Every message knows the conversation it belongs to, which is to a message what a heading is to a
Markdown turn: a sync line its chat (``chatId``, and ``chatTitle``: the chat's title, or its first
words), a transcript line its session: its title (the runtime's own summary, else the first
prompt), runtime, project and date.  Search indexes the title with the message and shows it with
every result.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from dataclasses import dataclass
from typing import Any

from memfs.cleantext import clean_str
from memfs.index.text import secrets, transcripts

ROLES = {"user": "User", "assistant": "Assistant", "tool": "Tool"}
# How a message of each kind reads in the index (a tool call is said as one line by the readers).
KIND_WORDS = {transcripts.PROMPT: "User", transcripts.ANSWER: "Assistant", transcripts.TOOL_CALL: "Tool call",
              transcripts.TOOL_OUTPUT: "Tool output"}
# The runtimes whose session files the transcripts readers read whole (OpenClaw's own JSONL, and
# what memfs import writes, is read line by line here, appends included).
READ_WHOLE = (transcripts.CLAUDE_CODE, transcripts.CODEX, transcripts.GEMINI)


@dataclass(frozen=True)
class Message:
    line: int  # 1-based JSONL line number
    text: str  # "[YYYY-MM-DD HH:MM UTC] Role: content"
    id: str | None = None
    chat_id: str = ""  # the chat (sync) or session (transcript) it belongs to
    chat_title: str = ""  # that conversation's title, as a heading shows it


# A title is a heading, not a document: longer ones are cut (a chat titled with its whole first
# message would otherwise repeat that message in every unit of the chat).
TITLE_CHARS = 120


def _title(value: Any) -> str:
    text = " ".join(clean_str(value).split()) if isinstance(value, str) else ""
    return text if len(text) <= TITLE_CHARS else text[: TITLE_CHARS - 1].rstrip() + "…"


def sync_chat(record: dict) -> tuple[str, str]:
    """(chat id, title) of a sync line; a chat without a title is named by its id."""
    chat_id = record.get("chatId") if isinstance(record.get("chatId"), str) else ""
    title = _title(record.get("chatTitle")) or (f"Chat {chat_id}" if chat_id else "")
    return chat_id, title


def session_chat(record: Any) -> tuple[str, str] | None:
    """(session id, title) from a transcript's ``type: "session"`` header, or None if the record
    is not one.  A header that names the session (``title``, as memfs import writes it, with
    ``runtime`` and ``cwd``) gives "<title> (<runtime>, <project>, <date>)"; else "Session <id>
    (started YYYY-MM-DD HH:MM UTC)"."""
    if not isinstance(record, dict) or record.get("type") != "session":
        return None
    ident = str(record.get("id") or "").strip()
    started = _when(record.get("timestamp"))
    if isinstance(record.get("title"), str) and record["title"].strip():
        return ident, session_title(record["title"], str(record.get("runtime") or ""), str(record.get("cwd") or ""),
                                    started[:10])
    title = " ".join(p for p in ("Session", _title(ident), f"(started {started})" if started else "") if p)
    return ident, title


def project_name(cwd: str) -> str:
    """A project as a title names it: the last two parts of its folder (``src/kettle``)."""
    parts = [p for p in cwd.replace("\\", "/").split("/") if p]
    return "/".join(parts[-2:])


def session_title(title: str, runtime: str, cwd: str, day: str) -> str:
    """A session's title as every one of its messages carries it: what it was about, then where
    and when, so a result says which session it comes from and a search can name the project."""
    about = ", ".join(p for p in (runtime, project_name(cwd), day) if p)
    return f"{_title(secrets.mask(title))} ({about})" if about else _title(secrets.mask(title))


def transcript_runtime(head: str) -> str | None:
    """The runtime whose session file starts with ``head`` when its readers read it whole (see
    READ_WHOLE), else None (OpenClaw's JSONL, or not a transcript: read line by line here)."""
    runtime = transcripts.detect(head.encode("utf-8", "surrogatepass"))
    return runtime if runtime in READ_WHOLE else None


def parse_transcript(text: str, runtime: str) -> list[Message]:
    """The messages of a whole session file of ``runtime`` (see READ_WHOLE), each at the line of
    the file it starts on, under its session's title; credentials masked.  A file that does not
    read as that runtime's gives no message."""
    messages: list[Message] = []
    try:
        sessions = list(transcripts.read_bytes(text.encode("utf-8", "surrogatepass"), runtime))
    except (transcripts.UnknownFormat, ValueError):
        return messages
    for session in sessions:
        day = session.started.strftime("%Y-%m-%d") if session.started else ""
        chat = (f"{session.runtime}:{session.id}", session_title(session.title, session.runtime, session.project, day))
        for m in session.messages:
            when = m.timestamp.strftime("%Y-%m-%d %H:%M UTC") if m.timestamp else ""
            said = m.text.strip()
            if not said:
                continue
            prefix = f"[{when}] " if when else ""
            messages.append(Message(max(m.line, 1), f"{prefix}{KIND_WORDS.get(m.kind, 'Assistant')}: {said}",
                                    m.id or None, *chat))
    return messages


@functools.lru_cache(maxsize=4096)
def _minute(minute: int) -> str:
    return dt.datetime.fromtimestamp(minute * 60, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _when(value: Any) -> str:
    """A ms epoch, seconds epoch or ISO string as ``YYYY-MM-DD HH:MM UTC``; empty if unknown."""
    if type(value) is int and 0 <= value < 1 << 53:
        # Whole seconds or milliseconds name their minute exactly: the text is made once per
        # minute, not once per message (a 30 MB import has some 100k of them).
        try:
            return _minute(value // 60_000 if value > 1e11 else value // 60)
        except (ValueError, OverflowError, OSError):
            return ""
    moment: dt.datetime | None = None
    try:
        if isinstance(value, bool):
            return ""
        if isinstance(value, (int, float)):
            seconds = value / 1000 if value > 1e11 else value
            moment = dt.datetime.fromtimestamp(seconds, dt.timezone.utc)
        elif isinstance(value, str) and value:
            moment = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.timezone.utc)
    except (ValueError, OverflowError, OSError):
        return ""
    if moment is None:
        return ""
    return moment.astimezone(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def _render(line: int, role: str, content: str, when: str, ident: str | None,
            chat: tuple[str, str] = ("", ""), kind: object = None) -> Message | None:
    # JSON carries control characters as escapes (``\u001b[31m``) that the file's cleaning
    # (memfs.cleantext) never sees: the content is cleaned as a file's text is.
    content = clean_str(content).strip()
    if role not in ROLES or not content:
        return None
    prefix = f"[{when}] " if when else ""
    label = KIND_WORDS.get(kind, ROLES[role]) if isinstance(kind, str) else ROLES[role]
    return Message(line, f"{prefix}{label}: {secrets.mask(content)}", ident, *chat)


def _text_of(content: Any) -> str:
    """Message content as text: a string, or the ``text`` blocks of a content list."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [
            block.get("text", "")
            for block in content
            if isinstance(block, dict) and block.get("type") == "text" and isinstance(block.get("text"), str)
        ]
        return "\n".join(p for p in parts if p)
    return ""


def parse_sync_line(line: int, record: Any) -> Message | None:
    if not isinstance(record, dict) or not isinstance(record.get("content"), str):
        return None
    ident = record.get("id") if isinstance(record.get("id"), str) else None
    return _render(line, str(record.get("role", "")), record["content"], _when(record.get("timestamp")), ident,
                   sync_chat(record))


def parse_session_line(line: int, record: Any, chat: tuple[str, str] = ("", "")) -> Message | None:
    if not isinstance(record, dict) or record.get("type") != "message":
        return None
    message = record.get("message")
    if message is None and "role" in record:
        message = record  # the flat shape some runtimes write: role and content beside type
    if not isinstance(message, dict):
        return None
    role = str(message.get("role", ""))
    when = _when(record.get("timestamp") or message.get("timestamp"))
    ident = record.get("id") if isinstance(record.get("id"), str) else None
    return _render(line, role, _text_of(message.get("content")), when, ident, chat, record.get("kind"))


def session_header(first_line: str) -> tuple[str, str]:
    """(session id, title) from a transcript's first line; empty if it is not a session header."""
    try:
        return session_chat(json.loads(first_line)) or ("", "")
    except (ValueError, RecursionError):
        return "", ""


TOO_DEEP = "JSON nested too deep to read"  # past the json module's recursion limit


def _too_long(raw: str, max_bytes: int | None) -> int:
    """The bytes of a line longer than ``max_bytes`` (0 if it is not): UTF-8 is 1 to 4 bytes a
    character, so only a line near the bound is encoded to count them."""
    if max_bytes is None or len(raw) * 4 <= max_bytes:
        return 0
    size = len(raw) if len(raw) > max_bytes else len(raw.encode("utf-8", "surrogatepass"))
    return size if size > max_bytes else 0


def parse_jsonl(text: str, session: bool, bad_lines: list[int] | None = None, first_line: int = 1,
                header: tuple[str, str] = ("", ""), skipped: list[tuple[int, str]] | None = None,
                max_line_bytes: int | None = None) -> list[Message]:
    """The messages of a JSONL file (``text`` starting at line ``first_line``); the numbers of
    lines that are not JSON go to ``bad_lines``, (number, reason) of lines skipped for what they
    would cost (longer than ``max_line_bytes``, nested too deep) to ``skipped``.  ``header``: a
    transcript's session (id, title) when ``text`` starts after its header line (an append)."""
    chat = header
    messages: list[Message] = []
    for number, raw in enumerate(text.split("\n"), start=first_line):
        raw = raw.strip()
        if not raw:
            continue
        if size := _too_long(raw, max_line_bytes):
            if skipped is not None:
                skipped.append((number, f"{size:,} bytes, more than index.max_file_mb ({max_line_bytes:,} bytes)"))
            continue
        try:
            record = json.loads(raw)
        except RecursionError:
            if skipped is not None:
                skipped.append((number, TOO_DEEP))
            continue
        except ValueError:
            if bad_lines is not None:
                bad_lines.append(number)
            continue
        if session:
            opened = session_chat(record)
            if opened is not None:
                chat = opened
                continue
            message = parse_session_line(number, record, chat)
        else:
            message = parse_sync_line(number, record)
        if message is not None:
            messages.append(message)
    return messages


def as_text(messages: list[Message]) -> str:
    """Messages as a reader wants them: each chat's title as a heading, then its messages one a
    line ("[date] Role: content"), a new heading wherever the chat changes."""
    out: list[str] = []
    chat: tuple[str, str] | None = None
    for message in messages:
        if (message.chat_id, message.chat_title) != chat:
            chat = (message.chat_id, message.chat_title)
            if out:
                out.append("")
            if message.chat_title:
                out += [f"# {message.chat_title}", ""]
        out.append(message.text)
    return "\n".join(out) + ("\n" if out else "")


def session_info(data: bytes) -> dict[str, str] | None:
    """What a session file says of its session, as a search result shows it: ``runtime``,
    ``title``, ``project`` (its folder) and ``started`` (ISO, UTC); None for a file that is not
    a session (a header-less JSONL).  A runtime's own file is read whole; OpenClaw's JSONL (and
    memfs import's) only by its first line."""
    head = data[:4096].decode("utf-8", "replace")
    runtime = transcript_runtime(head)
    if runtime:
        try:
            session = next(transcripts.read_bytes(data, runtime))
        except (StopIteration, transcripts.UnknownFormat, ValueError):
            return None
        return {"runtime": session.runtime, "title": secrets.mask(session.title), "project": session.project,
                "started": session.started.isoformat() if session.started else ""}
    try:
        record = json.loads(head.split("\n", 1)[0])
    except ValueError:
        return None
    if not isinstance(record, dict) or record.get("type") != "session":
        return None
    started = transcripts.model.utc(record.get("timestamp"))
    return {"runtime": str(record.get("runtime") or "openclaw"), "title": secrets.mask(str(record.get("title") or "")),
            "project": str(record.get("cwd") or ""), "started": started.isoformat() if started else ""}
