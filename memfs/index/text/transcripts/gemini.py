"""Gemini CLI chats: ``~/.gemini/tmp/<project>/chats/session-*.json`` (and ``.jsonl``), and the
checkpoints ``/chat save`` writes (``checkpoint-<tag>.json``).

Three shapes, as gemini-cli's ChatRecordingService and Logger write them:
- the saved chat (to spring 2026): ONE pretty-printed JSON object ``{sessionId, projectHash,
  startTime, lastUpdated, messages: [...], summary?}``; each message ``{id, timestamp, type:
  user|gemini|info|error|warning, content (a string or Gemini parts), displayContent?,
  toolCalls?, thoughts?, tokens?, model?}``.  Read with :mod:`.jsonscan`: the messages one at
  a time, each with the line its object starts on;
- the JSONL chat (since gemini-cli's "migrate chat recording to JSONL streaming", April
  2026): a metadata line ``{sessionId, projectHash, startTime, ...}``, then message records as
  above -- the SAME id written again whenever the message grows (its tool calls, its tokens):
  the last version wins, in the place of the first -- and ``{"$set": {...}}`` (metadata: the
  ``summary``; or ``messages``: the whole history again) and ``{"$rewindTo": id}`` (the user
  rewound: that message and all after it are gone, as gemini-cli drops them);
- a checkpoint: ``{"history": [Content...]}`` or a bare ``[Content...]``, each Content
  ``{role: user|model, parts: [{text} | {functionCall} | {functionResponse} | ...]}``.

Kept: the user's text (``displayContent`` when present: what they typed, not the expansion),
Gemini's text, each tool call as a line and its result's head.  Thoughts, token counts and
info/error notices are skipped and counted; so is <session_context> the CLI injects.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import IO, Any

from .injected import GEMINI_CONTEXT, starts_with
from .jsonl import records
from .jsonscan import ScanError, iter_array, iter_object
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

RUNTIME = "gemini"

# Gemini CLI appends the files a prompt @-mentions after this line: their text is not the prompt.
_REFERENCED = "\n--- Content from referenced files ---"


def _parts_text(content: Any) -> str:
    """The text of a string or a list of Gemini parts (thought parts left out)."""
    if isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if isinstance(content, list):
        return "\n".join(p if isinstance(p, str) else p["text"] for p in content
                         if isinstance(p, str) or (isinstance(p, dict) and isinstance(p.get("text"), str)
                                                  and not p.get("thought")))
    return ""


def convert(record: dict, line: int, stats) -> list[Message]:
    """The messages one Gemini CLI message record stands for."""
    kind = record.get("type")
    ident = str(record.get("id") or f"L{line}")
    when = utc(record.get("timestamp"))
    out: list[Message] = []
    if kind == "user":
        content = record.get("displayContent") or record.get("content")
        text = _parts_text(content).split(_REFERENCED, 1)[0].strip()
        if isinstance(content, list) and any(isinstance(p, dict) and "functionResponse" in p for p in content):
            for n, part in enumerate(content):
                if isinstance(part, dict) and "functionResponse" in part:
                    head = output_head([part])
                    if head:
                        out.append(Message(TOOL, TOOL_OUTPUT, head, line, line, when, f"{ident}:{n}"))
        if starts_with(text, GEMINI_CONTEXT):
            stats.skip("injected")
        elif text:
            out.append(Message(USER, PROMPT, text, line, line, when, ident))
        elif not out:
            stats.skip("user:empty")
    elif kind in ("gemini", "model"):
        text = _parts_text(record.get("content")).strip()
        if text:
            out.append(Message(ASSISTANT, ANSWER, text, line, line, when, ident))
        if record.get("thoughts"):
            stats.skip("thoughts", len(record["thoughts"]) if isinstance(record["thoughts"], list) else 1)
        for n, call in enumerate(record.get("toolCalls") or []):
            if not isinstance(call, dict):
                continue
            cid = str(call.get("id") or f"{ident}:{n}")
            ctime = utc(call.get("timestamp")) or when
            out.append(Message(ASSISTANT, TOOL_CALL, call_line(str(call.get("name") or "tool"), call.get("args")),
                               line, line, ctime, cid))
            result = call.get("result")
            head = output_head(result) if result else ""
            if not head and isinstance(call.get("resultDisplay"), str):
                head = output_head(call["resultDisplay"])
            if head:
                out.append(Message(TOOL, TOOL_OUTPUT, head, line, line, ctime, f"{cid}:out"))
    else:
        stats.skip(f"message:{kind}")
    return out


class _Chat:
    """The messages of a chat by record id, in first-seen order, for the JSONL form's rewrites."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.by_id: dict[str, list[Message]] = {}

    def put(self, record: dict, line: int) -> None:
        ident = str(record.get("id"))
        if ident in self.by_id:
            self.session.stats.skip("rewritten")
        self.by_id[ident] = convert(record, line, self.session.stats)

    def rewind(self, ident: str) -> None:
        ids = list(self.by_id)
        if ident in self.by_id:
            for gone in ids[ids.index(ident):]:
                self.session.stats.skip("rewound", len(self.by_id.pop(gone)))
        else:
            self.session.stats.skip("rewind:unknown-id")

    def meta(self, record: dict) -> None:
        s = self.session
        s.id = s.id or str(record.get("sessionId") or "")
        s.started = s.started or utc(record.get("startTime"))
        if utc(record.get("lastUpdated")):
            s.updated = utc(record.get("lastUpdated"))
        if isinstance(record.get("summary"), str) and record["summary"].strip():
            s.title = title_of(record["summary"])
        dirs = record.get("directories")
        if not s.project and isinstance(dirs, list) and dirs and isinstance(dirs[0], str):
            s.project = dirs[0]

    def done(self) -> Session:
        self.session.messages = [m for ms in self.by_id.values() for m in ms]
        return self.session.finish()


