"""Claude Code sessions: ``~/.claude/projects/<encoded-cwd>/<session-uuid>.jsonl``.

One record a line: ``user`` and ``assistant`` records carry ``message`` (the API message: its
``content`` a string or a list of text / tool_use / tool_result / thinking / image blocks);
``summary``, ``ai-title`` and ``custom-title`` records name the session; the rest
(``system``, ``attachment``, ``progress``, ``file-history-snapshot``, ``queue-operation``,
``last-prompt``, ``permission-mode``, ...) is the harness's bookkeeping, skipped and counted.

What makes it awkward, and what is done:
- one API response is written as several records, one per content block, sharing
  ``message.id``: their text blocks become ONE answer (a block seen twice is kept once);
- a record can appear twice (a resumed session copies history): a ``uuid`` seen is skipped;
- ``isMeta`` user records (skill bodies, image paths, caveats) and ``isCompactSummary`` ones
  (the summary that continues a compacted session) are the harness's, not the user's;
- slash commands arrive as ``<command-name>`` markup and become the line the user typed
  (``/review 12``); their printed output (``<local-command-stdout>``) and background tasks'
  reports (``<task-notification>``) are tool output;
- ``<system-reminder>`` blocks are cut out of any text; thinking blocks (and their
  signatures) and images are never kept;
- ``isSidechain`` records (a sub-agent's own conversation) are kept, marked ``sidechain``.
"""

from __future__ import annotations

import dataclasses
import re
from typing import IO, Any

from .injected import CLAUDE_CONTEXT, starts_with, strip_reminders
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
    cut_output,
    one_line,
    title_of,
    utc,
)
from .tools import call_line, output_head

RUNTIME = "claude-code"

_TAG = re.compile(r"<([a-z-]+)>(.*?)</\1>", re.DOTALL)


def _tags(text: str) -> dict[str, str]:
    return {m.group(1): m.group(2).strip() for m in _TAG.finditer(text[:200_000])}


