"""Hybrid search: candidate chunks from FTS5 and the vector index, every unit inside them scored
(see :mod:`memfs.index.search.scoring` for what a score means), results cut around what matched.

1. Candidates: the best ``POOL`` chunks by BM25 and the ``POOL`` nearest by vector (private
   chunks only for the main mode, and only inside the query's scope).  ``POOL`` does not depend
   on how many results are asked for, so the top of a list never depends on ``n``.
2. Every unit of those chunks gets a calibrated score from its keyword coverage, its own cosine
   and its context's cosine (the larger of its own and its chunk's: context can add, not take
   away); a unit that sits in two overlapping chunks counts once.
3. Results, best first: the best unit, grown by neighbours (in its chunk) that have evidence of
   their own or are about the same thing as the match (``MERGE_FLOOR``, ``MERGE_COHERENCE``),
   while the snippet stays within ``snippet_chars``; the citation ``path#Lx-Ly`` covers exactly the
   snippet's lines, so ``sed -n`` shows what matched.  A unit already shown in an earlier
   snippet is not shown again.  Results below ``min_score`` are left out: an unrelated question
   gets "No results".

Shapes of a query (all optional): ``in`` (memory, sessions, sync, MEMORY.md or a path prefix),
``after``/``before`` (dates: a daily file by its name, a message by its timestamp; an undated
file has no date and is left out), ``mmr`` (maximal marginal relevance: lambda weighs score
against similarity to results already chosen) and ``decay`` (half-life in days; never applied to
undated files such as MEMORY.md).
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import logging
import math
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import Future, wait
from dataclasses import asdict, dataclass, field

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs.config import SearchConfig
from memfs.index.embedding.late import reading_of
from memfs.index.search import scoring
from memfs.index.search.coverage import terms_present
from memfs.index.search.snippets import (
    MERGE_FLOOR,
    MERGE_FLOOR_ONCE,
    cut,
    passage,
    trimmed,
    unshown,
    window,
)
from memfs.index.storage.interface import IndexStore
from memfs.index.storage.records import StoredChunk, StoredUnit
from memfs.index.storage.vectors import unpack_unit_vectors
from memfs.index.text import noise
from memfs.index.text.keywords import search_terms, stems
from memfs.workspace import LONG_TERM_NAMES, SESSIONS_DIR, SYNC_DIR, daily_date

log = logging.getLogger(__name__)

# Candidates from each side, whatever n is.  On the LoCoMo dev set 25, 50 and 100 gave the same
# results (its workspaces hold 56-102 chunks, so any pool covers most of them); 50 keeps a margin
# for larger workspaces, and scoring the units of 100 chunks costs a few milliseconds.
POOL = 50
# In a large index, a term found in more than this share of chunks is dropped from the keyword
# query (when rarer terms remain): its weight is near zero, yet scoring its long posting list
# dominated keyword latency (48 ms -> 16 ms at 100k chunks).
COMMON_TERM_SHARE = 0.1
COMMON_TERM_MIN_CHUNKS = 5000
# MEMORY.md's chunks are candidates of every query that may read it, beside the two pools: its
# facts are what an agent asked to keep, and one chunk holds many unrelated ones, so its vector is
# near none of them and its words are outranked once months of history are imported (a newcomer's
# "medication allergy" found MEMORY.md, then nothing).  Up to this many of its chunks (about 8,000
# tokens of facts, ~180 units more to score); past it, the nearest this many.
LONG_TERM_POOL = 20
# A noise passage (memfs.index.text.noise) is found by query terms (stems) of at least this many
# characters: shorter ones are held by a line of random bytes by chance.
NOISE_TERM_CHARS = 4
# Passages (units) per chunk, to count a memory's passages from its chunks: on the dev set 8.3-9.2
# in daily logs, 5.6-6.3 in sync chats, 4.7 in the probe workspace (tests/data/probes).  Twice
# as many passages move the null model's chance level by about .01 of cosine.
PASSAGES_PER_CHUNK = 7
# Scores say how a result stands out (scoring.stand_out): the result's calibrated score, and how
# close in meaning the nearest passage of this memory is.  A module switch while it is a
# prototype (scripts/calibrate_abstain.py turns it off to measure the scores beneath).
STAND_OUT = True
# A query is embedded from its first characters (the model reads 256 word pieces anyway).
QUERY_EMBED_CHARS = 2000
_MESSAGE_DATE = re.compile(r"^\[(\d{4}-\d{2}-\d{2}) ")
SCOPES = {"memory": "memory/", "sessions": f"{SESSIONS_DIR}/", "sync": f"{SYNC_DIR}/"}


class BadOption(ValueError):
    """A search option that cannot be used; the message names it and says what it takes."""


@dataclass(frozen=True)
class SearchOptions:
    """The shape of one query, beside its text."""

    max_results: int | None = None
    min_score: float | None = None
    scope: str | None = None  # in=
    after: dt.date | None = None
    before: dt.date | None = None
    mmr: float | None = None
    decay_days: float | None = None


def _date(name: str, value: str) -> dt.date:
    try:
        return dt.date.fromisoformat(value)
    except ValueError as exc:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            raise BadOption(f"{name}={value!r} is no date: {exc}") from None  # month 13, say
        raise BadOption(f"{name}={value!r}: a date is written YYYY-MM-DD") from None


def parse_options(values: dict[str, str]) -> SearchOptions:
    """Options given as text (``n=10``, ``in=sessions``, ``after=2026-11-01``): the same rules
    for path options and command-line flags."""
    known = {"n", "min", "in", "after", "before", "mmr", "decay"}
    unknown = sorted(set(values) - known)
    if unknown:
        raise BadOption(f"unknown option {unknown[0]!r}: use n, min, in, after, before, mmr or decay")
    parsed: dict[str, object] = {}
    if "n" in values:
        try:
            n = int(values["n"])
        except ValueError:
            raise BadOption(f"n={values['n']!r}: n is a whole number of results, 1-100") from None
        if not 1 <= n <= 100:
            raise BadOption(f"n={n}: n must be from 1 to 100")
        parsed["max_results"] = n
    for key, target, low, high, what in (("min", "min_score", 0.0, 1.0, "a score"),
                                         ("mmr", "mmr", 0.0, 1.0, "a lambda")):
        if key in values:
            try:
                number = float(values[key])
            except ValueError:
                raise BadOption(f"{key}={values[key]!r}: {key} is {what} from {low:g} to {high:g}") from None
            if not low <= number <= high:
                raise BadOption(f"{key}={values[key]}: {key} must be from {low:g} to {high:g}")
            parsed[target] = number
    if "decay" in values:
        try:
            days = float(values["decay"])
        except ValueError:
            raise BadOption(f"decay={values['decay']!r}: decay is a half-life in days") from None
        if not 0 < days <= 36_500:
            raise BadOption(f"decay={values['decay']}: the half-life must be more than 0 and at most 36500 days")
        parsed["decay_days"] = days
    if "in" in values:
        scope = values["in"].strip().strip("/")
        if not scope or ".." in scope.split("/"):
            raise BadOption(f"in={values['in']!r}: use memory, sessions, sync, MEMORY.md or a path in the workspace")
        parsed["scope"] = scope
    if "after" in values:
        parsed["after"] = _date("after", values["after"])
    if "before" in values:
        parsed["before"] = _date("before", values["before"])
    if "after" in parsed and "before" in parsed and parsed["after"] >= parsed["before"]:  # type: ignore[operator]
        raise BadOption(f"after={values['after']} is not before before={values['before']}: nothing could match")
    return SearchOptions(**parsed)  # type: ignore[arg-type]


@dataclass(frozen=True)
class SearchResult:
    path: str
    start_line: int
    end_line: int
    score: float
    vector_score: float
    text_score: float
    snippet: str
    chunk_start_line: int = 0
    chunk_end_line: int = 0
    chat_title: str = ""  # a result in a sync file or transcript: its chat's (session's) title
    chat_id: str = ""
    agent: str = ""  # a search of several agents (memfs.index.search.agents): whose memory this is
    # A result in a session transcript: its runtime, title, project and start (set by the caller
    # that can read the file: memfs.services.searching).
    session: dict[str, str] | None = None
    rerank: float | None = None  # the reranker's own score, when one reordered the results

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"

    def as_dict(self) -> dict[str, object]:
        found = asdict(self)
        if not self.agent:  # one agent's search: the JSON it always had
            del found["agent"]
        if self.session is None:
            del found["session"]
        if self.rerank is None:
            del found["rerank"]
        return found


@dataclass
class SearchResponse:
    query: str
    results: list[SearchResult]
    provider: str = ""
    model: str = ""
    generation: int | None = 0  # None: not shown (a shared view)
    # Passages without a vector, those the big writes still being chunked will make among them
    # (``pending_estimated``, an estimate: memfs.index.embedding.backlog.still_to_chunk), as status counts them.
    pending: int = 0
    pending_estimated: int = 0
    warnings: list[str] = field(default_factory=list)
    pending_note: str = ""  # how many passages wait for vectors and when they should be done
    # How long this answer waited for vectors (at most 50 ms): told by a mount's .memfs/status,
    # not in the answer, whose bytes the CLI and the search file share.
    waited_ms: float = 0.0
    agents: list[str] = field(default_factory=list)  # a search of several agents: which, own first
    unavailable: str = ""  # why nothing was searched: the index's server is away

    def as_dict(self) -> dict[str, object]:
        found = {"query": self.query, **({"agents": self.agents} if self.agents else {}),
                 "results": [r.as_dict() for r in self.results], "warnings": self.warnings,
                 "pending": self.pending, "pending_estimated": self.pending_estimated,
                 "pending_note": self.pending_note}
        return {**found, "unavailable": self.unavailable} if self.unavailable else found


@dataclass(frozen=True)
class SearchParams:
    max_results: int
    min_score: float
    snippet_chars: int
    options: SearchOptions = SearchOptions()

    @classmethod
    def from_config(cls, cfg: SearchConfig, options: SearchOptions | None = None) -> SearchParams:
        options = options or SearchOptions()
        return cls(
            max_results=cfg.max_results if options.max_results is None else options.max_results,
            min_score=cfg.min_score if options.min_score is None else options.min_score,
            snippet_chars=cfg.snippet_chars,
            options=options,
        )


class Scope:
    """Which paths and dates a query covers, as a Python test and as SQL on ``chunks``."""

    def __init__(self, options: SearchOptions) -> None:
        self.prefix: str | None = None
        self.paths: tuple[str, ...] = ()
        if options.scope in ("MEMORY.md", "memory.md", "long-term"):
            self.paths = LONG_TERM_NAMES
        elif options.scope is not None:
            self.prefix = SCOPES.get(options.scope, options.scope)
        self.after = options.after.isoformat() if options.after else None
        self.before = options.before.isoformat() if options.before else None

    @property
    def everything(self) -> bool:
        return self.prefix is None and not self.paths and self.after is None and self.before is None

    def path_ok(self, path: str) -> bool:
        if self.paths:
            return path in self.paths
        if self.prefix is None:
            return True
        folder = self.prefix.rstrip("/")
        return path == folder or path.startswith(folder + "/")

    def day_ok(self, day: str | None) -> bool:
        if self.after is None and self.before is None:
            return True
        if day is None:
            return False
        return (self.after is None or day >= self.after) and (self.before is None or day < self.before)

    def sql(self) -> tuple[str, list[object]]:
        """A condition on ``chunks`` (aliased ``c``)."""
        clauses: list[str] = []
        params: list[object] = []
        if self.paths:
            clauses.append(f"c.path IN ({','.join('?' * len(self.paths))})")
            params += list(self.paths)
        elif self.prefix is not None:
            folder = self.prefix.rstrip("/")
            clauses.append("(c.path = ? OR substr(c.path, 1, ?) = ?)")
            params += [folder, len(folder) + 1, folder + "/"]
        if self.after is not None:
            clauses.append("c.last_day >= ?")
            params.append(self.after)
        if self.before is not None:
            clauses.append("c.first_day < ?")
            params.append(self.before)
        return " AND ".join(clauses), params


def unit_day(path: str, unit: StoredUnit) -> str | None:
    """The date of a unit: its daily file's or sync day file's (named after the day in
    sync.timezone its messages were routed to), or a transcript message's (a rendered message
    starts with its UTC timestamp); None for undated files."""
    day = _file_day(path)
    if day is not None:
        return day
    match = _MESSAGE_DATE.match(unit.text)
    return match.group(1) if match else None


@functools.lru_cache(maxsize=8192)
def _file_day(path: str) -> str | None:
    # Cached: a search dates every unit of its candidate chunks (~900 at 100k chunks), most of
    # them in a few files.
    day = daily_date(path) if path.startswith(("memory/", f"{SYNC_DIR}/")) else None
    return day.isoformat() if day else None


def informative_terms(store: IndexStore, terms: list[str], include_private: bool = True) -> list[str]:
    if len(terms) < 2:
        return terms
    # By the terms FTS5 holds (porter stems): looked up as typed, "melanie" (indexed "melani", in
    # 60% of a 100k index) counted 0 and was never dropped.  A phrase is as common as its rarest.
    indexed = {t: stems(t) for t in terms}
    frequencies, total = store.doc_frequencies(sorted(set().union(*indexed.values())), include_private)
    if total < COMMON_TERM_MIN_CHUNKS:
        return terms
    rare = [t for t in terms if min((frequencies[s] for s in indexed[t]), default=0) <= COMMON_TERM_SHARE * total]
    return rare or terms


def query_weights(store: IndexStore, terms: list[str], include_private: bool) -> scoring.QueryWeights:
    """IDF of the query's stemmed terms over the chunks this search may read."""
    stemmed = sorted({s for term in terms for s in stems(term)})
    frequencies, total = store.doc_frequencies(stemmed, include_private)
    return scoring.query_weights(frequencies, total)


