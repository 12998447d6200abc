"""Which runtime wrote a session file, told from its first kilobyte, never from its name.

A file copied into ``sessions/`` keeps no path to say it came from ``~/.codex``; its first
records do: each runtime's record keys and types are its own.  The first kilobyte may end in
the middle of a record (a Codex session_meta carries the whole AGENTS.md), so the tests are
patterns on the text, not decoded JSON.  None: not a session file this package reads.
"""

from __future__ import annotations

import re
import zipfile
from pathlib import Path

CLAUDE_CODE, CODEX, GEMINI, AIDER, OPENCLAW, CHATGPT, CLAUDE_AI = (
    "claude-code", "codex", "gemini", "aider", "openclaw", "chatgpt", "claude-ai")
RUNTIMES = (CLAUDE_CODE, CODEX, GEMINI, AIDER, OPENCLAW, CHATGPT, CLAUDE_AI)
HEAD = 1024


def _type_is(*names: str) -> re.Pattern[str]:
    return re.compile(r'"type"\s*:\s*"(?:' + "|".join(map(re.escape, names)) + ')"')


_CODEX_TYPES = _type_is("session_meta", "response_item", "event_msg", "turn_context", "compacted")
_CODEX_OLD_META = re.compile(r'^\{\s*"id"\s*:\s*"[^"]*"\s*,\s*"timestamp"\s*:')
_CODEX_OLD_ITEM = re.compile(r'"type"\s*:\s*"(?:message|function_call|local_shell_call|reasoning)"\s*,\s*'
                             r'(?:"id"\s*:\s*"[^"]*"\s*,\s*)?"(?:role|name|call_id|summary|status)"')
_CODEX_SNAPSHOT = re.compile(r'^\{\s*"session"\s*:\s*\{')
_CLAUDE_KEYS = re.compile(r'"(?:parentUuid|leafUuid|isSidechain|userType|logicalParentUuid)"\s*:')
_CLAUDE_TYPES = _type_is("summary", "file-history-snapshot", "queue-operation", "permission-mode", "ai-title",
                         "custom-title", "last-prompt")
_OPENCLAW = re.compile(r'^\{\s*"type"\s*:\s*"(?:session|message)"')
_GEMINI_META = re.compile(r'"sessionId"\s*:[^,]*,\s*"projectHash"\s*:|"projectHash"\s*:')
_GEMINI_CONTENT = re.compile(r'"role"\s*:\s*"(?:user|model)"\s*,\s*"parts"\s*:|"parts"\s*:\s*\[')
_CHATGPT = re.compile(r'"(?:mapping|current_node|conversation_template_id)"\s*:|"create_time"\s*:')
_CLAUDE_AI = re.compile(r'"(?:chat_messages|sender)"\s*:|^\[\s*\{\s*"uuid"\s*:\s*"[^"]*"\s*,\s*"name"\s*:')


def detect(first_kb: bytes) -> str | None:
    """The runtime whose session file starts with these bytes (see ``RUNTIMES``), or None."""
    text = first_kb[:HEAD * 4].decode("utf-8", "replace").lstrip("\ufeff \t\r\n")
    if not text:
        return None
    if text.startswith("# aider chat started at"):
        return AIDER
    if text.startswith("["):
        if _CHATGPT.search(text):
            return CHATGPT
        if _CLAUDE_AI.search(text):
            return CLAUDE_AI
        if _GEMINI_CONTENT.search(text):
            return GEMINI  # a checkpoint in its bare-array form
        return None
    if not text.startswith("{"):
        return None
    first = text.split("\n", 1)[0]
    if _CODEX_TYPES.search(first) or _CODEX_SNAPSHOT.match(text) or _CODEX_OLD_META.match(text):
        return CODEX
    if _GEMINI_META.search(text) or ('"history"' in text and _GEMINI_CONTENT.search(text)):
        return GEMINI
    if _CLAUDE_KEYS.search(text) or _CLAUDE_TYPES.search(first):
        return CLAUDE_CODE
    if _OPENCLAW.match(text):
        return OPENCLAW
    if _CODEX_OLD_ITEM.search(text) or '"record_type":"state"' in text.replace(" ", ""):
        return CODEX
    return None


def detect_path(path: str | Path) -> str | None:
    """:func:`detect` for a file, looking inside a zip for the ``conversations.json`` an export
    zip holds."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        from .exports import open_export  # exports imports nothing from here: no cycle

        try:
            with open_export(path) as fp:
                found = detect(fp.read(HEAD))
        except (OSError, zipfile.BadZipFile, FileNotFoundError):
            return None
        return found if found in (CHATGPT, CLAUDE_AI) else None
    with open(path, "rb") as fp:
        return detect(fp.read(HEAD))
