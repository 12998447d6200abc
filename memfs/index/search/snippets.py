"""Snippets: the lines a result shows, cut around what matched.

A result is its best unit (a passage: see :mod:`memfs.index.text.units`), grown by neighbouring
units of its chunk that belong with it (their own evidence for the query, or being about the
same thing as the match), then a line of context, all within ``search.snippet_chars``; its
citation covers exactly those lines.  Two results of one file never show the same lines.
"""

from __future__ import annotations

from collections.abc import Mapping

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.index.storage.records import StoredChunk, StoredUnit  # noqa: E402

# A snippet grows by a neighbouring passage when the passage's own evidence for the query (its
# calibrated score from its own words and vector, not its chunk's) is at least MERGE_FLOOR, or
# when it is about the same thing as the match (cosine of the two units' vectors at least
# MERGE_COHERENCE: a question and its answer).  Both are the 95th percentile of the same measure
# over unrelated passages on the dev set: own evidence of every candidate unit of another
# conversation's workspace (median .061, 90th .134, 95th .17), and the cosine of units from two
# different conversations (median .35, 95th .53; adjacent turns of one conversation: median .59).
# Measured on the dev set (R@6, tokens per search): scored with the chunk's context, neighbours
# inherited the chunk's match and a fresh entry pulled in its unrelated neighbours (.826, 947);
# own evidence alone at .1 / .17 / .2: .818 / .801 / .799 (833 / 680 / 630 tokens); own evidence
# .17 or coherence .53: .816, 824 tokens.
MERGE_FLOOR = 0.17
MERGE_COHERENCE = 0.53
# The same 95th percentile for Markdown read once, scored with its own constants
# (scoring.MARKDOWN_ONCE): .186 (median .076, 90th .149).  On the dev set's logs, R@6 .845 and
# 15.4 lines, 970 tokens per search; kept at .17 there, snippets grew to 16.0 lines, 998 tokens.
MERGE_FLOOR_ONCE = 0.19
# Units read late (memfs.index.embedding.late) were pooled in one reading of their chunk, so two
# neighbours read alike whatever they say: their cosine has a median of .82 (.59 read whole), and
# .53 is reached by 94% of neighbouring pooled units against 66% read whole; on the dev set's
# daily logs read late, snippets grew from 15.6 to 22.5 lines.  So a snippet in a pooled chunk
# grows by own evidence alone; MERGE_FLOOR holds for it (over unrelated passages its 95th
# percentile is .16 pooled, .17 whole).  scripts/merge_floor.py measures all of these.
# Nor by a passage further away than this many blank lines (a new topic, or emptied noise).
MERGE_GAP = 2


def cut(text: str, limit: int) -> str:
    """``text`` within ``limit`` characters, an ellipsis where it was cut."""
    return text if len(text) <= limit else text[: max(0, limit - 1)].rstrip() + "…"


def passage(unit: StoredUnit) -> tuple[int, int, str]:
    """Which passage of the file a unit reads: its lines, and its text (the paragraphs of one long
    message share its line); twins (units.twins) read one passage two ways."""
    return unit.start_line, unit.end_line, unit.text