QueryVector = "np.ndarray | None | Callable[[], np.ndarray | None]"  # a string: numpy loads on first use


@dataclass
class _Scored:
    unit: StoredUnit
    chunk: StoredChunk
    score: float
    keyword: float
    cosine: float  # the unit's (its chunk's until it has its own); NaN: no vector
    chunk_cosine: float = float("nan")


def _vectors(units: list[StoredUnit], dims: int) -> np.ndarray:
    """The units' vectors as rows (NaN for a unit not embedded yet: none of them may be, while
    the background embedder is still at work)."""
    return unpack_unit_vectors([u.vector for u in units], dims)


class _Rows(Mapping[int, "np.ndarray"]):
    """Unit id -> its row of the candidates' vector matrix, made when asked: a snippet and MMR
    read a few dozen of ~900 (a view for each cost ~1 ms a search)."""

    def __init__(self, matrix: np.ndarray, rows: dict[int, int]) -> None:
        self.matrix, self.rows = matrix, rows

    def __getitem__(self, unit_id: int) -> np.ndarray:
        return self.matrix[self.rows[unit_id]]

    def __contains__(self, unit_id: object) -> bool:
        return unit_id in self.rows

    def __iter__(self) -> Iterator[int]:
        return iter(self.rows)

    def __len__(self) -> int:
        return len(self.rows)


