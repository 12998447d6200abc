"""Reading JSONL memory files as messages: ClawGPT sync lines and OpenClaw session transcripts.

Only what a person said or an assistant answered is kept: session records other than
``type: "message"``, roles other than user/assistant, tool calls and tool results are left out.
Lines that are not valid JSON are skipped and reported to the caller, who logs them (sync files
are validated on the way in by :mod:`memfs.sync`, but can be edited beside the mount;
transcripts are whatever the agent runtime wrote).

Every message knows the conversation it belongs to, which is to a message what a heading is to a
Markdown turn: a sync line its chat (``chatId``, and ``chatTitle``: the chat's title, or its first
words), a transcript line its session (the ``type: "session"`` record that opens the file: its id
and start time).  Search indexes the title with the message and shows it with every result.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
from dataclasses import dataclass
from typing import Any

from memfs.cleantext import clean_str

ROLES = {"user": "User", "assistant": "Assistant"}


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
    is not one: "Session <id> (started YYYY-MM-DD HH:MM UTC)"."""
    if not isinstance(record, dict) or record.get("type") != "session":
        return None
    ident = str(record.get("id") or "").strip()
    started = _when(record.get("timestamp"))
    title = " ".join(p for p in ("Session", _title(ident), f"(started {started})" if started else "") if p)
    return ident, title


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
            chat: tuple[str, str] = ("", "")) -> Message | None:
    # JSON carries control characters as escapes (``\u001b[31m``) that the file's cleaning
    # (memfs.cleantext) never sees: the content is cleaned as a file's text is.
    content = clean_str(content).strip()
    if role not in ROLES or not content:
        return None
    prefix = f"[{when}] " if when else ""
    return Message(line, f"{prefix}{ROLES[role]}: {content}", ident, *chat)


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
    return _render(line, role, _text_of(message.get("content")), when, ident, chat)


def session_header(first_line: str) -> tuple[str, str]:
    """(session id, title) from a transcript's first line; empty if it is not a session header."""
    try:
        return session_chat(json.loads(first_line)) or ("", "")
    except ValueError:
        return "", ""


def parse_jsonl(text: str, session: bool, bad_lines: list[int] | None = None, first_line: int = 1,
                header: tuple[str, str] = ("", "")) -> list[Message]:
    """The messages of a JSONL file (``text`` starting at line ``first_line``); the numbers of
    lines that are not JSON go to ``bad_lines``.  ``header``: a transcript's session (id, title)
    when ``text`` starts after its header line (an append)."""
    chat = header
    messages: list[Message] = []
    for number, raw in enumerate(text.split("\n"), start=first_line):
        raw = raw.strip()
        if not raw:
            continue
        try:
            record = json.loads(raw)
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
