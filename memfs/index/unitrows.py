"""How SQLite's ``units`` table keeps a unit's text and hash compactly (schema 7).

A unit's text is its chunk's non-blank lines from its first to its last (a daily log's turn is
``## 13:58 - Caroline``, a blank line, the turn: the unit is the two lines), so a unit row keeps
``(text_start, text_end)``, character offsets into its chunk's text, instead of a copy of them:
at 100k chunks the copies were ~1,400 bytes per chunk of ~10,800.  The text is taken back by
:func:`text_at` on what ``substr`` reads there.  A unit whose text is not found in its chunk that
way keeps its text (``text_start`` NULL), as every row of an index made before schema 7 does.

The hash of the text the model reads (SHA-256) is kept as its 32 bytes, not 64 hex characters;
:func:`hash_of` gives the hex back, so a :class:`memfs.index.store.StoredUnit` is what it was.
"""

from __future__ import annotations

from collections.abc import Sequence

HASH_BYTES = 32


def text_at(piece: str) -> str:
    """A unit's text from the span of its chunk it covers: that span's non-blank lines."""
    if "\n" not in piece:
        return piece
    lines = piece.split("\n")
    if all(line.strip() for line in lines):
        return piece
    return "\n".join(line for line in lines if line.strip())


class ChunkLines:
    """One chunk's text with where each of its lines starts, to find its units' spans."""

    def __init__(self, text: str, start_line: int) -> None:
        self.text = text
        self.start_line = start_line
        self.lines = text.split("\n")
        self.starts: list[int] = []
        at = 0
        for line in self.lines:
            self.starts.append(at)
            at += len(line) + 1

    def span(self, start_line: int, end_line: int, text: str) -> tuple[int, int] | None:
        """(start, end) of the chunk's text whose non-blank lines are exactly ``text``, or None.
        A Markdown chunk's lines are the file's from its first; a JSONL chunk's are its messages
        (under its title), found by their text."""
        first, last = start_line - self.start_line, end_line - self.start_line
        if 0 <= first <= last < len(self.lines):
            begin, end = self.starts[first], self.starts[last] + len(self.lines[last])
            if text_at(self.text[begin:end]) == text:
                return begin, end
        begin = self.text.find(text) if text else -1
        if begin >= 0 and text_at(self.text[begin : begin + len(text)]) == text:
            return begin, begin + len(text)
        return None


def pack_hash(digest: str) -> str | bytes:
    """A SHA-256 hex digest as its 32 bytes (anything else as it is)."""
    if len(digest) == 2 * HASH_BYTES:
        try:
            return bytes.fromhex(digest)
        except ValueError:
            pass
    return digest


def hash_of(stored: str | bytes) -> str:
    """The hex digest of a stored hash (32 bytes, or the hex text of an index before schema 7)."""
    return stored.hex() if isinstance(stored, bytes) else stored


def hash_forms(digest: str) -> Sequence[str | bytes]:
    """Both forms a unit's hash may be stored in, to match a row of either."""
    return (digest, pack_hash(digest))