@dataclass
class Scored:
    """A query's candidates: every unit of the candidate chunks, scored."""

    ranked: list[_Scored]  # best first; a unit in two overlapping chunks once, with its better score
    units: dict[int, list[StoredUnit]]  # chunk id -> its units in file order
    scores: dict[int, float]  # unit id -> score
    vectors: Mapping[int, np.ndarray] = field(default_factory=dict)  # unit id -> its vector, if it has one
    mode: str = "whole"  # how the index reads its passages (its fingerprint's "readings")
    # The query's best cosine with a candidate passage that is language (NaN: no vectors): how
    # close in meaning the nearest thing this memory holds is (scoring.stand_out).
    best_cosine: float = float("nan")
    passages: int = 0  # about how many passages the memory searched holds (scoring.null_adjusted)


def read_once_units(mode: str, units: list[StoredUnit], chunks: Mapping[int, StoredChunk]) -> np.ndarray:
    """Which units are Markdown read once (each unit alone, its chunk's vector the mean of its
    units': :func:`memfs.index.embedding.late.read_as`), by the reading the index was built with
    (``mode``, its fingerprint's)."""
    read: dict[int, bool] = {}
    for cid, chunk in chunks.items():
        read[cid] = not chunk.jsonl and reading_of(mode, chunk.path, chunk.jsonl) == "once"
    return np.array([read[u.chunk_id] for u in units], dtype=bool)