class _Reader:
    def __init__(self) -> None:
        self.session = Session(RUNTIME, "")
        self.stats = self.session.stats
        self.seen: set[str] = set()  # record uuids and tool ids already taken
        self.answer: dict[str, int] = {}  # message.id -> index of its answer in messages
        self.blocks: dict[str, set[int]] = {}  # message.id -> hashes of its text blocks taken
        self.titles: dict[str, str] = {}

    def add(self, role: str, kind: str, text: str, line: int, rec: dict, ident: str) -> None:
        self.session.messages.append(Message(role, kind, text, line, line, utc(rec.get("timestamp")), ident,
                                             bool(rec.get("isSidechain"))))

    def record(self, line: int, rec: Any) -> None:
        if not isinstance(rec, dict):
            self.stats.skip("not-an-object")
            return
        kind = rec.get("type")
        if not self.session.id and isinstance(rec.get("sessionId"), str):
            self.session.id = rec["sessionId"]
        if not self.session.project and isinstance(rec.get("cwd"), str):
            self.session.project = rec["cwd"]
        if kind in ("user", "assistant"):
            uuid = rec.get("uuid")
            if isinstance(uuid, str):
                if uuid in self.seen:
                    self.stats.skip("duplicate-record")
                    return
                self.seen.add(uuid)
            message = rec.get("message")
            if not isinstance(message, dict):
                self.stats.skip(f"{kind}:no-message")
                return
            if kind == "assistant":
                self.assistant(line, rec, message)
            else:
                self.user(line, rec, message)
        elif kind == "summary" and isinstance(rec.get("summary"), str):
            self.titles["summary"] = rec["summary"]
        elif kind == "ai-title" and isinstance(rec.get("aiTitle"), str):
            self.titles["ai"] = rec["aiTitle"]
        elif kind == "custom-title" and isinstance(rec.get("customTitle"), str):
            self.titles["custom"] = rec["customTitle"]
        elif kind == "system":
            self.stats.skip(f"system:{rec.get('subtype') or '?'}")
        else:
            self.stats.skip(str(kind))

    def assistant(self, line: int, rec: dict, message: dict) -> None:
        if rec.get("isApiErrorMessage"):
            self.stats.skip("api-error")
            return
        mid = message.get("id") if isinstance(message.get("id"), str) else str(rec.get("uuid") or f"L{line}")
        content = message.get("content")
        if isinstance(content, str):
            content = [{"type": "text", "text": content}]
        if not isinstance(content, list):
            self.stats.skip("assistant:no-content")
            return
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                self.answer_text(line, rec, mid, strip_reminders(block["text"]).strip())
            elif btype in ("tool_use", "server_tool_use"):
                ident = str(block.get("id") or f"{mid}:{line}")
                if ident in self.seen:
                    self.stats.skip("duplicate-block")
                    continue
                self.seen.add(ident)
                self.add(ASSISTANT, TOOL_CALL, call_line(str(block.get("name") or "tool"), block.get("input")),
                         line, rec, ident)
            elif btype and btype.endswith("_tool_result"):  # web search results and the like
                self.output(line, rec, str(block.get("tool_use_id") or f"L{line}"), block.get("content"))
            else:
                self.stats.skip(f"block:{btype}")

    def answer_text(self, line: int, rec: dict, mid: str, text: str) -> None:
        if not text:
            self.stats.skip("block:empty-text")
            return
        taken = self.blocks.setdefault(mid, set())
        if hash(text) in taken:
            self.stats.skip("duplicate-block")
            return
        taken.add(hash(text))
        index = self.answer.get(mid)
        messages = self.session.messages
        if index is None:
            self.answer[mid] = len(messages)
            self.add(ASSISTANT, ANSWER, text, line, rec, mid)
        else:
            old = messages[index]
            messages[index] = dataclasses.replace(old, text=f"{old.text}\n\n{text}", end_line=line)

    def user(self, line: int, rec: dict, message: dict) -> None:
        uuid = str(rec.get("uuid") or f"L{line}")
        content = message.get("content")
        if isinstance(content, str):
            self.user_text(line, rec, uuid, content)
            return
        if not isinstance(content, list):
            self.stats.skip("user:no-content")
            return
        n = 0
        for block in content:
            if not isinstance(block, dict):
                continue
            btype = block.get("type")
            if btype == "text" and isinstance(block.get("text"), str):
                self.user_text(line, rec, uuid if n == 0 else f"{uuid}#{n}", block["text"])
                n += 1
            elif btype == "tool_result":
                self.output(line, rec, f"{block.get('tool_use_id') or uuid}:out", block.get("content"))
            else:
                self.stats.skip(f"block:{btype}")

    def output(self, line: int, rec: dict, ident: str, content: Any) -> None:
        if ident in self.seen:
            self.stats.skip("duplicate-block")
            return
        self.seen.add(ident)
        if isinstance(content, str):
            content = strip_reminders(content)
        elif isinstance(content, list):
            content = [dict(b, text=strip_reminders(b["text"])) if isinstance(b, dict) and isinstance(b.get("text"), str)
                       else b for b in content]
        text = output_head(content)
        if not text:
            self.stats.skip("empty-output")
            return
        self.add(TOOL, TOOL_OUTPUT, text, line, rec, ident)

    def user_text(self, line: int, rec: dict, ident: str, text: str) -> None:
        if rec.get("isMeta"):
            self.stats.skip("meta")
            return
        if rec.get("isCompactSummary"):
            self.stats.skip("compact-summary")
            return
        head = text.lstrip()[:40]
        if head.startswith(("<command-name>", "<command-message>")):
            tags = _tags(text)
            name = tags.get("command-name") or "/" + tags.get("command-message", "").lstrip("/")
            args = tags.get("command-args", "")
            command = one_line(f"{name} {args}".strip(), 2000)
            if command.strip("/"):
                self.add(USER, PROMPT, command, line, rec, ident)
            return
        if head.startswith(("<local-command-stdout>", "<local-command-stderr>", "<bash-stdout>", "<bash-stderr>")):
            body = "\n".join(v for v in _tags(text).values() if v)
            if body:
                self.add(TOOL, TOOL_OUTPUT, cut_output(body), line, rec, ident)
            else:
                self.stats.skip("empty-output")
            return
        if head.startswith("<bash-input>"):
            self.add(USER, TOOL_CALL, one_line("Bash: " + _tags(text).get("bash-input", "")), line, rec, ident)
            return
        if head.startswith("<task-notification>"):
            tags = _tags(_tags(text).get("task-notification", text))
            body = "\n".join(v for v in (tags.get("summary"), tags.get("result")) if v)
            self.add(TOOL, TOOL_OUTPUT, cut_output(body or text), line, rec, ident)
            return
        if starts_with(text, CLAUDE_CONTEXT) and not text.lstrip().startswith("<system-reminder>"):
            self.stats.skip("injected")
            return
        text = strip_reminders(text).strip()
        if not text:
            self.stats.skip("injected")
            return
        self.add(USER, PROMPT, text, line, rec, ident)

    def finish(self) -> Session:
        title = self.titles.get("custom") or self.titles.get("summary") or self.titles.get("ai")
        if title:
            self.session.title = title_of(title)
        return self.session.finish()


def read(fp: IO[bytes]) -> Session:
    """The session in a Claude Code transcript (a binary file object)."""
    reader = _Reader()
    for line, rec in records(fp, reader.stats):
        reader.record(line, rec)
    return reader.finish()
