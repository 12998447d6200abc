"""The query terms each unit holds, found in one FTS5 pass, are exactly those its own tokens give
(memfs.index.text.keywords.stems of its keyword text): the keyword signal of every score is unchanged."""

from __future__ import annotations

from pathlib import Path

from conftest import write

from memfs.index.search.coverage import terms_present
from memfs.index.text.keywords import query_terms, stems

MEMORY = """# Memory

## Health / Médecine
- The user is allergic to penicillin.
12. Naïve café visits on Tuesdays 🚀
3) Call the dentist
- [x] Renew the passport
- [ ] Book flights → Lisbon €200
> Quoted: 東京で寿司を食べた
#hashtag stays #1 in 2024
Thumbs👍🏽up for price€200 and a→b, x²≥y

Key: value
Wife: Priya Raman
"""

QUERIES = ["allergic penicillin", "12 naive cafe", "x passport renew", "3 call dentist", "1 2024 hashtag",
           "东京 寿司", "東京", "rocket 🚀 lisbon €", "médecine health", "the wife priya",
           "When did Caroline go to the LGBTQ support group?", "painting sunrise lake camping kids",
           "200 flights tuesdays", "thumbs up price", "a b y x", "👍 price"]


def test_terms_present_equals_each_units_own_stems(workspace: Path, make_memory, locomo_day) -> None:
    locomo_day(workspace)
    write(workspace / "MEMORY.md", MEMORY)
    memory = make_memory(workspace, embedding__provider="none")
    memory.index()
    units = memory.store.units_of(range(1, 1000))
    assert len(units) >= 35  # MEMORY.md's headings are not units of their own
    raw = [f"{u.context}\n{u.text}" if u.context else u.text for u in units]
    checked = 0
    for query in QUERIES:
        wanted = sorted({s for term in query_terms(query) for s in stems(term)})
        expected = [stems(u.keyword_text) & set(wanted) for u in units]
        assert terms_present(raw, wanted) == expected, query
        checked += sum(1 for e in expected if e)
    assert checked > 30  # the queries do meet the units
    assert terms_present([], ["x"]) == [] and terms_present(["a b"], []) == [frozenset()]