def window(unit: StoredUnit, chunk: StoredChunk, order: list[StoredUnit], by_unit: dict[int, float], limit: int,
           vectors: Mapping[int, np.ndarray], pooled: bool = False,
           floor: float = MERGE_FLOOR) -> tuple[int, int, str]:
    """The lines that match and a line of context: the best unit, grown by neighbouring units of
    its chunk that belong with it (see MERGE_FLOOR), the strongest first, then one line
    above and below it (unless the unit starts with its own heading, or the next line is the
    heading of something else), all within ``limit`` characters: (first line, last line,
    snippet).  A Markdown snippet is the file's lines; a JSONL snippet the messages as indexed.
    ``pooled``: the chunk was read late, its units pooled in one reading (see MERGE_FLOOR);
    ``floor``: the own evidence that joins a neighbour (MERGE_FLOOR_ONCE for Markdown read once)."""
    position = next(i for i, u in enumerate(order) if passage(u) == passage(unit))
    lines = chunk.text.split("\n") if not chunk.jsonl else []

    def span(first: int, last: int) -> str:
        return "\n".join(lines[first - chunk.start_line : last - chunk.start_line + 1]).strip("\n")

    def text_of(lo: int, hi: int) -> str:
        if lines:
            return span(order[lo].start_line, order[hi].end_line)
        return "\n".join(u.text for u in order[lo : hi + 1])

    lo = hi = position
    text = text_of(lo, hi)
    if len(text) > limit:
        return order[lo].start_line, order[hi].end_line, cut(text, limit)
    anchor = vectors.get(unit.id)

    def joins(neighbour: StoredUnit) -> float | None:
        """How strongly a neighbour belongs in the snippet, or None: by its own evidence for the
        query, or by being about the same thing as the match (a question and its answer)."""
        evidence = by_unit.get(neighbour.id, 0.0)
        if evidence >= floor:
            return evidence
        if chunk.jsonl and (neighbour.start_line, neighbour.end_line) == (unit.start_line, unit.end_line):
            return evidence  # another paragraph of the same message: the citation holds it already
        if pooled:  # read with the match, it reads like it whatever it says
            return None
        vector = vectors.get(neighbour.id)
        if anchor is not None and vector is not None and float(anchor @ vector) >= MERGE_COHERENCE:
            return evidence
        return None

    while True:
        options = []
        if lo > 0 and order[lo].start_line - order[lo - 1].end_line - 1 <= MERGE_GAP:
            strength = joins(order[lo - 1])
            candidate = text_of(lo - 1, hi)
            if strength is not None and len(candidate) <= limit:
                options.append((strength, lo - 1, hi, candidate))
        if hi < len(order) - 1 and order[hi + 1].start_line - order[hi].end_line - 1 <= MERGE_GAP:
            strength = joins(order[hi + 1])
            candidate = text_of(lo, hi + 1)
            if strength is not None and len(candidate) <= limit:
                options.append((strength, lo, hi + 1, candidate))
        if not options:
            break
        _, lo, hi, text = max(options, key=lambda o: o[0])
    first, last = order[lo].start_line, order[hi].end_line
    if not lines or (unit.id < 0 and chunk.path.endswith(".jsonl")):
        # a provisional chunk's units are its lines (ids below zero): in JSONL each is a message
        # of its own, and the line beside the match is another message, not its context
        return first, last, text
    above = first - 1
    while above >= chunk.start_line and first - above <= MERGE_GAP and not lines[above - chunk.start_line].strip():
        above -= 1
    if (above >= chunk.start_line and lines[above - chunk.start_line].strip()
            and not order[lo].text.lstrip().startswith("#")):
        candidate = span(above, last)
        if len(candidate) <= limit:
            first, text = above, candidate
    below = last + 1
    while below <= chunk.end_line and below - last <= MERGE_GAP and not lines[below - chunk.start_line].strip():
        below += 1
    if (below <= chunk.end_line and lines[below - chunk.start_line].strip()
            and not lines[below - chunk.start_line].lstrip().startswith("#")):
        candidate = span(first, below)
        if len(candidate) <= limit:
            last, text = below, candidate
    return first, last, text


def unshown(start: int, end: int, spans: list[tuple[int, int]], unit_start: int,
             unit_end: int) -> tuple[int, int] | None:
    """The longest run of lines in ``start..end`` outside every span that meets the unit's
    lines, or None when the unit is all shown already."""
    runs: list[tuple[int, int]] = []
    current: int | None = None
    for line in range(start, end + 2):
        inside = line > end or any(a <= line <= b for a, b in spans)
        if not inside and current is None:
            current = line
        elif inside and current is not None:
            runs.append((current, line - 1))
            current = None
    meeting = [r for r in runs if r[0] <= unit_end and unit_start <= r[1]]
    return max(meeting, key=lambda r: (r[1] - r[0], -r[0])) if meeting else None


def lines_of(chunk: StoredChunk, units: list[StoredUnit]) -> dict[int, str]:
    """A chunk's lines as its snippets show them: a Markdown file's lines; a JSONL file's
    messages as indexed (the pieces of a long message share its line)."""
    if not chunk.jsonl:
        return dict(enumerate(chunk.text.split("\n"), start=chunk.start_line))
    pieces: dict[int, list[str]] = {}
    for unit in units:
        pieces.setdefault(unit.start_line, []).append(unit.text)
    return {line: "\n".join(texts) for line, texts in pieces.items()}


def trimmed(chunk: StoredChunk, units: list[StoredUnit], piece: tuple[int, int]) -> tuple[int, int, str]:
    """The snippet of lines ``piece`` of ``chunk`` (a window inside it), without blank lines at
    its edges."""
    known = lines_of(chunk, units)
    first, last = piece
    while first < last and not known.get(first, "").strip():
        first += 1
    while last > first and not known.get(last, "").strip():
        last -= 1
    return first, last, "\n".join(known[n] for n in range(first, last + 1) if n in known).strip("\n")
