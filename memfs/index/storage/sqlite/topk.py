"""Exact top-k BM25 over FTS5 without scoring every row that matches (MaxScore-style pruning).

A keyword query ORs the query's terms, and FTS5 ranks by computing ``bm25()`` for every row that
matches any of them: at 100k chunks that was ~30,000 rows and ~80% of the keyword side's time
(iterating the posting lists alone cost a tenth of it).  But a row can only reach the top k if
the terms it holds can add up to the k-th best score:

- FTS5's bm25 gives phrase ``i`` of a row ``idf_i * f * (k1 + 1) / (f + k1 * (1 - b + b * D /
  avgdl))`` with ``k1 = 1.2``, ``b = 0.75`` and ``idf_i = ln((N - n_i + 0.5) / (n_i + 0.5))``
  (1e-6 when not positive; ``N`` rows, ``n_i`` rows holding the phrase).  For any frequency
  ``f`` and length ``D`` that is strictly less than ``idf_i * (k1 + 1)``, the phrase's *bound*.
- So a row whose phrases' bounds sum below a threshold ``theta`` scores below ``theta``.  The
  rows that may score ``theta`` or more are those holding one of the *minimal* sets of phrases
  whose bounds reach it: an FTS5 expression ``(a AND b) OR (c) ...`` (:func:`candidate_expression`).
- Those candidates are scored with the full query's own ``bm25()`` (the same numbers as the full
  query gives).  If at least k of them score ``theta`` or more, no other row can displace them
  (every other row scores below ``theta``): the top k are exactly the full query's, ties and
  all.  If k were found but the k-th scores below ``theta``, that score is a threshold every
  top-k row reaches, and a second round with it is exact by the same argument.  With fewer than
  k candidates the full query runs.

``theta`` for the first round is guessed from the terms' document frequencies (the threshold at
which the candidates expected, terms assumed independent, are about ``GUESS_ROWS``); a bad guess
costs a round, never a result.  Only single-token phrases get a bound from the vocabulary (a
phrase of several tokens, such as a CJK run, is always a candidate clause of its own); a term no
row holds adds nothing to any row.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

K1 = 1.2  # FTS5's bm25 (fts5_aux.c)
# The first round reads every phrase but those in more than this share of rows (their posting
# lists are what makes the full query slow, and their bounds are low).
COMMON_SHARE = 0.15
# Candidates the first round expects: enough that k of them are found, few enough to score fast.
GUESS_ROWS_PER_RESULT = 8
# Above this many clauses (many terms of similar weight) the expression costs more than it saves.
MAX_CLAUSES = 64
# Floating-point slack: bounds and bm25 are computed in different orders (relative error ~1e-15).
SLACK = 1e-9


@dataclass(frozen=True)
class Phrase:
    """One quoted phrase of the query's MATCH expression and what bounds its contribution."""

    expression: str  # as it appears in the full query, e.g. '"melanie"'
    rows: int | None  # rows holding it (single-token phrases), None when not known


def idf(rows: int, total: int) -> float:
    value = math.log((total - rows + 0.5) / (rows + 0.5))
    return value if value > 0.0 else 1e-6


def bound(phrase: Phrase, total: int) -> float:
    """More than the phrase can add to any row's score (inf when unknown, 0 when no row holds it)."""
    if phrase.rows is None:
        return math.inf
    if phrase.rows == 0:
        return 0.0
    return idf(phrase.rows, total) * (K1 + 1.0) * (1.0 + SLACK)


