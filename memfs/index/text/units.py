"""The passages inside a chunk that search scores one by one and cites: the "units".

A chunk (about 400 tokens) is the unit of candidate retrieval; what answers a question is usually
a few lines in it.  Units are cut so that each says one thing:

- Markdown: a block of non-blank lines, with the heading right above it (a daily log's
  ``## 13:58 - Caroline`` belongs to the turn under it); a list item (with its continuation
  lines) on its own; a longer block in windows of ``WINDOW_LINES`` lines.  A unit that does not
  hold its heading carries it as ``context``, which the embedding model and the keyword match
  read too (``## Preferences`` above ``- tea, no sugar``).
- JSONL: one message (a message cut in pieces for being too long: one unit per piece), with its
  chat's title (a sync chat's ``chatTitle``, a transcript's session header) as context: what a
  Markdown turn's heading is to the turn.  A title can name the topic ("Lisbon trip") or nothing
  ("Caroline & Melanie - session 3 (7:55 pm on 9 June, 2023)"), so a message has a twin the model
  reads without it, as a fact has (below); both carry the title in the keyword signal.

Units cite 1-based lines like chunks do, so a search result can cite exactly what matched.

The embedding model reads text without Markdown's marks (:func:`plain`): it learned from prose,
and "## Health / - The user is allergic to penicillin." is further from "medication allergy"
(cosine 0.47) than "Health / The user is allergic to penicillin." (0.58).

Facts written as list items or ``key: value`` lines (MEMORY.md as the template shapes it) are
each their own unit, with the path of headings above them (``User Preferences / Health``) as
context.  A heading helps the vector when it names the topic ("Health") and dilutes it when it is
generic: "medication allergy" meets "User Preferences / The user is allergic to penicillin." at
0.45 and the item alone at 0.57.  So such a unit has a *twin* over the same lines that the model
reads without its context (``reading``); search keeps whichever of the two scores higher, and
both carry the headings in the keyword signal.  A ``key: value`` line has a third reading, its key
alone: the value is often a name the model knows nothing about ("Priya Raman" is 0.16 from "what is
my spouse called") while the key says what it is ("Wife": 0.56; the whole line: 0.41).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WINDOW_LINES = 4  # a plain block longer than this is cut into windows of this many lines
# A message longer than this is cut into passages of about this size at its paragraphs (about 120
# tokens: the size of a Markdown unit of WINDOW_LINES lines of prose).
PARAGRAPH_CHARS = 480
_LIST_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s")
# A ``key: value`` fact: a label of at most KEY_WORDS words and a value of at most VALUE_WORDS words
# (a label names an attribute: "Wife", "Favourite food", "Home city"; a longer value is prose whose
# own words carry its meaning, and "Caroline: I went to the support group..." is a turn of dialogue,
# not a fact whose key says what it is).  A URL's scheme or a time ("at 10:30") is not a key.
KEY_WORDS = 4
VALUE_WORDS = 8
_KEY_VALUE = re.compile(r"^\s{0,3}(?:(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?)?"
                        r"(?:\*\*|__)?(?P<key>[^\W\d_][^:\n]{0,40}?)(?:\*\*|__)?\s*:(?:\*\*|__)?\s+(?P<value>\S.*)$")
_HEADING_LEVEL = re.compile(r"^\s{0,3}(#{1,6})\s")
_MARKS = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?)+")


# _MARKS over a whole text at once: the same marks at the start of every line, none of its
# whitespace a newline (so no match runs into the next line).
_MARKS_LINES = re.compile(r"^[^\S\n]*(?:#{1,6}[^\S\n]+|>[^\S\n]*|(?:[-*+]|\d{1,3}[.)])[^\S\n]+(?:\[[ xX]\][^\S\n]+)?)+",
                          re.MULTILINE)


def plain(text: str) -> str:
    """Text as the embedding model should read it: heading hashes, quote marks, list markers
    and task boxes dropped from the start of every line."""
    return _MARKS_LINES.sub("", text)


@dataclass(frozen=True)
class Unit:
    start_line: int
    end_line: int
    text: str  # the unit's non-blank lines, joined with newlines
    context: str = ""  # the headings above it, when the unit does not include them
    reading: str = ""  # what the model reads instead of context and text (a twin, see above)

    @property
    def keyword_text(self) -> str:
        """What the keyword signal reads: the unit with its headings."""
        return plain(f"{self.context}\n{self.text}" if self.context else self.text)

    @property
    def embedding_text(self) -> str:
        return self.reading or self.keyword_text


def key_of(line: str) -> str | None:
    """The key of a ``key: value`` fact line, or None."""
    match = _KEY_VALUE.match(line)
    if match is None or _is_heading(line):
        return None
    key, value = match.group("key").strip(), match.group("value").strip()
    if not key or len(key.split()) > KEY_WORDS or len(value.split()) > VALUE_WORDS or value.startswith("//"):
        return None
    return key


def twins(unit: Unit) -> list[Unit]:
    """A fact unit (a list item or a key: value line under a heading) with its other readings."""
    out = [unit]
    alone = plain(unit.text)
    if unit.context and alone.strip():
        out.append(Unit(unit.start_line, unit.end_line, unit.text, unit.context, alone))
    key = key_of(unit.text) if "\n" not in unit.text else None
    if key is not None:
        out.append(Unit(unit.start_line, unit.end_line, unit.text, unit.context, key))
    return out


def _is_heading(line: str) -> bool:
    return line.lstrip().startswith("#")


def _blocks(numbered: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Runs of non-blank lines; a heading starts a new one even with no blank line above it
    (entries appended one under the other: ``## 11:30 - lunch`` then ``## 12:00 - deploy``)."""
    blocks: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    for number, line in numbered:
        if line.strip():
            if current and _HEADING_LEVEL.match(line):
                blocks.append(current)
                current = []
            current.append((number, line))
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def _pieces(block: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """A block cut into facts (list items, key: value lines), or into windows of WINDOW_LINES lines."""
    starts = [_is_fact(line) for _, line in block]
    if any(starts):
        items: list[list[tuple[int, str]]] = []
        for (number, line), starts_item in zip(block, starts):
            if starts_item or not items:
                items.append([(number, line)])
            else:
                items[-1].append((number, line))
        return items
    return [block[i : i + WINDOW_LINES] for i in range(0, len(block), WINDOW_LINES)]


class _Headings:
    """The path of headings above a line: ``## User Preferences`` then ``### Health`` gives both.
    A document's title (``#``) counts only when nothing deeper is open: it names the file, not
    the topic."""

    def __init__(self) -> None:
        self.open: list[tuple[int, str]] = []

    def enter(self, line: str) -> None:
        match = _HEADING_LEVEL.match(line)
        level = len(match.group(1)) if match else 1
        while self.open and self.open[-1][0] >= level:
            self.open.pop()
        self.open.append((level, line.strip()))

    @property
    def path(self) -> str:
        deeper = [text for level, text in self.open if level >= 2]
        return "\n".join(deeper or [text for _, text in self.open])


def _is_fact(line: str) -> bool:
    return bool(_LIST_ITEM.match(line)) or key_of(line) is not None


def markdown_units(numbered: list[tuple[int, str]], headings_alone: bool = True) -> list[Unit]:
    """``headings_alone``: a heading with no text of its own below it (the next line is a heading,
    or facts that carry it as their context) is a unit of its own.  In a daily log such a heading
    can be the entry itself (``## 14:00 Called the dentist``); in MEMORY.md headings name the
    sections facts are filed under, and an empty one (the template's ``## People``) is a
    placeholder, not something a search should answer with."""
    units: list[Unit] = []
    emit = units.append if headings_alone else (lambda unit: None)
    headings = _Headings()
    pending: tuple[int, str] | None = None  # a heading waiting for the block under it
    for block in _blocks(numbered):
        if len(block) == 1 and _is_heading(block[0][1]):
            if pending is not None:
                emit(Unit(pending[0], pending[0], pending[1]))  # a heading with nothing under it
            pending = block[0]
            headings.enter(block[0][1])
            continue
        if _is_heading(block[0][1]):
            headings.enter(block[0][1])
            if pending is not None:
                emit(Unit(pending[0], pending[0], pending[1]))
            pending, block = block[0], block[1:]
        if pending is not None and block and _is_fact(block[0][1]):
            # Facts under a heading stand alone, the heading as their context (a turn of a daily
            # log keeps its "## 13:58 - Caroline" inside it instead).
            emit(Unit(pending[0], pending[0], pending[1]))
            pending = None
        for index, piece in enumerate(_pieces(block)):
            lines = [line for _, line in piece]
            start = piece[0][0]
            if index == 0 and pending is not None:
                units.append(Unit(pending[0], piece[-1][0], "\n".join([pending[1], *lines])))
                pending = None
                continue
            unit = Unit(start, piece[-1][0], "\n".join(lines), headings.path)
            units.extend(twins(unit) if _is_fact(lines[0]) else [unit])
    if pending is not None:
        emit(Unit(pending[0], pending[0], pending[1]))
    return units


def message_units(numbered: list[tuple[int, str]], title: str = "") -> list[Unit]:
    """One unit per message (a long one: per paragraph, see :func:`_paragraphs`), its chat's
    title as context, with its twin read without it."""
    units: list[Unit] = []
    for number, whole in numbered:
        for text in _paragraphs(whole):
            unit = Unit(number, number, text, title)
            units.extend([unit, Unit(number, number, text, title, plain(text))] if title else [unit])
    return units


def _paragraphs(text: str) -> list[str]:
    """A message's passages: the whole message, or, when it is longer than PARAGRAPH_CHARS (an
    agent's answer of several paragraphs, a pasted log), its paragraphs joined up to about that
    size (a run of lines without a blank one cut where it grows past it).  Each says one thing,
    so search scores it and shows it apart, where the message's first words would otherwise stand
    for all of it; they cite the message's line, as pieces of an over-long one always did."""
    if len(text) <= PARAGRAPH_CHARS:
        return [text] if text.strip() else []
    pieces: list[str] = []
    for block in re.split(r"\n[ \t]*\n", text):
        lines = block.split("\n")
        current: list[str] = []
        for line in lines:
            if current and len("\n".join(current)) + len(line) + 1 > PARAGRAPH_CHARS:
                pieces.append("\n".join(current))
                current = []
            current.append(line)
        if current:
            pieces.append("\n".join(current))
    out: list[str] = []
    for piece in pieces:
        if not piece.strip():
            continue
        if out and len(out[-1]) + len(piece) + 2 <= PARAGRAPH_CHARS:
            out[-1] = f"{out[-1]}\n\n{piece}"
        else:
            out.append(piece)
    return out
