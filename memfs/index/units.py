"""The passages inside a chunk that search scores one by one and cites: the "units".

A chunk (about 400 tokens) is the unit of candidate retrieval; what answers a question is usually
a few lines in it.  Units are cut so that each says one thing:

- Markdown: a block of non-blank lines, with the heading right above it (a daily log's
  ``## 13:58 - Caroline`` belongs to the turn under it); a list item (with its continuation
  lines) on its own; a longer block in windows of ``WINDOW_LINES`` lines.  A unit that does not
  hold its heading carries it as ``context``, which the embedding model and the keyword match
  read too (``## Preferences`` above ``- tea, no sugar``).
- JSONL: one message (a message cut in pieces for being too long: one unit per piece).

Units cite 1-based lines like chunks do, so a search result can cite exactly what matched.

The embedding model reads text without Markdown's marks (:func:`plain`): it learned from prose,
and "## Health / - The user is allergic to penicillin." is further from "medication allergy"
(cosine 0.47) than "Health / The user is allergic to penicillin." (0.58).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

WINDOW_LINES = 4  # a plain block longer than this is cut into windows of this many lines
_LIST_ITEM = re.compile(r"^\s{0,3}(?:[-*+]|\d{1,3}[.)])\s")
_MARKS = re.compile(r"^\s*(?:#{1,6}\s+|>\s*|(?:[-*+]|\d{1,3}[.)])\s+(?:\[[ xX]\]\s+)?)+")


def plain(text: str) -> str:
    """Text as the embedding model should read it: heading hashes, quote marks, list markers
    and task boxes dropped from the start of every line."""
    return "\n".join(_MARKS.sub("", line) for line in text.split("\n"))


@dataclass(frozen=True)
class Unit:
    start_line: int
    end_line: int
    text: str  # the unit's non-blank lines, joined with newlines
    context: str = ""  # the heading above it, when the unit does not include it

    @property
    def embedding_text(self) -> str:
        return plain(f"{self.context}\n{self.text}" if self.context else self.text)


def _is_heading(line: str) -> bool:
    return line.lstrip().startswith("#")


def _blocks(numbered: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """Runs of non-blank lines."""
    blocks: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    for number, line in numbered:
        if line.strip():
            current.append((number, line))
        elif current:
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def _pieces(block: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    """A block cut into list items, or into windows of WINDOW_LINES lines."""
    if any(_LIST_ITEM.match(line) for _, line in block):
        items: list[list[tuple[int, str]]] = []
        for number, line in block:
            if _LIST_ITEM.match(line) or not items:
                items.append([(number, line)])
            else:
                items[-1].append((number, line))
        return items
    return [block[i : i + WINDOW_LINES] for i in range(0, len(block), WINDOW_LINES)]


def markdown_units(numbered: list[tuple[int, str]]) -> list[Unit]:
    units: list[Unit] = []
    heading = ""
    pending: tuple[int, str] | None = None  # a heading waiting for the block under it
    for block in _blocks(numbered):
        if len(block) == 1 and _is_heading(block[0][1]):
            if pending is not None:
                units.append(Unit(pending[0], pending[0], pending[1]))  # a heading with nothing under it
            pending = block[0]
            heading = block[0][1].strip()
            continue
        if _is_heading(block[0][1]):
            heading = block[0][1].strip()
            if pending is not None:
                units.append(Unit(pending[0], pending[0], pending[1]))
            pending, block = block[0], block[1:]
        for index, piece in enumerate(_pieces(block)):
            lines = [line for _, line in piece]
            start = piece[0][0]
            if index == 0 and pending is not None:
                units.append(Unit(pending[0], piece[-1][0], "\n".join([pending[1], *lines])))
                pending = None
                continue
            units.append(Unit(start, piece[-1][0], "\n".join(lines), heading))
    if pending is not None:
        units.append(Unit(pending[0], pending[0], pending[1]))
    return units


def message_units(numbered: list[tuple[int, str]]) -> list[Unit]:
    return [Unit(number, number, text) for number, text in numbered if text.strip()]
