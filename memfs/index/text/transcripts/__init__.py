"""Agent session transcripts and chat exports as messages a person can search.

People run Claude Code, Codex CLI, Gemini CLI, aider and OpenClaw, and export their ChatGPT and
Claude.ai chats; each writes its own format.  This package recognises each by content
(:func:`detect`), and reads each into the same :class:`Session` of :class:`Message`: prompts
and answers whole, each tool call as one line, each tool's output as its head, nothing a
harness injected (AGENTS.md, environment blocks, system reminders), no thinking, no encrypted
reasoning, no images, no message twice, and no credential (masked by :mod:`memfs.index.text.secrets`).  What is left out is counted in
:class:`Stats`, never silent; unknown record types and bad lines are never fatal.

    for session in read_sessions(path):          # any supported file; exports and aider: many
        session.runtime, session.id, session.title, session.project, session.started
        for m in session.messages:               # role, kind, text, line, end_line, timestamp, id
            ...
    iter_export(path)                            # ChatGPT / Claude.ai export (json or zip), unmasked:
                                                 # masked(session) masks one

Memory: JSONL is read a line at a time and single-JSON files an item at a time
(:mod:`.jsonscan`); what is held is the kept text (a tool output's head, not its body).
"""

from __future__ import annotations

import dataclasses
import io
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from .. import secrets
from . import aider, claude_code, codex, gemini, openclaw
from .detect import (
    AIDER,
    CHATGPT,
    CLAUDE_AI,
    CLAUDE_CODE,
    CODEX,
    GEMINI,
    HEAD,
    OPENCLAW,
    RUNTIMES,
    detect,
    detect_path,
)
from .exports import iter_export, open_export
from .model import (
    ANSWER,
    ASSISTANT,
    OUTPUT_CHARS,
    OUTPUT_LINES,
    PROMPT,
    TITLE_CHARS,
    TOOL,
    TOOL_CALL,
    TOOL_OUTPUT,
    USER,
    Message,
    Session,
    Stats,
)

__all__ = [
    "AIDER", "ANSWER", "ASSISTANT", "CHATGPT", "CLAUDE_AI", "CLAUDE_CODE", "CODEX", "GEMINI", "OPENCLAW",
    "OUTPUT_CHARS", "OUTPUT_LINES", "PROMPT", "RUNTIMES", "TITLE_CHARS", "TOOL", "TOOL_CALL", "TOOL_OUTPUT", "USER",
    "Message", "Session", "Stats", "UnknownFormat", "detect", "detect_path", "iter_export", "masked", "open_export",
    "read_bytes", "read_session", "read_sessions",
]


class UnknownFormat(ValueError):
    """The file is none of the formats this package reads."""


def _pretty_json(head: bytes) -> bool:
    """Whether a file that starts with ``head`` is one indented JSON document (its first line a
    lone brace) rather than JSON Lines."""
    return head.lstrip(b"\xef\xbb\xbf \t\r\n").split(b"\n", 1)[0].strip() in (b"{", b"[")


def masked(session: Session) -> Session:
    """The session with every credential in its title and messages masked
    (:func:`memfs.index.text.secrets.mask`): ``sk-proj-…[masked]``.  The number of messages masked is
    counted in ``stats.skipped["masked-secret"]``."""
    session.title = secrets.mask(session.title)
    for i, m in enumerate(session.messages):
        text = secrets.mask(m.text)
        if text != m.text:
            session.messages[i] = dataclasses.replace(m, text=text)
            session.stats.skip("masked-secret")
    return session


def read_sessions(path: str | Path, runtime: str | None = None, mask: bool = True) -> Iterator[Session]:
    """Every session in the file at ``path``: one for a transcript, several for an aider
    history or an export.  ``runtime`` skips detection; UnknownFormat if it cannot be told.
    Credentials in the text are masked unless ``mask`` is False."""
    for session in _read(Path(path), runtime):
        yield masked(session) if mask else session


def _read(path: Path, runtime: str | None) -> Iterator[Session]:
    runtime = runtime or detect_path(path)
    if runtime is None:
        raise UnknownFormat(f"{path}: not a session file of {', '.join(RUNTIMES)}")
    if runtime in (CHATGPT, CLAUDE_AI):
        yield from iter_export(path)
        return
    with open(path, "rb") as fp:
        yield from _read_fp(fp, runtime, path)


def _read_fp(fp: IO[bytes], runtime: str, name: object) -> Iterator[Session]:
    head = fp.read(HEAD)
    fp.seek(0)
    if runtime == AIDER:
        yield from aider.read(fp)
    elif runtime == CLAUDE_CODE:
        yield claude_code.read(fp)
    elif runtime == OPENCLAW:
        yield openclaw.read(fp)
    elif runtime == CODEX:
        yield codex.read_json(fp) if _pretty_json(head) or head.lstrip().startswith(b'{"session"') \
            else codex.read(fp)
    elif runtime == GEMINI:
        text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
        if text.startswith(b"[") or (b'"history"' in text and b'"projectHash"' not in text):
            yield gemini.read_checkpoint(fp)
        elif _pretty_json(head):
            yield gemini.read_json(fp)
        else:
            yield gemini.read_jsonl(fp)
    else:
        raise UnknownFormat(f"{name}: no reader for {runtime!r}")


def read_bytes(data: bytes, runtime: str | None = None, mask: bool = True) -> Iterator[Session]:
    """Every session in ``data``, the bytes of a session file (not an export): what the index
    reads from a file it has in memory already.  ``runtime`` as :func:`read_sessions`'s."""
    runtime = runtime or detect(data[:HEAD])
    if runtime is None or runtime in (CHATGPT, CLAUDE_AI):
        raise UnknownFormat(f"not a session file of {', '.join(RUNTIMES)}")
    for session in _read_fp(io.BytesIO(data), runtime, "data"):
        yield masked(session) if mask else session


def read_session(path: str | Path, runtime: str | None = None, mask: bool = True) -> Session:
    """The first (for a transcript: the only) session in the file at ``path``."""
    for session in read_sessions(path, runtime, mask):
        return session
    raise UnknownFormat(f"{path}: no session in it")
