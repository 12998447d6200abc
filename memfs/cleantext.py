"""Bytes that may not all be text, as text that is safe to index, show and put in a prompt.

One function for every route a memory file's text leaves by (the index, and so search snippets;
``memfs get``; the context bundle), so a stray byte looks the same everywhere: undecodable bytes
and control characters become U+FFFD (a run of them one mark), and a line that is mostly such
bytes (binary noise appended to a note) becomes empty.  Lines keep their numbers, so citations
still hold.  Newline and tab are the only control characters left: an ANSI escape sequence
(ESC, or the C1 CSI) in memory must not reach an agent's prompt or a terminal.  A carriage
return that ends a line (CRLF) is a line ending, not junk, and is dropped without counting.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and U+FFFD itself (what decoding made of
# bytes that are not UTF-8).
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_JUNK = re.compile(f"[{_CONTROL}\ufffd]+")
_CONTROLS = re.compile(f"[{_CONTROL}]+")
JUNK_LINE_SHARE = 0.3  # a line more junk than this is binary noise, not text with a stray byte


def clean_text(data: bytes) -> tuple[str, int]:
    """(text, how many bytes were not text) from bytes that may not all be text."""
    text = data.decode("utf-8", errors="replace")
    if "\r\n" in text:
        text = text.replace("\r\n", "\n")
    bad = len(data) - len(data.decode("utf-8", errors="ignore").encode("utf-8"))
    bad += sum(len(m.group(0).encode("utf-8")) for m in _CONTROLS.finditer(text))
    if bad:
        lines = []
        for line in text.split("\n"):
            junk = sum(len(m.group(0)) for m in _JUNK.finditer(line))
            lines.append("" if line and junk > JUNK_LINE_SHARE * len(line) else _JUNK.sub("\ufffd", line))
        text = "\n".join(lines)
    return text.lstrip("\ufeff"), bad


def describe(bad: int) -> str:
    """How many bytes were not text, said the same way wherever it is said."""
    return f"{bad} {'byte is' if bad == 1 else 'bytes are'} not text (shown as \ufffd)"
