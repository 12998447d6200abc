"""Splitting memory files into chunks that cite 1-based line ranges.

Markdown: line-aware chunks of about ``max_tokens`` cl100k tokens, consecutive chunks sharing about
``overlap`` tokens of whole lines; a line longer than a chunk is split into pieces that all cite
that line.  (Cutting dialogue logs at turn headings was tried on the LoCoMo dev set and lost recall
to plain overlap, so the chunker stays line-aware only.)

JSONL: one rendered message per line (see :mod:`memfs.index.text.messages`), grouped into chunks that
never split a message and never mix two chats (nor two sessions): a chunk holds a run of
consecutive lines of one chat, so its vector describes that chat and its citation covers no other
chat's line.  The chat's title heads the chunk's text (``# title``), so the keyword index finds a
chunk by a word only the title holds, as it finds a Markdown chunk by its headings; the chunk
cites the JSONL line numbers of its first and last message.

A write too big to chunk before its writer's close() returns is first cut by :func:`provisional`
(lines grouped by characters, no tokenizer, no units): enough for the keyword index until the exact
chunks replace them (:mod:`memfs.index.bigwrites`).

Every chunk also carries its units (:mod:`memfs.index.text.units`), the passages search scores and
cites one by one.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

from memfs.index.text import tokens
from memfs.index.text.messages import Message
from memfs.index.text.units import Unit, markdown_units, message_units

CHUNKER_VERSION = 8  # 3: chunks carry units; 4: the model reads text without Markdown marks;
# 5: facts (list items, key: value lines) are units with twins; 6: a JSONL chunk holds one chat,
# headed by its title, and its messages carry the title (with twins read without it); 7: MEMORY.md's
# headings are units only with text of their own under them (an empty section is a placeholder);
# 8: a message longer than units.PARAGRAPH_CHARS is a unit per paragraph

@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    text: str
    units: tuple[Unit, ...] = field(default=(), compare=False)
    chat_id: str = ""  # JSONL: the chat (or session) every message of the chunk belongs to
    chat_title: str = ""


@dataclass(frozen=True)
class _Segment:
    line: int
    text: str
    tokens: int


def _segments(numbered: list[tuple[int, str]], max_tokens: int) -> list[_Segment]:
    """One segment per line, or several for a line longer than a chunk."""
    segments: list[_Segment] = []
    for number, line in numbered:
        n = tokens.count(line) + 1  # +1 for the newline that joins it to the next line
        if n <= max_tokens:
            segments.append(_Segment(number, line, n))
            continue
        for piece in _pieces(line, max_tokens - 1):
            segments.append(_Segment(number, piece, tokens.count(piece) + 1))
    return segments


_BREAK = re.compile(r"(?<=\n)")  # after each newline: the pieces of a text joined give it back


def _pieces(text: str, max_tokens: int) -> list[str]:
    """A line longer than a chunk (a long message: an agent's answer, a pasted log) cut into
    pieces of at most ``max_tokens`` that join to it exactly, at its lines (a paragraph's end
    first: the piece that ends at the last blank line that fits), so no passage starts in the
    middle of a sentence; a single line longer than that is cut by tokens."""
    pieces: list[str] = []
    current = ""
    for part in _BREAK.split(text):
        if not part:
            continue
        if current and tokens.count(current + part) > max_tokens:
            # Back to the last paragraph break in the piece, if it holds one past its start.
            cut = current.rfind("\n\n", 0, len(current) - 1)
            if cut > 0:
                pieces.append(current[: cut + 2])
                current = current[cut + 2 :]
                if tokens.count(current + part) <= max_tokens:
                    current += part
                    continue
            pieces.append(current)
            current = ""
        if tokens.count(part) > max_tokens:
            pieces.extend(tokens.split_by_tokens(part, max_tokens))
            continue
        current += part
    if current:
        pieces.append(current)
    merged: list[str] = []
    for piece in pieces:  # a blank line alone is no passage: it stays with the piece it ends
        if merged and not piece.strip():
            merged[-1] += piece
        else:
            merged.append(piece)
    return merged


def _group(segments: list[_Segment], max_tokens: int, overlap: int) -> list[list[_Segment]]:
    """Greedy grouping with whole-segment overlap; no group is made only of overlap."""
    groups: list[list[_Segment]] = []
    current: list[_Segment] = []
    size = 0
    fresh = False  # does `current` hold anything not carried over from the previous group?
    for seg in segments:
        if fresh and size + seg.tokens > max_tokens:
            groups.append(current)
            carry: list[_Segment] = []
            carried = 0
            for previous in reversed(current):
                if carried + previous.tokens > overlap:
                    break
                carry.insert(0, previous)
                carried += previous.tokens
            current, size, fresh = carry, carried, False
        while current and size + seg.tokens > max_tokens:
            size -= current.pop(0).tokens
        current.append(seg)
        size += seg.tokens
        fresh = True
    if current and fresh:
        groups.append(current)
    return groups


Segmenter = Callable[[list[tuple[int, str]]], list[Unit]]


def _join(group: list[_Segment], segmenter: Segmenter) -> Chunk:
    parts: list[str] = []
    lines: list[tuple[int, str]] = []
    previous_line = -1
    for seg in group:
        if seg.line == previous_line:
            parts[-1] += seg.text  # pieces of one overlong line join without a newline
            lines[-1] = (seg.line, lines[-1][1] + seg.text)
        else:
            parts.append(seg.text)
            lines.append((seg.line, seg.text))
        previous_line = seg.line
    return Chunk(group[0].line, group[-1].line, "\n".join(parts), tuple(segmenter(lines)))


def _chunks(numbered: list[tuple[int, str]], max_tokens: int, overlap: int, segmenter: Segmenter) -> list[Chunk]:
    chunks = [_join(g, segmenter) for g in _group(_segments(numbered, max_tokens), max_tokens, overlap)]
    return [c for c in chunks if c.text.strip()]


def chunk_markdown(text: str, max_tokens: int, overlap: int, headings_alone: bool = True) -> list[Chunk]:
    """``headings_alone``: see :func:`memfs.index.text.units.markdown_units` (false for MEMORY.md)."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the file starts no line of its own
    return _chunks(list(enumerate(lines, start=1)), max_tokens, overlap,
                   lambda numbered: markdown_units(numbered, headings_alone))


def _runs(messages: list[Message]) -> list[list[Message]]:
    """Consecutive messages of one chat."""
    runs: list[list[Message]] = []
    for message in messages:
        if runs and (runs[-1][-1].chat_id, runs[-1][-1].chat_title) == (message.chat_id, message.chat_title):
            runs[-1].append(message)
        else:
            runs.append([message])
    return runs


def chunk_messages(messages: list[Message], max_tokens: int, overlap: int) -> list[Chunk]:
    """Group rendered messages into chunks of at most ``max_tokens`` (the title line included),
    one chat per chunk; a message is never split unless it alone exceeds the limit, in which
    case its pieces all cite its line."""
    out: list[Chunk] = []
    for run in _runs(messages):
        chat_id, title = run[0].chat_id, run[0].chat_title
        heading = f"# {title}" if title else ""
        room = max_tokens - (tokens.count(heading) + 1 if heading else 0)
        room = max(room, max_tokens // 2)  # a title is cut to TITLE_CHARS, so this is a guard only
        for chunk in _chunks([(m.line, m.text) for m in run], room, min(overlap, room // 4),
                             lambda lines: message_units(lines, title)):
            text = f"{heading}\n{chunk.text}" if heading else chunk.text
            out.append(Chunk(chunk.start_line, chunk.end_line, text, chunk.units, chat_id, title))
    return out


# cl100k reads about four characters of English per token: a provisional chunk holds about as much
# text as an exact one.
CHARS_PER_TOKEN = 4


def provisional(text: str, max_tokens: int, first_line: int = 1) -> list[Chunk]:
    """The text's lines grouped into chunks of at most about ``max_tokens`` tokens by their
    length in characters (cut at the last newline that fits), without overlap or units; a line
    longer than a chunk is cut into pieces that all cite it.  Each chunk's text is exactly its
    lines, so its line numbers are the file's.  Found by searching for newlines, not by walking
    the lines: 30 MB of short lines cost 0.8 s that way, this way a tenth."""
    limit = max(1, max_tokens * CHARS_PER_TOKEN)
    end = len(text) - 1 if text.endswith("\n") else len(text)  # the last newline starts no line
    out: list[Chunk] = []
    start, line = 0, first_line
    while start < end:
        cut = text.rfind("\n", start, start + limit + 1) if start + limit < end else end
        if cut > start or (cut == start and start < end):
            lines = text.count("\n", start, cut)
            out.append(Chunk(line, line + lines, text[start:cut]))
            line += lines + 1
            start = cut + 1
            continue
        # One line longer than a chunk: pieces that all cite it.
        stop = text.find("\n", start, end)
        stop = end if stop < 0 else stop
        out.extend(Chunk(line, line, text[i : min(i + limit, stop)]) for i in range(start, stop, limit))
        line += 1
        start = stop + 1
    return [c for c in out if c.text.strip()]
