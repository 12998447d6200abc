"""Splitting memory files into chunks that cite 1-based line ranges.

Markdown: line-aware chunks of about ``max_tokens`` cl100k tokens, consecutive chunks sharing about
``overlap`` tokens of whole lines; a line longer than a chunk is split into pieces that all cite
that line.  (Cutting dialogue logs at turn headings was tried on the LoCoMo dev set and lost recall
to plain overlap, so the chunker stays line-aware only.)

JSONL: one rendered message per line (see :mod:`memfs.index.messages`), grouped into chunks that
never split a message; the chunk cites the JSONL line numbers of its first and last message.

Every chunk also carries its units (:mod:`memfs.index.units`), the passages search scores and
cites one by one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from memfs.index import tokens
from memfs.index.messages import Message
from memfs.index.units import Unit, markdown_units, message_units


@dataclass(frozen=True)
class Chunk:
    start_line: int
    end_line: int
    text: str
    units: tuple[Unit, ...] = field(default=(), compare=False)


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
        for piece in tokens.split_by_tokens(line, max_tokens - 1):
            segments.append(_Segment(number, piece, tokens.count(piece) + 1))
    return segments


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


def chunk_markdown(text: str, max_tokens: int, overlap: int) -> list[Chunk]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()  # the newline that ends the file starts no line of its own
    return _chunks(list(enumerate(lines, start=1)), max_tokens, overlap, markdown_units)


def chunk_messages(messages: list[Message], max_tokens: int, overlap: int) -> list[Chunk]:
    """Group rendered messages into chunks of at most ``max_tokens``; a message is never split
    unless it alone exceeds the limit, in which case its pieces all cite its line."""
    return _chunks([(m.line, m.text) for m in messages], max_tokens, overlap, message_units)