def read_jsonl(fp: IO[bytes]) -> Session:
    """A Gemini CLI chat in its JSONL form."""
    chat = _Chat(Session(RUNTIME, ""))
    stats = chat.session.stats
    for line, rec in records(fp, stats):
        if not isinstance(rec, dict):
            stats.skip("not-an-object")
        elif isinstance(rec.get("$rewindTo"), str):
            chat.rewind(rec["$rewindTo"])
        elif isinstance(rec.get("$set"), dict):
            update = rec["$set"]
            chat.meta(update)
            for msg in update.get("messages") or []:
                if isinstance(msg, dict) and isinstance(msg.get("id"), str):
                    chat.put(msg, line)
        elif isinstance(rec.get("id"), str):
            chat.put(rec, line)
        elif isinstance(rec.get("sessionId"), str):
            chat.meta(rec)
            for msg in rec.get("messages") or []:
                if isinstance(msg, dict):
                    chat.put(msg, line)
        else:
            stats.skip("unknown")
    return chat.done()


def read_json(fp: IO[bytes]) -> Session:
    """A Gemini CLI chat saved as one JSON object, its messages read one at a time (memory: one
    message, not the file)."""
    chat = _Chat(Session(RUNTIME, ""))
    stats = chat.session.stats
    meta: dict[str, Any] = {}
    try:
        for key, line, value in iter_object(fp, frozenset({"messages"})):
            stats.records += 1
            if key == "messages":
                if isinstance(value, dict):
                    chat.put(value if "id" in value else dict(value, id=f"L{line}"), line)
                else:
                    stats.skip("not-an-object")
            else:
                meta[key] = value
    except ScanError:
        stats.bad_lines += 1
        stats.partial_tail = True
    chat.meta(meta)
    return chat.done()


def _checkpoint_items(fp: IO[bytes], stats) -> Iterator[tuple[int, Any]]:
    first = fp.read(1)
    while first and first.isspace():
        first = fp.read(1)
    fp.seek(fp.tell() - 1 if first else 0)
    try:
        if first == b"[":
            yield from iter_array(fp)
        else:
            for key, line, value in iter_object(fp, frozenset({"history"})):
                if key == "history":
                    yield line, value
                else:
                    stats.skip(f"key:{key}")
    except ScanError:
        stats.bad_lines += 1


def read_checkpoint(fp: IO[bytes]) -> Session:
    """A ``/chat save`` checkpoint: the model's history, with neither ids nor times."""
    session = Session(RUNTIME, "")
    stats = session.stats
    for line, content in _checkpoint_items(fp, stats):
        stats.records += 1
        if not isinstance(content, dict) or not isinstance(content.get("parts"), list):
            stats.skip("not-a-content")
            continue
        role = content.get("role")
        for n, part in enumerate(content["parts"]):
            ident = f"L{line}.{n}"
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str) and not part.get("thought"):
                text = part["text"].split(_REFERENCED, 1)[0].strip()
                if not text:
                    continue
                if role == "user":
                    if starts_with(text, GEMINI_CONTEXT):
                        stats.skip("injected")
                    else:
                        session.messages.append(Message(USER, PROMPT, text, line, line, None, ident))
                else:
                    session.messages.append(Message(ASSISTANT, ANSWER, text, line, line, None, ident))
            elif isinstance(part.get("functionCall"), dict):
                call = part["functionCall"]
                session.messages.append(Message(ASSISTANT, TOOL_CALL, call_line(str(call.get("name")), call.get("args")),
                                                line, line, None, str(call.get("id") or ident)))
            elif isinstance(part.get("functionResponse"), dict):
                head = output_head([part])
                if head:
                    session.messages.append(Message(TOOL, TOOL_OUTPUT, head, line, line, None, ident))
            else:
                stats.skip("part:" + ("thought" if part.get("thought") else next(iter(part), "?")))
    return session.finish()
