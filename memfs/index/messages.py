"""Reading JSONL memory files as messages: ClawGPT sync lines and OpenClaw session transcripts.

Only what a person said or an assistant answered is kept: session records other than
``type: "message"``, roles other than user/assistant, tool calls and tool results are left out.
Lines that are not valid JSON are skipped and reported to the caller, who logs them (sync files
are validated on the way in by :mod:`memfs.sync`, but can be edited beside the mount;
transcripts are whatever the agent runtime wrote).
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

ROLES = {"user": "User", "assistant": "Assistant"}


@dataclass(frozen=True)
class Message:
    line: int  # 1-based JSONL line number
    text: str  # "[YYYY-MM-DD HH:MM UTC] Role: content"
    id: str | None = None


def _when(value: Any) -> str:
    """A ms epoch, seconds epoch or ISO string as ``YYYY-MM-DD HH:MM UTC``; empty if unknown."""
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


def _render(line: int, role: str, content: str, when: str, ident: str | None) -> Message | None:
    content = content.strip()
    if role not in ROLES or not content:
        return None
    prefix = f"[{when}] " if when else ""
    return Message(line, f"{prefix}{ROLES[role]}: {content}", ident)


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
    return _render(line, str(record.get("role", "")), record["content"], _when(record.get("timestamp")), ident)


def parse_session_line(line: int, record: Any) -> Message | None:
    if not isinstance(record, dict) or record.get("type") != "message":
        return None
    message = record.get("message")
    if not isinstance(message, dict):
        return None
    role = str(message.get("role", ""))
    when = _when(record.get("timestamp") or message.get("timestamp"))
    ident = record.get("id") if isinstance(record.get("id"), str) else None
    return _render(line, role, _text_of(message.get("content")), when, ident)


def parse_jsonl(text: str, session: bool, bad_lines: list[int] | None = None, first_line: int = 1) -> list[Message]:
    """The messages of a JSONL file (``text`` starting at line ``first_line``); the numbers of
    lines that are not JSON go to ``bad_lines``."""
    parse = parse_session_line if session else parse_sync_line
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
        message = parse(number, record)
        if message is not None:
            messages.append(message)
    return messages
