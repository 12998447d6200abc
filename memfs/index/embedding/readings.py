"""What the embedding model reads for a chunk and its units, and how their vectors are made from
those readings: each text is read once.

A chunk (about 400 tokens) is made of units, and chunks overlap; reading the chunk and then its
units read every line at least twice (three and a half times for a sync file's messages).  So
the model reads *readings* only, each once:

- a unit's text, without Markdown marks (:func:`memfs.index.text.units.plain`);
- a unit's context (the headings above a fact, a chat's title), once for all the units under it;
- a twin's own reading (a fact alone: its text again, read once; a ``key: value`` fact's key).

Every other vector is a piece-weighted mean of readings' vectors, normalised:

- a unit read with its context = its context's and its text's vectors;
- a chunk = the vectors of its units' texts (each span of lines once) and of their contexts.

Why a weighted mean: the local model's vector of a text is the mean of its word pieces' output
vectors (mean pooling), so the vector of a concatenation is close to the mean of its parts'
vectors, each weighted by how many pieces it has; what is lost is only the attention between the
parts.  The weight is a part's cl100k token count (:mod:`memfs.index.text.tokens`): the word pieces
are known only where the model is, and the two counts differ by a near-constant factor (about
1.12 for English), which a normalised mean does not see.  Parts' vectors are unit length (the
providers normalise them); their norms before that are not kept and vary far less than their
lengths.  A reading is cached under the hash of its text, like any embedding.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.index.text import tokens
from memfs.index.text.units import plain


class _Unit(Protocol):
    start_line: int
    end_line: int
    text: str
    context: str
    reading: str


def unit_readings(unit: _Unit) -> list[str]:
    """The readings a unit's vector is made of: its own reading (a twin), else its context's
    and its text's, else its text's."""
    if unit.reading:
        return [unit.reading]
    if unit.context:
        return [plain(unit.context), plain(unit.text)]
    return [plain(unit.text)]


def chunk_readings(units: Iterable[_Unit]) -> list[str]:
    """The readings a chunk's vector is made of: the text of each span of lines of its units
    once (twins share their span) and each context once."""
    out: dict[str, None] = {}
    spans: set[tuple[int, int]] = set()
    for unit in units:
        if unit.context:
            out.setdefault(plain(unit.context))
        if (unit.start_line, unit.end_line) not in spans:
            spans.add((unit.start_line, unit.end_line))
            out.setdefault(plain(unit.text))
    return [text for text in out if text.strip()]


def weight(text: str) -> float:
    """A reading's share of a mean: its length in tokens (at least one)."""
    return float(max(1, tokens.count(text)))


def mean(parts: Sequence[str], vectors: dict[str, np.ndarray]) -> np.ndarray | None:
    """The piece-weighted mean of the parts' vectors, unit length; None when a part has none."""
    if not parts or any(p not in vectors for p in parts):
        return None
    if len(parts) == 1:
        return np.asarray(vectors[parts[0]], dtype=np.float32)
    total = sum(weight(p) * np.asarray(vectors[p], dtype=np.float32) for p in parts)
    norm = float(np.linalg.norm(total))
    return (total / norm if norm else total).astype(np.float32)