def _neighbourhood_cosine(units: list[StoredUnit], matrix: np.ndarray, query_vector: Sequence[float]) -> np.ndarray:
    """The query's cosine with each unit taken with its neighbours: the mean of its vector and
    those of the passages just before and after it in its chunk (NaN without a vector of its own).

    Read once, a chunk's vector is the mean of its units', which tells less than the model's
    reading of the whole chunk (where a reply takes meaning from the question before it): on the
    dev set's daily logs R@3 .787 -> .780 and R@10 .882 -> .876.  The passage before and after
    (a question and its answer, the turn that a reply refers to) is the nearest such context, and
    it cannot dilute a unit's own meaning: the context is the larger of this and the others."""
    rows = np.nan_to_num(matrix)
    has = ~np.isnan(matrix[:, 0]) if len(matrix) else np.zeros(0, dtype=bool)
    before = np.full(len(units), -1)
    after = np.full(len(units), -1)
    # Units are in chunk and line order; twins (one passage read two ways) share their lines and
    # are one passage here.
    start = 0
    while start < len(units):
        end = start
        while end < len(units) and units[end].chunk_id == units[start].chunk_id:
            end += 1
        spans: list[list[int]] = []
        for index in range(start, end):
            if spans and (units[spans[-1][0]].start_line, units[spans[-1][0]].end_line) == \
                    (units[index].start_line, units[index].end_line):
                spans[-1].append(index)
            else:
                spans.append([index])
        for number, members in enumerate(spans):
            for index in members:
                before[index] = spans[number - 1][0] if number > 0 else -1
                after[index] = spans[number + 1][0] if number + 1 < len(spans) else -1
        start = end
    total = rows.copy()
    total[before >= 0] += rows[before[before >= 0]]
    total[after >= 0] += rows[after[after >= 0]]
    norms = np.linalg.norm(total, axis=1)
    out = np.full(len(units), np.nan)
    ok = has & (norms > 0)
    out[ok] = (total[ok] @ np.asarray(query_vector, dtype=np.float32)) / norms[ok]
    return out


