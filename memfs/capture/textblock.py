"""A block of lines memfs owns inside a user's text file (CLAUDE.md, AGENTS.md, GEMINI.md, Codex's
config.toml), between two marker lines, and a single marked line (Codex's top-level ``notify``).

The block goes at the end of the file after a blank line; taking it out gives back the same
bytes: a file that did not end in a newline gets its block after two, and no newline after it,
which is how the removal knows to take both.  Run again with other content, the block is
replaced where it stands; with the same content, nothing changes.
"""

from __future__ import annotations

import re


class Markers:
    def __init__(self, begin: str, end: str) -> None:
        self.begin = begin
        self.end = end

    def find(self, text: str) -> tuple[int, int] | None:
        """The block's span: from its begin marker's line to the end of its end marker's line."""
        m = re.search(rf"(?m)^{re.escape(self.begin)}.*$", text)
        if m is None:
            return None
        e = re.compile(rf"(?m)^{re.escape(self.end)}.*$").search(text, m.end())
        if e is None:
            return None
        return m.start(), e.end()

    def block(self, begin_line: str, body: str, end_line: str) -> str:
        return f"{begin_line}\n{body.rstrip(chr(10))}\n{end_line}"

    def put(self, text: str, block: str) -> str:
        """``text`` with ``block`` in it (replacing the one there)."""
        span = self.find(text)
        if span is not None:
            return text[:span[0]] + block + text[span[1]:]
        if not text:
            return block + "\n"
        if text.endswith("\n"):
            return text + "\n" + block + "\n"
        return text + "\n\n" + block  # no newline after: the file had none

    def take(self, text: str) -> str:
        """``text`` without the block (as it was before :meth:`put`)."""
        span = self.find(text)
        if span is None:
            return text
        start, end = span
        before, after = text[:start], text[end:]
        if after.startswith("\n"):
            after = after[1:]
            if not after and before.endswith("\n\n"):
                before = before[:-1]
        elif not after and before.endswith("\n\n"):
            before = before[:-2]
        return before + after


def put_line(text: str, line: str, marker: str) -> str:
    """``text`` with ``line`` (ending in the comment ``marker``) as its first line, replacing
    the marked line there is."""
    found = re.search(rf"(?m)^.*{re.escape(marker)}$\n?", text)
    if found is not None:
        return text[:found.start()] + line + "\n" + text[found.end():]
    return line + "\n" + text


def take_line(text: str, marker: str) -> str:
    found = re.search(rf"(?m)^.*{re.escape(marker)}$\n?", text)
    return text if found is None else text[:found.start()] + text[found.end():]
