"""Late chunking: where each unit lies in its chunk's text, so the model reads the chunk once and a
unit's vector is the mean of the output states of its word pieces there
(:meth:`memfs.index.embedding.providers.LocalProvider.embed_spans`).

Reading a chunk and then each of its units read every line two to four times; a vector made as
a mean of separately read parts (:mod:`memfs.index.embedding.readings`) reads each once but loses what the
model sees when it reads a message with its chat's title (the dev set's sync chats lost R@6 .834
-> .800).  Here every piece of a unit's vector has been read with the whole chunk around it, the
title included, in one reading.

A unit's span set, in the chunk's text as the model reads it (``plain(chunk.text)``):

- a unit without context: its lines;
- a unit with a context (a chat's title, the headings above a fact) that the chunk holds above
  it: the context's lines and its own;
- a twin read without its context (its reading is its own text): its lines.

Anything else (a ``key: value`` fact's key alone, a context the chunk does not hold because its
heading lies above the chunk's first line, a unit whose lines cannot be found) has no span and
is read on its own, as it is when the chunk is read whole.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from memfs.index.text.units import plain
from memfs.workspace import LONG_TERM_NAMES, FileKind

Span = list[tuple[int, int]]


def read_as(mode: str, kind: FileKind) -> str:
    """How a file of this kind is read in this reading mode: "late", "once" or "whole".

    Under "late-chats-once" (the default) a chat (JSONL) is read late: its units are turns of
    one conversation under a title, which mean more read with the text around them.  Markdown is
    read once: each unit alone, a chunk's vector the mean of its units' (:mod:`memfs.index.embedding.readings`).
    Read late, a daily log of unrelated entries lost each entry's own meaning ("tyre pressure"
    .85 -> .44 beside entries about a book, a vet and a curry), as MEMORY.md's facts did; read
    once, a unit's vector is exactly its whole reading, for a third of the work.

    Under "late-auto" a chat and any Markdown but MEMORY.md are read late, MEMORY.md once.
    "late-chats" (chats late, Markdown whole) is how indexes built before "late-chats-once" were
    read: their fingerprint still names it."""
    if mode == "once":
        return "once"
    if mode == "late" or (mode in ("late-chats", "late-auto", "late-chats-once") and kind.is_jsonl):
        return "late"
    if mode == "late-chats-once":
        return "once"
    if mode == "late-auto":
        return "once" if kind is FileKind.LONG_TERM else "late"
    return "whole"


def reading_of(mode: str, path: str, jsonl: bool) -> str:
    """How a stored chunk was read ("late", "once" or "whole"), from the reading mode the index
    was built with (its fingerprint's "readings")."""
    kind = FileKind.SYNC if jsonl else FileKind.LONG_TERM if path in LONG_TERM_NAMES else FileKind.DAILY_LOG
    return read_as(mode, kind)


class _Unit(Protocol):
    id: int
    start_line: int
    end_line: int
    text: str
    context: str
    reading: str


class _Lines:
    """A text's lines and where each starts."""

    def __init__(self, text: str) -> None:
        self.lines = text.split("\n")
        self.starts: list[int] = []
        offset = 0
        for line in self.lines:
            self.starts.append(offset)
            offset += len(line) + 1

    def range(self, index: int) -> tuple[int, int]:
        return self.starts[index], self.starts[index] + len(self.lines[index])

    def find(self, line: str, begin: int) -> int:
        """The first line from ``begin`` on that is ``line``, or -1."""
        for index in range(begin, len(self.lines)):
            if self.lines[index] == line:
                return index
        return -1

    def find_before(self, line: str, end: int) -> int:
        """The last line before ``end`` that is ``line``, or -1."""
        for index in range(end - 1, -1, -1):
            if self.lines[index] == line:
                return index
        return -1


def unit_spans(chunk_text: str, units: Iterable[_Unit]) -> dict[int, Span | None]:
    """Each unit's span set in ``chunk_text`` (the chunk as the model reads it), by unit id;
    None for a unit that must be read on its own.  Units are taken in the order of their lines;
    each one's lines are looked for after the previous one's, so a line repeated in the chunk
    is found where the unit is."""
    lines = _Lines(chunk_text)
    found: dict[tuple[int, int], tuple[int, Span] | None] = {}  # lines -> (first line index, ranges)
    cursor = 0
    out: dict[int, Span | None] = {}
    for unit in sorted(units, key=lambda u: (u.start_line, u.end_line)):
        key = (unit.start_line, unit.end_line)
        if key not in found:
            found[key] = None
            ranges: Span = []
            first = -1
            at = cursor
            for line in plain(unit.text).split("\n"):
                index = lines.find(line, at)
                if index < 0:
                    ranges = []
                    break
                first = index if first < 0 else first
                ranges.append(lines.range(index))
                at = index + 1
            if ranges:
                found[key] = (first, ranges)
                cursor = at
        place = found[key]
        if place is None:
            out[unit.id] = None
            continue
        first, ranges = place
        if unit.reading:
            out[unit.id] = list(ranges) if unit.reading == plain(unit.text) else None
            continue
        if not unit.context:
            out[unit.id] = list(ranges)
            continue
        context: Span = []
        end = first
        for line in reversed(plain(unit.context).split("\n")):
            index = lines.find_before(line, end)
            if index < 0:
                context = []
                break
            context.insert(0, lines.range(index))
            end = index
        out[unit.id] = context + list(ranges) if context else None
    return out
