"""Reading one big JSON document piece by piece: a top-level array's items, or a top-level
object's keys with one array key read item by item.

A ChatGPT export is one JSON array of every conversation a person ever had (hundreds of MB);
a Gemini CLI chat is one pretty-printed object whose ``messages`` array holds the session.  Both
are read here in memory bounded by the largest single item (a conversation, a message) and a
read chunk, not by the file: each item is decoded by the standard library's C scanner
(``raw_decode``) from a sliding text buffer, which grows only while an item is incomplete.
Every item comes with the line it starts on, so a message can be cited by line like a JSONL
record.  An item larger than ``MAX_ITEM`` chars, or text that is not JSON, ends the read: the
caller counts it (``ScanError``) and keeps what came before.
"""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import IO, Any

CHUNK = 1 << 20  # text read at a time
MAX_ITEM = 64 << 20  # chars of one item the reader will hold before giving up (bad JSON mid-file
# is only known as such once this much was read past it)


class ScanError(ValueError):
    """The document is not the JSON shape asked for, or is cut short."""


_DECODER = json.JSONDecoder()
_WS = " \t\r\n"


class _Text:
    """A window on a binary stream's text: ``buf[pos:]`` is unread, ``line`` the line at ``pos``."""

    def __init__(self, fp: IO[bytes]) -> None:
        self.fp = fp
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")("replace")
        self.buf = ""
        self.pos = 0
        self.line = 1
        self.eof = False
        self.bytes_read = 0

    def more(self, size: int = CHUNK) -> bool:
        """Read ``size`` more bytes onto the buffer (dropping what was read already); False at EOF."""
        if self.eof:
            return False
        raw = self.fp.read(size)
        self.bytes_read += len(raw)
        if not raw:
            self.eof = True
            tail = self.decoder.decode(b"", final=True)
            if tail:
                self._append(tail)
            return bool(tail)
        self._append(self.decoder.decode(raw))
        return True

    def _append(self, text: str) -> None:
        if self.pos:
            self.buf = self.buf[self.pos:]
            self.pos = 0
        self.buf += text

    def advance(self, to: int) -> None:
        self.line += self.buf.count("\n", self.pos, to)
        self.pos = to

    def skip_ws(self) -> str:
        """The next non-blank character (not consumed); "" at the end of the document."""
        while True:
            buf, pos = self.buf, self.pos
            n = len(buf)
            while pos < n and buf[pos] in _WS:
                pos += 1
            self.advance(pos)
            if pos < n:
                return buf[pos]
            if not self.more():
                return ""

    def expect(self, chars: str) -> str:
        ch = self.skip_ws()
        if not ch or ch not in chars:
            raise ScanError(f"expected one of {chars!r} at line {self.line}, found {ch or 'the end'!r}")
        self.advance(self.pos + 1)
        return ch

    def value(self) -> tuple[int, Any]:
        """(start line, decoded value) of the JSON value at the cursor."""
        self.skip_ws()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.buf, self.pos)
            except json.JSONDecodeError as err:
                # Most likely the value runs past the buffer: read more and try again (the
                # buffer doubles, so an item of n chars costs at most ~2n chars of decoding).
                if len(self.buf) - self.pos > MAX_ITEM:
                    raise ScanError(f"an item at line {self.line} is larger than {MAX_ITEM} chars") from err
                if not self.more(max(len(self.buf) - self.pos, CHUNK)):
                    raise ScanError(f"invalid or cut-short JSON at line {self.line}: {err.msg}") from err
                continue
            # A number at the very end of the buffer may have more digits to come.
            if end == len(self.buf) and not self.eof and not isinstance(value, (dict, list, str)) and self.more():
                continue
            line = self.line
            self.advance(end)
            return line, value


def iter_array(fp: IO[bytes]) -> Iterator[tuple[int, Any]]:
    """(line, item) for each item of the top-level JSON array in ``fp``."""
    text = _Text(fp)
    text.expect("[")
    yield from _items(text)


def _items(text: _Text) -> Iterator[tuple[int, Any]]:
    if text.skip_ws() == "]":
        text.advance(text.pos + 1)
        return
    while True:
        yield text.value()
        if text.expect(",]") == "]":
            return


def iter_object(fp: IO[bytes], stream: frozenset[str] = frozenset()) -> Iterator[tuple[str, int, Any]]:
    """(key, line, value) for each key of the top-level JSON object in ``fp``; a key in
    ``stream`` whose value is an array gives (key, line, item) for each item instead, so that
    array is never held whole."""
    text = _Text(fp)
    text.expect("{")
    if text.skip_ws() == "}":
        return
    while True:
        _, key = text.value()
        if not isinstance(key, str):
            raise ScanError(f"an object key at line {text.line} is not a string")
        text.expect(":")
        if key in stream and text.skip_ws() == "[":
            text.advance(text.pos + 1)
            for line, item in _items(text):
                yield key, line, item
        else:
            line, value = text.value()
            yield key, line, value
        if text.expect(",}") == "}":
            return
