"""OpenClaw (pi coding agent) sessions, the format memfs read first
(:mod:`memfs.index.messages`): ``~/.pi/agent/sessions/--<cwd>--/<time>_<uuid>.jsonl``.

A ``{"type": "session", id, timestamp, cwd, version}`` header, then entries with ``id`` /
``parentId``: ``message`` entries hold an agent message (role ``user``, ``assistant`` --
content blocks text / thinking / toolCall / image -- ``toolResult``, ``bashExecution``;
``custom``, ``branchSummary`` and ``compactionSummary`` are the harness's); ``session_info``
names the session; ``model_change``, ``thinking_level_change``, ``compaction``, ``label``,
``custom`` and the rest are bookkeeping, skipped and counted.  Every entry of the file is read,
all branches alike: a branch left behind was still said.
"""

from __future__ import annotations

from typing import IO, Any

from .jsonl import records
from .model import (
    ANSWER,
    ASSISTANT,
    PROMPT,
    TOOL,
    TOOL_CALL,
    TOOL_OUTPUT,
    USER,
    Message,
    Session,
    title_of,
    utc,
)
from .tools import call_line, output_head

RUNTIME = "openclaw"


def read(fp: IO[bytes]) -> Session:
    session = Session(RUNTIME, "")
    stats = session.stats
    for line, rec in records(fp, stats):
        if not isinstance(rec, dict):
            stats.skip("not-an-object")
            continue
        kind = rec.get("type")
        if kind == "session":
            session.id = session.id or str(rec.get("id") or "")
            session.started = session.started or utc(rec.get("timestamp"))
            session.project = session.project or (rec.get("cwd") if isinstance(rec.get("cwd"), str) else "")
        elif kind == "session_info" and isinstance(rec.get("name"), str) and rec["name"].strip():
            session.title = title_of(rec["name"])
        elif kind == "message":
            message = rec.get("message")
            if message is None and "role" in rec:
                message = rec  # the flat shape some writers use: role and content beside type
            if isinstance(message, dict):
                _message(session, line, rec, message)
            else:
                stats.skip("message:no-message")
        else:
            stats.skip(str(kind))
    return session.finish()


def _message(session: Session, line: int, rec: dict, message: dict) -> None:
    stats = session.stats
    role = message.get("role")
    when = utc(rec.get("timestamp") or message.get("timestamp"))
    ident = str(rec.get("id") or f"L{line}")
    out = session.messages
    content: Any = message.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if role in ("user", "assistant"):
        texts = []
        for n, block in enumerate(content if isinstance(content, list) else []):
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                if block["text"].strip():
                    texts.append(block["text"].strip())
            elif btype == "toolCall":
                out.append(Message(ASSISTANT, TOOL_CALL, call_line(str(block.get("name")), block.get("arguments")),
                                   line, line, when, str(block.get("id") or f"{ident}:{n}")))
            else:
                stats.skip(f"block:{btype}")  # thinking (and its signature), image (base64)
        if texts:
            kind, who = (PROMPT, USER) if role == "user" else (ANSWER, ASSISTANT)
            # The text goes before the calls it introduced.
            at = len(out) - sum(1 for b in (content or []) if isinstance(b, dict) and b.get("type") == "toolCall")
            out.insert(at, Message(who, kind, "\n\n".join(texts), line, line, when, ident))
    elif role == "toolResult":
        head = output_head(content)
        if head:
            out.append(Message(TOOL, TOOL_OUTPUT, head, line, line, when, ident))
        else:
            stats.skip("empty-output")
    elif role == "bashExecution":
        out.append(Message(USER, TOOL_CALL, call_line("bash", {"command": message.get("command")}), line, line, when,
                           ident))
        head = output_head(message.get("output"))
        if head:
            out.append(Message(TOOL, TOOL_OUTPUT, head, line, line, when, f"{ident}:out"))
    else:
        stats.skip(f"message:{role}")