def score_units(store: IndexStore, query: str, query_vector: QueryVector, include_private: bool,
                hides: Callable[[str], bool] | None, scope: Scope, floor: float = -math.inf) -> Scored:
    """Every unit of the candidate chunks with its calibrated score; ``ranked`` holds those that
    score ``floor`` or more (a search's ``min_score``: no later step raises a score)."""
    where, params = scope.sql()
    if noise.unreadable_query(query):
        query_vector = None  # its vector says nothing (memfs.index.text.noise): its words alone are searched
    # Held throughout: the nearest chunks are found on another thread, from the in-memory matrix
    # the lock keeps writers away from (see Store.nearest_later).
    with store.lock:
        nearest = (store.nearest_later(query_vector, POOL, include_private)
                   if callable(query_vector) and not where else None)
        try:
            return _score_units(store, query, query_vector, include_private, hides, scope, nearest, floor)
        finally:
            if nearest is not None:
                nearest.cancel()
                wait([nearest])  # the thread reads the matrix: not after the lock is let go


def _score_units(store: IndexStore, query: str, query_vector: QueryVector, include_private: bool,
                 hides: Callable[[str], bool] | None, scope: Scope,
                 nearest: Future[tuple[np.ndarray | None, list[tuple[int, float]]]] | None,
                 floor: float = -math.inf) -> Scored:
    terms = search_terms(query)
    where, params = scope.sql()
    keyword = store.keyword_top(informative_terms(store, terms, include_private), POOL, include_private, where,
                                params)

    def visible(ids: list[int]) -> dict[int, StoredChunk]:
        found = store.chunks_by_id(ids, include_private)
        return {cid: c for cid, c in found.items() if scope.path_ok(c.path) and (hides is None or not hides(c.path))}

    def matched(units: list[StoredUnit]) -> list[frozenset[str]]:
        return terms_present([f"{u.context}\n{u.text}" if u.context else u.text for u in units], list(weights.idf))

    # The keyword side's chunks, units and term matches are read while the query is still being
    # embedded (by another thread or the embedding service) and, in a large index, while its
    # nearest chunks are found on another thread (``nearest``): the wait for the query vector and
    # the matrix product over every chunk vector then cost no time of their own.  Only the chunks
    # the vector side adds are read after.
    keyword_ids = [cid for cid, _ in keyword]
    long_term = (store.chunk_ids_of(LONG_TERM_NAMES, include_private)
                 if scope.after is None and scope.before is None and any(map(scope.path_ok, LONG_TERM_NAMES)) else [])
    few = len(long_term) <= LONG_TERM_POOL
    known = set(keyword_ids)
    early = keyword_ids + [cid for cid in long_term if cid not in known] if few else keyword_ids
    known.update(early)
    chunks = visible(early)
    weights = query_weights(store, terms, include_private)
    units = store.units_of(chunks, {cid: c.text for cid, c in chunks.items()})
    present = matched(units)
    dims = (len(query_vector) if query_vector is not None and not callable(query_vector)
            else int((store.fingerprint or {}).get("dims") or 0))
    matrix = _vectors(units, dims)  # before the wait for the vector side, as the rest above
    vector: list[tuple[int, float]] = []
    if nearest is not None:
        query_vector, vector = nearest.result()
    else:
        if callable(query_vector):
            query_vector = query_vector()
        if query_vector is not None:
            vector = store.vector_candidates(query_vector, POOL, include_private, where, params)
    wanted = [cid for cid, _ in vector if cid not in known]
    if not few and query_vector is not None:
        near = store.vector_similarity(query_vector, [cid for cid in long_term if cid not in known])
        wanted += sorted(near, key=lambda cid: (-near[cid], cid))[:LONG_TERM_POOL]
    added = visible(list(dict.fromkeys(wanted)))
    if added:
        chunks.update(added)
        more = store.units_of(added, {cid: c.text for cid, c in added.items()})
        # In the order one read of all candidates gives (units_of's: by chunk, then line), which
        # ties keep.  Each side is in that order and the two hold different chunks, so ordering
        # by chunk alone (a stable sort) gives it.
        both, held = units + more, present + matched(more)
        order = sorted(range(len(both)), key=[u.chunk_id for u in both].__getitem__)
        units, present = [both[i] for i in order], [held[i] for i in order]
        matrix = np.concatenate([matrix, _vectors(more, dims)])[order]
    if not chunks or not units:
        return Scored([], {}, {})
    if query_vector is not None and len(query_vector) != dims:  # not the index's model (being rebuilt)
        dims = len(query_vector)
        matrix = _vectors(units, dims)
    chunk_cos = dict(vector)
    missing = [cid for cid in chunks if cid not in chunk_cos]
    if query_vector is not None and missing:
        chunk_cos.update(store.vector_similarity(query_vector, missing))
    # Noise (random bytes, a base64 blob, a hex dump: memfs.index.text.noise) is found by its words
    # alone, and only by words long enough to be looked for: a random line holds every short
    # word by chance ("q" met a line of random bytes holding "Q").
    noisy = np.array([noise.is_noise(u.text) for u in units], dtype=bool)
    if noisy.any():
        present = [frozenset(t for t in held if len(t) >= NOISE_TERM_CHARS) if n else held
                   for held, n in zip(present, noisy.tolist())]
    shares: dict[frozenset[str], float] = {}  # a few distinct sets of terms among ~900 units
    coverage = np.array([shares[held] if held in shares else shares.setdefault(
        held, scoring.keyword_coverage(weights, held)) for held in present])
    if query_vector is not None:
        unit_cos = matrix @ np.asarray(query_vector, dtype=np.float32)
    else:
        unit_cos = np.full(len(units), np.nan)
    embedded = (~np.isnan(matrix[:, 0]) & ~noisy).tolist() if dims else [False] * len(units)
    vectors = _Rows(matrix, {u.id: row for row, (u, has) in enumerate(zip(units, embedded)) if has})
    around = np.array([chunk_cos.get(u.chunk_id, np.nan) for u in units], dtype=np.float64)
    own_cos = unit_cos
    unit_cos = np.where(np.isnan(unit_cos), around, unit_cos)  # a unit not embedded yet: its chunk's
    # The chunk adds context (a turn that answers the question before it), never takes away: a
    # fact among unrelated ones in a long MEMORY.md keeps its own strength.
    context = np.where(np.isnan(around), around, np.fmax(around, unit_cos))
    message = np.array([chunks[u.chunk_id].jsonl for u in units], dtype=bool)
    mode = str((store.fingerprint or {}).get("readings", "whole"))
    once = read_once_units(mode, units, chunks)
    if once.any() and query_vector is not None:
        context = np.where(once & ~np.isnan(context), np.fmax(context, _neighbourhood_cosine(units, matrix, query_vector)),
                           context)
    if noisy.any():
        unit_cos = np.where(noisy, np.nan, unit_cos)
        own_cos = np.where(noisy, np.nan, own_cos)
        context = np.where(noisy, np.nan, context)
    dated = scope.after is not None or scope.before is not None
    language = ~noisy
    if dated:
        language &= np.array([scope.day_ok(unit_day(chunks[u.chunk_id].path, u)) for u in units], dtype=bool)
    measured = language & ~np.isnan(unit_cos)
    best_cosine = float(np.max(unit_cos[measured])) if measured.any() else math.nan
    # The passages the best is chosen from (scoring.null_adjusted): the memory's, since its
    # nearest chunks are among the candidates, counted from its chunks (PASSAGES_PER_CHUNK) so
    # that what is embedded yet, or read as provisional lines, moves no score, less the share of
    # noise among the candidates (it has no vector to meet the query by chance: 200 KB of random
    # bytes made a small memory count as three times its size); a scoped search, its candidates'
    # units that are language.
    passages = (round(store.chunk_total(include_private) * PASSAGES_PER_CHUNK * (1 - noisy.mean()))
                if scope.everything else int(language.sum()))
    scores = scoring.fuse(coverage, unit_cos, context, message, once)
    if noisy.any():  # noise that holds none of the query's words has no evidence (not the keyword prior)
        scores = np.where(noisy & (coverage == 0), 0.0, scores)
    if STAND_OUT:
        without = np.isnan(context)
        scores = scoring.stand_out(scores, best_cosine, passages, ~without, without & ~noisy)
    best: dict[tuple[str, int, int, str], _Scored] = {}
    by_chunk: dict[int, list[StoredUnit]] = {}
    # Python floats once for all (~900 units): indexing numpy arrays unit by unit cost more.
    for unit, score, share, cosine, around_cos in zip(units, scores.tolist(), coverage.tolist(), unit_cos.tolist(),
                                                      context.tolist()):
        chunk = chunks[unit.chunk_id]
        in_chunk = by_chunk.setdefault(unit.chunk_id, [])
        if not in_chunk or passage(in_chunk[-1]) != passage(unit):
            in_chunk.append(unit)  # twins (units.twins) are one passage of the file
        if score < floor or dated and not scope.day_ok(unit_day(chunk.path, unit)):
            continue
        item = _Scored(unit, chunk, score, share, cosine, around_cos)
        # One result per passage: a Markdown file's lines; a message's paragraph (all the
        # paragraphs of a long message cite its one line, and the one that answers may not be the
        # one that matched best).
        key = (chunk.path, *passage(unit)) if chunk.jsonl else (chunk.path, unit.start_line, unit.end_line, "")
        if key not in best or item.score > best[key].score:
            best[key] = item
    ranked = sorted(best.values(), key=lambda s: (-s.score, s.chunk.path, s.unit.start_line))
    # What a snippet may grow by: a neighbour's own evidence, not the chunk it shares with the best
    # unit (which would pull a whole chunk in).  A unit without its own vector yet is judged by its
    # words, and one that shares no word with the query has no evidence at all (the keyword
    # calibration would give it 0.27, its prior).
    own = scoring.fuse(coverage, own_cos, own_cos, message, once)
    growable = np.where(np.isnan(own_cos) & (coverage == 0), 0.0, own)
    evidence: dict[tuple[int, int, int, str], float] = {}
    for u, grows in zip(units, growable.tolist()):
        key = (u.chunk_id, *passage(u))
        evidence[key] = max(evidence.get(key, 0.0), grows)
    return Scored(ranked, by_chunk, {u.id: evidence[(u.chunk_id, *passage(u))]
                                     for in_chunk in by_chunk.values() for u in in_chunk}, vectors, mode, best_cosine,
                  passages)


