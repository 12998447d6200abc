"""Which of a query's terms each of many passages holds, found by SQLite's FTS5 in one pass.

A search weighs the keyword evidence of every unit of its candidate chunks (~900 at 100k chunks;
see :func:`memfs.index.search.scoring.keyword_coverage`).  Tokenising them one by one through the
tokenizer's Python interface (:func:`memfs.index.text.keywords.stems`) cost ~25 us a unit, a fifth of a
search at 100k chunks: most of it is one Python string made per token.  Here the passages go into
an in-memory FTS5 table with the index's own tokenizer, its ``instance`` vocabulary answers which
of the query's terms each holds, and the transaction is rolled back: the tokens never leave C.

The answer is the same set of terms as ``stems(unit.keyword_text)`` holds: ``plain`` (which drops
Markdown marks at line starts) changes a passage's tokens only by the number of an ordered list
item ("12." is the token "12") or the x of a task box, so it runs only when the query holds such
a term; ``fts_body`` is applied to every passage that is not ASCII, as the index applies it (not
only when the query holds a symbol's word: FTS5's unicode61 reads some symbols, a skin tone, as
part of the word beside them, so leaving them in place changes other tokens too).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memfs.index.text.keywords import fts_body, tokenized
from memfs.index.text.units import plain

# The tokens ``plain`` can remove: a list item's number (``\d{1,3}``) or a task box's x.
_MARK_TOKEN = re.compile(r"\d{1,3}|x")

def terms_present(texts: Sequence[str], terms: Sequence[str]) -> list[frozenset[str]]:
    """For each text (a unit's keyword text before ``plain``: its context, a newline and its
    text), the terms among ``terms`` (single stemmed tokens, as the index holds them) it holds."""
    found: list[set[str]] = [set() for _ in texts]
    wanted = sorted(set(terms))
    if not wanted or not texts:
        return [frozenset()] * len(texts)
    marks = any(_MARK_TOKEN.fullmatch(t) for t in wanted)
    with tokenized((_body(text, marks) for text in texts), positions=False) as conn:
        placeholders = ",".join("?" * len(wanted))
        for doc, term in conn.execute(
                f"SELECT doc, term FROM passage_set_terms WHERE term IN ({placeholders})", wanted):
            found[doc].add(term)
    return [frozenset(s) for s in found]


def _body(text: str, marks: bool) -> str:
    """The passage as the index would tokenise it, up to tokens no wanted term can be."""
    if marks:
        text = plain(text)
    return text if text.isascii() else fts_body(text)
