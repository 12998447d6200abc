"""How SQLite's ``units`` table keeps a unit's text and hash compactly (schema 7).

A unit's text is its chunk's non-blank lines from its first to its last, so a unit row keeps
``(text_start, text_end)``, character offsets into its chunk's text, instead of a copy of them (at
100k chunks the copies were ~1,400 bytes per chunk of ~10,800); ``text_gaps`` says the text is the
span without its empty lines (a daily log's turn: ``## 13:58 - Caroline``, an empty line, the
turn).  SQL gives the text back (:data:`TEXT_SQL`), in C: reading a unit costs what it did.  A unit
whose text is not its span either way keeps its text (``text_start`` NULL), as every row of an
index made before schema 7 does.

The hash of the text the model reads (SHA-256) is kept as its 32 bytes, not 64 hex characters;
:data:`HASH_SQL` gives the hex back, so a :class:`memfs.index.storage.sqlite.store.StoredUnit` is what it was.
Both read ``units u`` joined to its chunk, ``chunks c``.
"""

from __future__ import annotations

from collections.abc import Sequence

HASH_BYTES = 32
_SPAN = "substr(c.text, u.text_start + 1, u.text_end - u.text_start)"
TEXT_SQL = (f"CASE WHEN u.text_start IS NULL THEN u.text WHEN u.text_gaps THEN replace({_SPAN}, char(10, 10), char(10)) "
            f"ELSE {_SPAN} END")
HASH_SQL = "CASE WHEN typeof(u.hash) = 'blob' THEN lower(hex(u.hash)) ELSE u.hash END"


def text_at(piece: str, gaps: bool) -> str:
    """A unit's text from the span of its chunk it covers, as SQL gives it back (:data:`TEXT_SQL`:
    ``replace`` and ``str.replace`` both replace non-overlapping pairs from the left)."""
    return piece.replace("\n\n", "\n") if gaps else piece


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
        # Not every SQLite string function counts the characters after a NUL alike: no spans then.
        self.usable = "\x00" not in text

    def span(self, start_line: int, end_line: int, text: str) -> tuple[int, int, int] | None:
        """(start, end, gaps) of the chunk's text that is ``text`` (``gaps``: once its empty lines
        are dropped, as a turn under its heading is), or None.  A Markdown chunk's lines are the
        file's from its first; a JSONL chunk's are its messages (under its title), found by text."""
        if not self.usable or not text:
            return None
        first, last = start_line - self.start_line, end_line - self.start_line
        if 0 <= first <= last < len(self.lines):
            begin, end = self.starts[first], self.starts[last] + len(self.lines[last])
            piece = self.text[begin:end]
            for gaps in (0, 1):
                if text_at(piece, bool(gaps)) == text:
                    return begin, end, gaps
        begin = self.text.find(text)
        if begin >= 0:
            return begin, begin + len(text), 0
        return None


def pack_hash(digest: str) -> str | bytes:
    """A SHA-256 hex digest as its 32 bytes (anything else as it is)."""
    if len(digest) == 2 * HASH_BYTES:
        try:
            return bytes.fromhex(digest)
        except ValueError:
            pass
    return digest


def hash_forms(digest: str) -> Sequence[str | bytes]:
    """Both forms a unit's hash may be stored in, to match a row of either."""
    return (digest, pack_hash(digest))
