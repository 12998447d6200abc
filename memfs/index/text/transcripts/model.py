"""What a decoded session is: its messages, its metadata, and what decoding had to leave out.

Every reader in this package returns these types, whatever the runtime wrote, so the index can
treat a Claude Code session, a Codex rollout and a ChatGPT export alike.  The text of a message
is what a person wants to find again: a prompt or an answer whole; a tool call as one line; a
tool's output cut to its first few lines (``OUTPUT_LINES`` / ``OUTPUT_CHARS``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

# Roles and kinds a message can have.
USER, ASSISTANT, TOOL = "user", "assistant", "tool"
PROMPT, ANSWER, TOOL_CALL, TOOL_OUTPUT = "prompt", "answer", "tool_call", "tool_output"

# A tool's output is kept for recognition ("that was the run where pytest said 3 failed"), not as
# a copy: its first OUTPUT_LINES non-blank lines, at most OUTPUT_CHARS characters in all.  A 5 MB
# log line costs the index 400 characters.
OUTPUT_LINES = 5
OUTPUT_CHARS = 400
# A tool call is one line: the tool and its main argument, at most CALL_CHARS characters.
CALL_CHARS = 240
# A title is a heading, not a document (the same limit memfs.index.messages uses).
TITLE_CHARS = 120
TITLE_MIN_WORDS = 3  # a prompt shorter than this ("hey", "yes") is passed over for the title


@dataclass(frozen=True, slots=True)
class Message:
    role: str  # USER, ASSISTANT or TOOL
    kind: str  # PROMPT, ANSWER, TOOL_CALL or TOOL_OUTPUT
    text: str
    line: int  # 1-based line of the file where it starts (0: the format has no lines, an export)
    end_line: int  # the last line it was read from (a response split over records spans several)
    timestamp: dt.datetime | None  # UTC
    id: str  # the runtime's own id where it has one, else one made from the line: stable either way
    sidechain: bool = False  # said inside a sub-agent's conversation (Claude Code's isSidechain)


@dataclass(slots=True)
class Stats:
    """What a reader saw and what it left out, by record type: nothing is dropped silently."""

    records: int = 0  # records (lines, or array items) read
    bad_lines: int = 0  # not JSON (or not the shape the format needs)
    partial_tail: bool = False  # the last line was half-written (no newline, not JSON): skipped
    skipped: Counter = field(default_factory=Counter)  # record or block type -> how many left out
    bytes_read: int = 0

    def skip(self, kind: str, n: int = 1) -> None:
        self.skipped[kind] += n


@dataclass(slots=True)
class Session:
    runtime: str  # "claude-code", "codex", "gemini", "aider", "openclaw", "chatgpt", "claude-ai"
    id: str
    title: str = ""  # the runtime's own summary or name, else the first real prompt
    project: str = ""  # the working directory the session ran in, where the runtime says
    started: dt.datetime | None = None  # UTC
    updated: dt.datetime | None = None  # UTC: the last timestamp seen
    messages: list[Message] = field(default_factory=list)
    stats: Stats = field(default_factory=Stats)

    def text(self) -> str:
        """Every message's text, one after another: what search can find in this session."""
        return "\n\n".join(m.text for m in self.messages)

    def finish(self) -> Session:
        """Fill what the messages imply: the title from the first real prompt when the runtime
        gave none, the start and last times from the messages when the header had none."""
        if not self.title:
            # The first prompt that says something ("hey" and "/init" name no session), else the first.
            prompts = [m.text for m in self.messages if m.kind == PROMPT and not m.sidechain]
            said = [p for p in prompts if not p.startswith("/") and len(p.split()) >= TITLE_MIN_WORDS]
            if said or prompts:
                self.title = title_of((said or prompts)[0])
        stamps = [m.timestamp for m in self.messages if m.timestamp is not None]
        if stamps:
            if self.started is None:
                self.started = min(stamps)
            last = max(stamps)
            if self.updated is None or last > self.updated:
                self.updated = last
        return self


_SPACES = re.compile(r"\s+")


_MARKUP = re.compile(r"```[\w+-]*|^#{1,6}\s+", re.MULTILINE)


def title_of(text: str) -> str:
    """A title from text: Markdown fences and heading marks dropped, whitespace collapsed, cut
    to TITLE_CHARS with an ellipsis."""
    line = _SPACES.sub(" ", _MARKUP.sub(" ", text)).strip()
    return line if len(line) <= TITLE_CHARS else line[: TITLE_CHARS - 1].rstrip() + "…"


def one_line(text: str, limit: int = CALL_CHARS) -> str:
    """Text as a single line of at most ``limit`` characters (a command, a path, a pattern)."""
    line = _SPACES.sub(" ", text).strip()
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def cut_output(text: str, lines: int = OUTPUT_LINES, chars: int = OUTPUT_CHARS) -> str:
    """The head of a tool's output: its first ``lines`` non-blank lines, at most ``chars``
    characters, and "…" where more was left out.  Only the head is looked at, so a 5 MB
    output costs no more than a short one."""
    head = text[: chars * 4]  # enough for `chars` characters of non-blank lines, most of the time
    kept: list[str] = []
    size = 0
    more = len(head) < len(text)
    for raw in head.split("\n"):
        line = raw.rstrip()
        if not line.strip():
            continue
        if len(kept) == lines:
            more = True
            break
        if size + len(line) > chars:
            kept.append(line[: max(chars - size, 0)].rstrip())
            more = True
            break
        kept.append(line)
        size += len(line) + 1
    out = "\n".join(k for k in kept if k)
    return out + ("\n…" if more and out else "…" if more else "")


def utc(value: Any) -> dt.datetime | None:
    """An ISO string, epoch seconds or epoch milliseconds as an aware UTC datetime; None when
    it is none of them.  A time without a zone is taken as UTC."""
    try:
        if isinstance(value, bool) or value is None:
            return None
        if isinstance(value, (int, float)):
            seconds = value / 1000 if value > 1e11 else value
            return dt.datetime.fromtimestamp(seconds, dt.UTC)
        if isinstance(value, str) and value:
            text = value.strip()
            if text.endswith("Z"):
                text = text[:-1] + "+00:00"
            moment = dt.datetime.fromisoformat(text)
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
            return moment.astimezone(dt.UTC)
    except (ValueError, OverflowError, OSError):
        return None
    return None