def minimal_sets(bounds: Sequence[float], theta: float, limit: int = MAX_CLAUSES) -> list[tuple[int, ...]] | None:
    """The minimal sets of phrase indexes whose bounds sum to ``theta`` or more (None: more than
    ``limit`` of them).  Phrases are taken in decreasing bound, so a set is recorded the moment
    it reaches ``theta``: without its last (smallest) member it did not."""
    order = sorted((i for i, b in enumerate(bounds) if b > 0.0), key=lambda i: (-bounds[i], i))
    rest = [0.0] * (len(order) + 1)
    for pos in range(len(order) - 1, -1, -1):
        rest[pos] = rest[pos + 1] + bounds[order[pos]]
    found: list[tuple[int, ...]] = []

    def walk(start: int, chosen: list[int], total: float) -> bool:
        for pos in range(start, len(order)):
            if total + rest[pos] < theta:
                return True  # the remaining phrases cannot reach it
            index = order[pos]
            if total + bounds[index] >= theta:
                found.append((*chosen, index))
                if len(found) > limit:
                    return False
            elif not walk(pos + 1, [*chosen, index], total + bounds[index]):
                return False
        return True

    return found if walk(0, [], 0.0) else None


@dataclass(frozen=True)
class Plan:
    """How one query's top k is found: its phrases, their bounds, and which of them seed."""

    phrases: tuple[Phrase, ...]
    bounds: tuple[float, ...]
    total: int
    seeds: tuple[int, ...]  # the phrases whose rows are few: every phrase but the commonest

    @property
    def complete(self) -> bool:
        """Whether the seed phrases are all that add to a score: a row's score over them is its
        score over the whole query (a phrase no row holds adds 0.0 to every row)."""
        return len(self.seeds) == sum(b > 0.0 for b in self.bounds)

    @property
    def seed(self) -> str:
        return " OR ".join(self.phrases[i].expression for i in self.seeds)

    def candidates(self, theta: float, seeds_only: bool = False) -> str | None:
        """The FTS5 expression matching every row whose phrases' bounds reach ``theta`` (among
        the seed phrases only, if asked).  None: too many clauses, or every phrase alone
        reaches it (the candidates are every row the phrases match)."""
        among = self.seeds if seeds_only else range(len(self.phrases))
        bounds = [self.bounds[i] if i in among else 0.0 for i in range(len(self.phrases))]
        sets = minimal_sets(bounds, theta * (1.0 - SLACK))
        if not sets or len(sets) == sum(b > 0.0 for b in bounds) and all(len(s) == 1 for s in sets):
            return None
        return " OR ".join("(" + " AND ".join(self.phrases[i].expression for i in sorted(s)) + ")" for s in sets)

    def guess(self, k: int) -> float:
        """The highest threshold at which the seed phrases' candidates are expected (terms taken
        as independent) to number ``GUESS_ROWS_PER_RESULT * k`` (0: none is)."""
        bounds = [self.bounds[i] if i in self.seeds else 0.0 for i in range(len(self.phrases))]
        want = GUESS_ROWS_PER_RESULT * k
        low, high = 0.0, sum(b for b in bounds if math.isfinite(b))
        for _ in range(20):
            middle = (low + high) / 2
            sets = minimal_sets(bounds, middle)
            if sets is not None and self._expected(sets) >= want:
                low = middle
            else:
                high = middle
        return low

    def _expected(self, sets: list[tuple[int, ...]]) -> float:
        expected = 0.0
        for chosen in sets:
            share = 1.0
            for i in chosen:
                rows = self.phrases[i].rows
                share *= 1.0 if rows is None else rows / max(self.total, 1)
            expected += share * self.total
        return expected


def plan(phrases: Sequence[Phrase], total: int, k: int) -> Plan | None:
    """A plan, or None when pruning cannot pay: fewer than two phrases add to any score (the
    rows of one phrase all have the same bound)."""
    bounds = tuple(bound(p, total) for p in phrases)
    weighed = [i for i, b in enumerate(bounds) if b > 0.0]
    if len(weighed) < 2:
        return None
    best = max(weighed, key=lambda i: (bounds[i], -i))
    seeds = tuple(i for i in weighed if i == best or phrases[i].rows is None
                  or phrases[i].rows <= COMMON_SHARE * total)
    return Plan(tuple(phrases), bounds, total, seeds)
