"""Codex CLI rollouts: ``~/.codex/sessions/YYYY/MM/DD/rollout-<time>-<uuid>.jsonl``.

Two layouts, as codex-rs's rollout recorder wrote them:
- new (from ~0.3x, autumn 2025): every line ``{"timestamp", "type", "payload"}`` with type
  ``session_meta`` (id, cwd, timestamp, instructions), ``turn_context``, ``response_item``
  (payload: a Responses API item: ``message``, ``function_call`` / ``function_call_output``,
  ``custom_tool_call`` / ``custom_tool_call_output`` (apply_patch), ``local_shell_call``,
  ``web_search_call``, ``reasoning`` (summary + encrypted content), ``ghost_snapshot``,
  ``compaction``), ``event_msg`` (the UI's copy: ``user_message``, ``agent_message``,
  ``agent_reasoning``, ``token_count``, ...) and ``compacted``;
- old (mid 2025): the first line the session itself ``{"id", "timestamp", "instructions",
  "git"?}``, then the bare items (``{"type": "message", "role": ..., "content": [...]}``), no
  timestamps, and ``{"record_type": "state"}`` lines between them.  The same items inside one
  JSON object ``{"session": {...}, "items": [...]}`` are the JSON snapshot that Rust build and
  the earlier TypeScript CLI wrote (``rollout-<date>-<uuid>.json``): read by :func:`read_json`.

Codex says every message twice: as a ``response_item`` (what the model saw) and as an
``event_msg`` (what the UI showed), user messages item first, agent messages event first.  A
message is taken from whichever comes first, and its twin (same role, same text, from the other
source, before another message of that role) is skipped.  The user messages Codex itself adds
-- AGENTS.md, <environment_context>, <user_instructions>, ... (``injected.CODEX_CONTEXT``) --
and ``developer`` messages are context, not prompts.  Reasoning is never kept: its summary is
a heading and its content is encrypted.
"""

from __future__ import annotations

import re
from typing import IO, Any

from .injected import CODEX_CONTEXT, starts_with
from .jsonl import records
from .jsonscan import ScanError, iter_object
from .model import ANSWER, ASSISTANT, PROMPT, TOOL, TOOL_CALL, TOOL_OUTPUT, USER, Message, Session, utc
from .tools import call_line, output_head

RUNTIME = "codex"

_SPACES = re.compile(r"\s+")
_RESPONSE, _EVENT = "response", "event"


def _key(text: str) -> int:
    return hash(_SPACES.sub(" ", text).strip())