def _decay(scored: list[_Scored], half_life: float, today: dt.date) -> list[_Scored]:
    out = []
    for item in scored:
        day = unit_day(item.chunk.path, item.unit)
        if day is not None:
            age = max(0, (today - dt.date.fromisoformat(day)).days)
            item = dataclasses.replace(item, score=item.score * 0.5 ** (age / half_life))
        out.append(item)
    return sorted(out, key=lambda s: (-s.score, s.chunk.path, s.unit.start_line))


def empty_scope(store: IndexStore, options: SearchOptions, hides: Callable[[str], bool] | None = None) -> str | None:
    """A warning when the query's ``in=`` scope holds no indexed file this reader may see (a
    typo, or a folder that is not memory), or nothing dated for ``after``/``before`` (MEMORY.md),
    so "No results" is not mistaken for an answer."""
    if options.scope is None:
        return None
    scope = Scope(SearchOptions(scope=options.scope))
    if (options.after or options.before) and scope.paths:
        return (f"in={options.scope} holds no dates: after/before leave undated files out (MEMORY.md has "
                "none); drop them to search it")
    # A range scan of the index's paths under the scope, not every file of the index.
    candidates = list(scope.paths) if scope.paths else store.paths_under((scope.prefix or "").rstrip("/"))
    for path in candidates:
        record = store.file(path)
        if record is not None and (hides is None or not (record.private or hides(path))):
            return None
    return (f"in={options.scope}: no indexed file is there; use memory, sessions, sync, MEMORY.md "
            "or a folder or file of the workspace that holds memory files")


