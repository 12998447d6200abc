"""Aider chat histories: ``.aider.chat.history.md`` in the repository aider ran in.

Markdown that aider appends to, every session in the one file:
- ``# aider chat started at 2025-03-01 14:02:11`` opens a session (local time, no zone:
  taken as UTC, the only reading that does not depend on this machine's zone);
- ``#### text`` is what the user typed, a line of it (``#### /run pytest`` a command);
- ``> text`` is aider's own output: the startup banner, "Applied edit to x.py", commands' output;
- every other line is the model's answer, up to the next user or output line.
Sessions are numbered by the line they start on; messages carry their first and last line.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterator
from typing import IO

from .model import ANSWER, ASSISTANT, PROMPT, TOOL, TOOL_OUTPUT, USER, Message, Session, cut_output

RUNTIME = "aider"

HEADER = "# aider chat started at "
_STAMP = re.compile(r"(\d{4}-\d{2}-\d{2})[ T](\d{2}:\d{2}(?::\d{2})?)")


def _started(line: str) -> dt.datetime | None:
    m = _STAMP.search(line)
    if not m:
        return None
    try:
        return dt.datetime.fromisoformat(f"{m.group(1)}T{m.group(2)}").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


class _Reader:
    def __init__(self) -> None:
        self.session: Session | None = None
        self.kind: str | None = None  # PROMPT, ANSWER or TOOL_OUTPUT being gathered
        self.lines: list[str] = []
        self.first = 0
        self.last = 0

    def flush(self) -> None:
        s = self.session
        if s is None or self.kind is None:
            self.kind, self.lines = None, []
            return
        text = "\n".join(self.lines).strip()
        if text:
            role = {PROMPT: USER, ANSWER: ASSISTANT, TOOL_OUTPUT: TOOL}[self.kind]
            if self.kind == TOOL_OUTPUT:
                text = cut_output(text)
            s.messages.append(Message(role, self.kind, text, self.first, self.last, s.started, f"{s.id}:L{self.first}"))
        self.kind, self.lines = None, []

    def take(self, number: int, kind: str, text: str) -> None:
        if self.session is None:  # text before any header: a history whose start was cut off
            self.session = Session(RUNTIME, "aider:L1")
        if kind != self.kind:
            self.flush()
            self.kind, self.first = kind, number
        if kind == TOOL_OUTPUT and sum(map(len, self.lines)) > 4 * 400:
            self.session.stats.skip("output-line")  # only the head of an output is kept
        else:
            self.lines.append(text)
        self.last = number


def read(fp: IO[bytes]) -> Iterator[Session]:
    """Each session in an aider chat history, in order."""
    r = _Reader()
    for number, raw in enumerate(fp, start=1):
        line = raw.decode("utf-8", "replace").rstrip("\r\n")
        if r.session is not None:
            r.session.stats.bytes_read += len(raw)
        if line.startswith(HEADER):
            r.flush()
            if r.session is not None:
                yield r.session.finish()
            r.session = Session(RUNTIME, f"aider:L{number}", started=_started(line))
            r.session.stats.records += 1
            continue
        if line.startswith("#### ") or line == "####":
            r.take(number, PROMPT, line[5:].rstrip())
        elif line.startswith("> ") or line == ">":
            r.take(number, TOOL_OUTPUT, line[2:].rstrip())
        elif r.kind is not None or line.strip():
            r.take(number, ANSWER, line.rstrip())
    r.flush()
    if r.session is not None:
        yield r.session.finish()