class _Reader:
    def __init__(self) -> None:
        self.session = Session(RUNTIME, "")
        self.stats = self.session.stats
        # role -> (source, text key) of the last message of that role not yet matched by its twin
        self.pending: dict[str, tuple[str, int]] = {}

    def add(self, role: str, kind: str, text: str, line: int, ts: Any, ident: str) -> None:
        self.session.messages.append(Message(role, kind, text, line, line, utc(ts), ident))

    def meta(self, payload: dict, ts: Any = None) -> None:
        s = self.session
        s.id = s.id or str(payload.get("id") or "")
        s.project = s.project or (payload.get("cwd") if isinstance(payload.get("cwd"), str) else "")
        s.started = s.started or utc(payload.get("timestamp") or ts)

    def said(self, role: str, source: str, text: str, line: int, ts: Any, ident: str) -> None:
        """A user or assistant message, unless it is the twin of the one just taken."""
        key = _key(text)
        pending = self.pending.get(role)
        if pending is not None and pending[0] != source and pending[1] == key:
            del self.pending[role]
            self.stats.skip(f"{source}:{role}-twin")
            return
        self.pending[role] = (source, key)
        self.add(USER if role == "user" else ASSISTANT, PROMPT if role == "user" else ANSWER, text.strip(), line, ts,
                 ident)

    def record(self, line: int, rec: Any) -> None:
        if not isinstance(rec, dict):
            self.stats.skip("not-an-object")
            return
        kind = rec.get("type")
        payload = rec.get("payload")
        ts = rec.get("timestamp")
        if isinstance(payload, dict) and isinstance(kind, str):
            if kind == "session_meta":
                self.meta(payload, ts)
            elif kind == "response_item":
                self.item(line, payload, ts)
            elif kind == "event_msg":
                self.event(line, payload, ts)
            else:  # turn_context, compacted
                if kind == "turn_context" and not self.session.project and isinstance(payload.get("cwd"), str):
                    self.session.project = payload["cwd"]
                self.stats.skip(kind)
        elif kind is None and "id" in rec and ("instructions" in rec or "timestamp" in rec) and not self.session.id:
            self.meta(rec)  # the old layout's first line
        elif rec.get("record_type") == "state":
            self.stats.skip("state")
        elif isinstance(kind, str):
            self.item(line, rec, None)  # the old layout: a bare item
        else:
            self.stats.skip("unknown")

    def event(self, line: int, p: dict, ts: Any) -> None:
        kind = p.get("type")
        message = p.get("message")
        if kind == "user_message" and isinstance(message, str):
            # Older builds sent the injected context as events too, with a kind saying so.
            if p.get("kind") not in (None, "plain") or starts_with(message, CODEX_CONTEXT):
                self.stats.skip("event_msg:injected")
            elif message.strip():
                self.said("user", _EVENT, message, line, ts, f"L{line}")
        elif kind == "agent_message" and isinstance(message, str):
            if message.strip():
                self.said("assistant", _EVENT, message, line, ts, f"L{line}")
        else:
            self.stats.skip(f"event_msg:{kind}")

    def item(self, line: int, p: dict, ts: Any) -> None:
        kind = p.get("type")
        if kind == "message":
            role = p.get("role")
            content = p.get("content")
            if role not in ("user", "assistant") or not isinstance(content, list):
                self.stats.skip(f"message:{role}")
                return
            parts = []
            for part in content:
                if not isinstance(part, dict):
                    continue
                text = part.get("text")
                if not isinstance(text, str):
                    self.stats.skip(f"content:{part.get('type')}")  # input_image: base64, never kept
                elif role == "user" and starts_with(text, CODEX_CONTEXT):
                    self.stats.skip("injected")
                elif text.strip():
                    parts.append(text)
            if parts:
                ident = str(p.get("id") or f"L{line}")
                self.said(role, _RESPONSE, "\n\n".join(parts), line, ts, ident)
        elif kind in ("function_call", "custom_tool_call", "local_shell_call", "web_search_call"):
            name = str(p.get("name") or kind.removesuffix("_call"))
            args = p.get("arguments") if kind == "function_call" else p.get("input") if kind == "custom_tool_call" \
                else p.get("action")
            if kind == "local_shell_call" and isinstance(args, dict):
                args = {"command": args.get("command")}
            ident = str(p.get("call_id") or p.get("id") or f"L{line}")
            self.add(ASSISTANT, TOOL_CALL, call_line(name, args), line, ts, ident)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            text = output_head(p.get("output"))
            if text:
                self.add(TOOL, TOOL_OUTPUT, text, line, ts, f"{p.get('call_id') or f'L{line}'}:out")
            else:
                self.stats.skip("empty-output")
        else:  # reasoning (encrypted), ghost_snapshot, compaction, ...
            self.stats.skip(str(kind))


def read(fp: IO[bytes]) -> Session:
    """The session in a Codex JSONL rollout, either layout."""
    reader = _Reader()
    for line, rec in records(fp, reader.stats):
        reader.record(line, rec)
    return reader.session.finish()


def read_json(fp: IO[bytes]) -> Session:
    """The session in a Codex JSON snapshot ``{"session": {...}, "items": [...]}``, its items
    read one at a time."""
    reader = _Reader()
    try:
        for key, line, value in iter_object(fp, frozenset({"items"})):
            reader.stats.records += 1
            if key == "session" and isinstance(value, dict):
                reader.meta(value)
            elif key == "items" and isinstance(value, dict):
                reader.item(line, value, value.get("timestamp"))
            elif key != "items":
                reader.stats.skip(f"key:{key}")
            else:
                reader.stats.skip("not-an-object")
    except ScanError:
        reader.stats.bad_lines += 1
    return reader.session.finish()