def hybrid_search(store: IndexStore, query: str, query_vector: QueryVector, params: SearchParams,
                  hides: Callable[[str], bool] | None = None, today: dt.date | None = None) -> list[SearchResult]:
    """``query_vector`` may be a callable (a pending embedding): it is called only after the
    keyword side has run, so a caller can embed the query while SQLite searches the text.

    ``hides`` (a shared mode's test for private paths) makes the search read the public part of
    the index only: private chunks are neither candidates nor part of the keyword statistics, so
    they cannot shift the scores of what is shown.  Each candidate is checked against ``hides``
    once more, for paths private now that were indexed when they were not."""
    options = params.options
    found = score_units(store, query, query_vector, hides is None, hides, Scope(options), params.min_score)
    scored = found.ranked
    if options.decay_days:
        scored = _decay(scored, options.decay_days, today or dt.datetime.now(dt.timezone.utc).date())
    scored = [s for s in scored if s.score >= params.min_score]
    mode = found.mode
    results: list[SearchResult] = []
    chosen: list[np.ndarray] = []
    remaining = list(scored)
    while remaining and len(results) < params.max_results:
        item = remaining.pop(0) if options.mmr is None else _mmr_pick(remaining, chosen, options.mmr, found.vectors)
        path = item.chunk.path
        if _shown(results, item):
            continue  # already in an earlier result's snippet
        reading = "message" if item.chunk.jsonl else reading_of(mode, path, False)
        start, end, snippet = window(item.unit, item.chunk, found.units[item.chunk.id], found.scores,
                                     params.snippet_chars, found.vectors, reading == "late",
                                     MERGE_FLOOR_ONCE if reading == "once" else MERGE_FLOOR)
        spans = [(r.start_line, r.end_line) for r in results if r.path == path]
        if any(a <= end and start <= b for a, b in spans):
            if item.chunk.jsonl and item.unit.start_line == item.unit.end_line:
                # A paragraph of a long message whose line an earlier result cites, but with
                # another of its paragraphs (the message was cut across chunks): this one alone.
                start, end, snippet = item.unit.start_line, item.unit.end_line, cut(item.unit.text.strip("\n"),
                                                                                   params.snippet_chars)
            else:
                # Two results of one file never overlap: this one keeps only lines no earlier
                # result shows (those are at a better rank already), the part around its own unit.
                piece = unshown(start, end, spans, item.unit.start_line, item.unit.end_line)
                if piece is None:
                    continue
                start, end, snippet = trimmed(item.chunk, found.units[item.chunk.id], piece)
        if item.unit.id in found.vectors:
            chosen.append(found.vectors[item.unit.id])
        results.append(SearchResult(
            path=item.chunk.path,
            start_line=start,
            end_line=end,
            score=round(item.score, 4),
            vector_score=round(0.0 if np.isnan(item.cosine) else max(0.0, item.cosine), 4),
            text_score=round(item.keyword, 4),
            snippet=snippet,
            chunk_start_line=item.chunk.start_line,
            chunk_end_line=item.chunk.end_line,
            chat_title=item.chunk.chat_title,
            chat_id=item.chunk.chat_id,
        ))
    return results


