"""Hybrid search: FTS5 keyword candidates and sqlite-vec vector candidates, fused into one score.

Scores, all in 0..1:
- ``text_score``: FTS5's bm25 is negative (more negative is better); its magnitude is divided by
  the best magnitude among this query's candidates (the best keyword match scores 1) and square
  rooted, which keeps a chunk sharing half the best match's evidence in play (0.71, not 0.5).
- ``vector_score``: cosine similarity (clipped at 0), computed exactly for every candidate that
  has a vector, whichever side found it.
- ``score``: ``w_v * vector + w_t * text`` over the signals the chunk has.  On the LoCoMo dev set
  the seeds' 0.7/0.3 with linear BM25 ratios lost to BM25 alone once min_score 0.35 applied
  (R@6 .879 vs .882); 0.5/0.5 with the square-rooted ratio gives R@6 .896, MRR@10 .744
  (scripts/eval_locomo.py), so that is the default.  A chunk without a
  vector (keyword-only search, a failed provider, or a chunk not embedded yet) is scored by its
  text score alone, so a strong keyword match can pass the min score.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

from memfs.config import SearchConfig
from memfs.index.store import Store
from memfs.index.text import match_expression, search_terms

log = logging.getLogger(__name__)

# In a large index, a term found in more than this share of chunks is dropped from the keyword
# query (when rarer terms remain): its BM25 weight is near zero, yet scoring its long posting list
# dominated keyword latency (48 ms -> 16 ms at 100k chunks).
COMMON_TERM_SHARE = 0.1
COMMON_TERM_MIN_CHUNKS = 5000


@dataclass(frozen=True)
class SearchResult:
    path: str
    start_line: int
    end_line: int
    score: float
    vector_score: float
    text_score: float
    snippet: str

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class SearchResponse:
    query: str
    results: list[SearchResult]
    provider: str = ""
    model: str = ""
    generation: int = 0
    pending: int = 0
    warnings: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return {"query": self.query, "results": [r.as_dict() for r in self.results], "warnings": self.warnings}


@dataclass(frozen=True)
class SearchParams:
    max_results: int
    min_score: float
    vector_weight: float
    text_weight: float
    candidate_multiplier: int
    snippet_chars: int

    @classmethod
    def from_config(
        cls, cfg: SearchConfig, max_results: int | None = None, min_score: float | None = None
    ) -> SearchParams:
        return cls(
            max_results=cfg.max_results if max_results is None else max_results,
            min_score=cfg.min_score if min_score is None else min_score,
            vector_weight=cfg.vector_weight,
            text_weight=cfg.text_weight,
            candidate_multiplier=cfg.candidate_multiplier,
            snippet_chars=cfg.snippet_chars,
        )


def snippet(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)].rstrip() + "…"


def informative_terms(store: Store, terms: list[str], include_private: bool = True) -> list[str]:
    if len(terms) < 2:
        return terms
    frequencies, total = store.doc_frequencies(terms, include_private)
    if total < COMMON_TERM_MIN_CHUNKS:
        return terms
    rare = [t for t in terms if frequencies[t] <= COMMON_TERM_SHARE * total]
    return rare or terms


QueryVector = np.ndarray | None | Callable[[], np.ndarray | None]


def hybrid_search(store: Store, query: str, query_vector: QueryVector, params: SearchParams,
                  hides: Callable[[str], bool] | None = None) -> list[SearchResult]:
    """``query_vector`` may be a callable (a pending embedding): it is called only after the
    keyword side has run, so a caller can embed the query while SQLite searches the text.

    ``hides`` (a shared mode's test for private paths) makes the search read the public part of
    the index only: private chunks are neither candidates nor part of the keyword statistics, so
    they cannot shift the scores of what is shown.  Each result is checked against ``hides``
    once more, for paths private now that were indexed when they were not."""
    include_private = hides is None
    pool = params.max_results * params.candidate_multiplier
    match = match_expression(informative_terms(store, search_terms(query), include_private))
    keyword = store.keyword_candidates(match, pool, include_private) if match else []
    if callable(query_vector):
        query_vector = query_vector()
    vector = store.vector_candidates(query_vector, pool, include_private) if query_vector is not None else []

    chunks = store.chunks_by_id(dict.fromkeys([cid for cid, _ in keyword] + [cid for cid, _ in vector]),
                                include_private)
    if hides is not None:
        chunks = {cid: chunk for cid, chunk in chunks.items() if not hides(chunk.path)}
    # A chunk deleted between the candidate query and now is dropped here too.
    keyword = [(cid, bm25) for cid, bm25 in keyword if cid in chunks]
    vector = [(cid, sim) for cid, sim in vector if cid in chunks]

    best = max((-bm25 for _, bm25 in keyword), default=0.0)
    text_scores = {cid: (math.sqrt(-bm25 / best) if best > 0 else 0.0) for cid, bm25 in keyword}
    vector_scores = dict(vector)
    missing = [cid for cid in text_scores if cid not in vector_scores]
    if query_vector is not None and missing:
        vector_scores.update(store.vector_similarity(query_vector, missing))

    ids = list(dict.fromkeys([cid for cid, _ in keyword] + [cid for cid, _ in vector]))
    scored: list[tuple[float, str, int, int, SearchResult]] = []
    for cid in ids:
        chunk = chunks[cid]
        text = text_scores.get(cid, 0.0)
        vec = max(0.0, vector_scores[cid]) if cid in vector_scores else None
        if vec is None:
            score = text
        else:
            total = params.vector_weight + params.text_weight
            score = (params.vector_weight * vec + params.text_weight * text) / total
        if score < params.min_score:
            continue
        result = SearchResult(
            path=chunk.path,
            start_line=chunk.start_line,
            end_line=chunk.end_line,
            score=round(score, 4),
            vector_score=round(vec or 0.0, 4),
            text_score=round(text, 4),
            snippet=snippet(chunk.text, params.snippet_chars),
        )
        scored.append((-score, chunk.path, chunk.start_line, cid, result))
    scored.sort(key=lambda item: item[:4])
    return [item[4] for item in scored[: params.max_results]]
