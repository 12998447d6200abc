"""Bytes that may not all be text, as text that is safe to index, show and put in a prompt.

One function for every route a memory file's text leaves by (the index, and so search snippets;
``memfs get``; the context bundle), so a stray byte looks the same everywhere: undecodable bytes
and control characters become U+FFFD (a run of them one mark), and a line that is mostly such
bytes (binary noise appended to a note) keeps only its words that are text.  Lines keep their numbers, so citations
still hold.  Newline and tab are the only control characters left: an ANSI escape sequence
(ESC, or the C1 CSI) in memory must not reach an agent's prompt or a terminal.  A carriage
return that ends a line (CRLF) is a line ending, not junk, and is dropped without counting.

Terminal control sequences (terminal output pasted into a note or a chat: colours, a window
title) are removed whole, parameters and all, and not counted as bytes that are not text: they
are formatting, like a line ending.  Marking only their escape byte left the rest glued to the
next word: ``\x1b[1;31mzookeeper`` was indexed as ``31mzookeeper``, so ``zookeeper`` found
nothing, and the snippet showed ``\ufffd[1;31mzookeeper``.  A sequence cut short (an escape at
the end of a line, an OSC never terminated) is not one: its escape byte is a mark as before.
"""

from __future__ import annotations

import re

# C0 controls but tab and newline, DEL, C1 controls, and U+FFFD itself (what decoding made of
# bytes that are not UTF-8).
_CONTROL = "\x00-\x08\x0b-\x1f\x7f-\x9f"
_JUNK = re.compile(f"[{_CONTROL}\ufffd]+")
JUNK_LINE_SHARE = 0.3  # a line (or word) more junk than this is binary noise, not text with a stray byte
# Noise: a run of junk with whatever sticks to it up to the next space (random bytes decode to
# some printable characters too).
_NOISE = re.compile(f"[{_CONTROL}\ufffd]+\\S*(?:\\s+\\S*?[{_CONTROL}\ufffd]+\\S*)*")
# A stretch of text kept from a noisy line holds a word of at least three letters or digits in a
# row: random bytes decode to stray printable characters, rarely to three alphanumerics in a row.
_WORDLIKE = re.compile(r"[^\W_]{3}")
# Terminal control sequences (ECMA-48), whole:
# - CSI (ESC [ or C1 CSI): parameter bytes 0x30-0x3F, intermediates 0x20-0x2F, a final 0x40-0x7E
#   (colours ``\x1b[1;31m``, cursor moves, ``\x1b[2J``);
# - OSC, DCS, SOS, PM, APC (ESC ] P X ^ _, or their C1 forms): a string ended by BEL or ST (ESC \
#   or C1 ST), on one line and at most 512 characters (a window title, a hyperlink's target);
# - any other escape: ESC, intermediates, a final 0x30-0x7E (``\x1b(B``, ``\x1b7``, ``\x1b=``).
_TERMINAL = re.compile(
    "(?:\x1b\\[|\x9b)[0-?]*[ -/]*[@-~]"
    "|(?:\x1b[\\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c\n]{0,512}(?:\x07|\x1b\\\\|\x9c)"
    "|\x1b(?![\\[\\]PX^_])[ -/]*[0-~]"
)


def without_terminal_codes(text: str) -> tuple[str, int]:
    """(text without its terminal control sequences, how many bytes of UTF-8 they held)."""
    removed = 0

    def drop(match: re.Match[str]) -> str:
        nonlocal removed
        removed += len(match.group(0).encode("utf-8"))
        return ""

    return _TERMINAL.sub(drop, text), removed


def clean_str(text: str) -> str:
    """Text already decoded (a chat message's content from its JSON, where an escape byte is
    written ``\\u001b``) as :func:`clean_text` makes a file's: no terminal sequence, and every
    other control character a mark."""
    if not _JUNK.search(text):
        return text
    text, _ = without_terminal_codes(text)
    return "\n".join(_clean_line(line) for line in text.split("\n")) if _JUNK.search(text) else text


def _clean_line(line: str) -> str:
    """A line with its junk as marks: a line mostly text keeps every word, a stray byte a mark;
    a noisy line (binary appended to a note without a newline) keeps the stretches of text in
    it and drops the noise between them as one mark, so "Garage code 5521 <noise>" keeps its
    fact."""
    junk = sum(len(m.group(0)) for m in _JUNK.finditer(line))
    if not junk:
        return line
    if junk <= JUNK_LINE_SHARE * len(line):
        return _JUNK.sub("\ufffd", line)
    stretches = [part.strip() for part in _NOISE.split(line)]
    kept = [part for part in stretches if _WORDLIKE.search(part)]
    if not kept:
        return ""
    text = " \ufffd ".join(kept)
    if stretches[0] != kept[0]:
        text = "\ufffd " + text
    if stretches[-1] != kept[-1]:
        text += " \ufffd"
    return text


# Every byte but the C0 controls (tab and newline aside) and DEL: deleting these from a file's
# bytes leaves its control bytes, in C, at memory speed.
_NOT_CONTROL = bytes(b for b in range(256) if not (b < 9 or 10 < b < 32 or b == 127))
_C1_UTF8 = re.compile(rb"\xc2[\x80-\x9f]")


def _clean_already(data: bytes) -> str | None:
    """The text of bytes that are valid UTF-8 without a control character, carriage return or
    U+FFFD (almost every file), found without a regular expression over all of it (0.7 s for 30
    MB); None for the rest."""
    if data.translate(None, _NOT_CONTROL) or b"\xef\xbf\xbd" in data or (b"\xc2" in data and _C1_UTF8.search(data)):
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None


def clean_text(data: bytes) -> tuple[str, int]:
    """(text, how many bytes were not kept as text) from bytes that may not all be text."""
    text = _clean_already(data)
    if text is not None:
        return (text[1:] if text.startswith("\ufeff") else text), 0
    text = data.decode("utf-8", errors="replace")
    endings = text.count("\r\n")
    if endings:
        text = text.replace("\r\n", "\n")
    bom = text.startswith("\ufeff")
    text, formatting = without_terminal_codes(text)
    if not _JUNK.search(text):
        return text[1:] if bom else text, 0
    text = "\n".join(_clean_line(line) for line in text.split("\n"))
    if bom:
        text = text.lstrip("\ufeff")
    kept = len(text.replace("\ufffd", "").encode("utf-8"))
    return text, max(0, len(data) - kept - endings - formatting - (3 if bom else 0))


def describe(bad: int) -> str:
    """How many bytes were not text, said the same way wherever it is said."""
    return f"{bad} {'byte is' if bad == 1 else 'bytes are'} not text (shown as \ufffd)"