def _shown(results: list[SearchResult], item: _Scored) -> bool:
    """Whether an earlier result of the same file shows this unit already: its lines are cited
    there, and, for a message (whose paragraphs all cite its one line, and may lie in different
    chunks when it is longer than one), its text is in that result's snippet."""
    unit = item.unit
    by_lines = not item.chunk.jsonl or unit.start_line != unit.end_line
    return any(r.path == item.chunk.path and r.start_line <= unit.start_line and unit.end_line <= r.end_line
               and (by_lines or unit.text.strip() in r.snippet) for r in results)


def _mmr_pick(remaining: list[_Scored], chosen: list[np.ndarray], lam: float,
              vectors: Mapping[int, np.ndarray]) -> _Scored:
    """Maximal marginal relevance: the unit whose score, less its similarity to what is already
    chosen, is highest (lambda weighs the two)."""
    if not chosen:
        return remaining.pop(0)
    picked = np.stack(chosen)
    best_index, best_value = 0, -np.inf
    for index, item in enumerate(remaining):
        similarity = 0.0
        if item.unit.id in vectors:
            similarity = float(np.max(picked @ vectors[item.unit.id]))
        value = lam * item.score - (1 - lam) * similarity
        if value > best_value:
            best_index, best_value = index, value
    return remaining.pop(best_index)
