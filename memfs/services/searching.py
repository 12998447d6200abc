"""A search as Memory answers it: the options settled, a just-written note's few passages given a
moment to get their vectors, the query embedded beside the keyword side, the hybrid search of
the index (:mod:`memfs.index.search.hybrid`), other agents' public memory when asked, and what the
reader must know about the answer (what still waits for vectors, big writes still being chunked,
files not searched, an index whose server is away).
"""

from __future__ import annotations

import dataclasses
import logging
import time

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs import longpath
from memfs.config import READ_WAIT_MS, SHARED_MODE
from memfs.index.bigwrites import threshold
from memfs.index.embedding.backlog import still_to_chunk
from memfs.index.embedding.providers import EmbeddingError
from memfs.index.search import agents as across
from memfs.index.search.hybrid import (
    QUERY_EMBED_CHARS,
    SearchOptions,
    SearchParams,
    SearchResponse,
    empty_scope,
    hybrid_search,
)
from memfs.index.search.rerank import RerankFailed, rerank
from memfs.index.storage.interface import IndexOffline, IndexStore
from memfs.index.text.messages import session_info
from memfs.privacy import Privacy, read_visible
from memfs.services.lifecycle import Engine
from memfs.services.problems import file_warnings
from memfs.workspace import FileKind, classify

log = logging.getLogger(__name__)

# How many of the freshest waiting passages a search embeds itself before it searches (within
# search.pending_wait_ms): a note just written is a few (a daily-log entry: its chunk and 2-4
# units), and 16 passages are one call of the local model, ~100-300 ms on 2 busy cores.
FEW_PENDING = 16
# A search makes the exact chunks of a few files still indexed by keyword only itself, before it
# embeds: the files of a short burst of closes (memfs.bursts: a note and MEMORY.md written a
# moment apart) are found by their meaning at once, as a note written alone is.  A big write
# (index.defer_mb) or a long burst is the completion worker's (a read never waits on it).  Exact
# chunks of a note cost about 0.65 ms a KB (its tokens, units, rows and commit: 3.5 ms for a 5.4 KB
# note, in process): FEW_BYTES_TO_CHUNK, some 40 ms.
FEW_TO_CHUNK = 8
FEW_BYTES_TO_CHUNK = 64 * 1024
SESSIONS_KEPT = 256  # session files whose metadata a searcher remembers


class Searcher:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        # include_private -> (content generation, the passages big writes being chunked will add):
        # summing their lines took 1.6 ms a search during an 8 MB import; they change with the text.
        self._coming: dict[bool, tuple[int, int]] = {}
        self._sessions: dict[tuple[str, int, int], dict[str, str] | None] = {}  # (path, size, mtime) -> info

    def search(
        self,
        query: str,
        max_results: int | None = None,
        min_score: float | None = None,
        wait_ms: int | None = None,
        mode: str | None = None,
        options: SearchOptions | None = None,
        agents: tuple[str, ...] = (),
    ) -> SearchResponse:
        """Search the memory; ``options`` shape the query (scope, dates, mmr, decay; see
        :mod:`memfs.index.search.hybrid`), ``max_results``/``min_score`` override theirs.  ``agents``:
        other agents whose public memory is searched too, through this login's reader grants
        (:mod:`memfs.index.search.agents`); NotReadable naming one that may not be read.  An index whose
        server is away answers no results and says so (SearchResponse.unavailable)."""
        readers = across.open_readers(self.engine.cfg, agents)  # before anything: refused means no rows at all
        try:
            response = self._search(query, max_results, min_score, wait_ms, mode, options, readers)
        except IndexOffline as exc:
            self.engine.outage.down(exc)
            return SearchResponse(query=query, results=[], provider=self.engine.cfg.embedding.provider, generation=None,
                                  warnings=[f"{exc}; nothing was searched (writes are kept, and indexed when "
                                            "it answers again)"], unavailable=str(exc))
        finally:
            across.close(readers)
        if owed := self.engine._owed_now(mode):
            response.warnings.append(f"the index is catching up with {len(owed)} file{'s' if len(owed) != 1 else ''} "
                                     "written while its server was unavailable: they may be missing from these "
                                     "results for a moment")
        return response

    def _search(self, query: str, max_results: int | None, min_score: float | None, wait_ms: int | None,
                mode: str | None, options: SearchOptions | None,
                readers: list[tuple[str, IndexStore]]) -> SearchResponse:
        options = dataclasses.replace(
            options or SearchOptions(),
            **{k: v for k, v in (("max_results", max_results), ("min_score", min_score)) if v is not None})
        params = SearchParams.from_config(self.engine.cfg.search, options)
        warnings: list[str] = []
        if not query.strip():
            return SearchResponse(query=query, results=[], provider=self.engine.cfg.embedding.provider,
                                  generation=self.engine.store.generation, warnings=["the query is empty"])
        if self.engine.store.get_meta("reconciled_at") is None:
            warnings.append(
                f"this workspace has not been indexed yet for agent {self.engine.cfg.agent}: run `memfs index` "
                "(a mount or `memfs watch` keeps it current)"
            )
        wait_ms = self.engine.cfg.search.pending_wait_ms if wait_ms is None else wait_ms
        waited_ms = self._chunk_few(wait_ms, include_private=not self.engine.privacy(mode).shared)
        waited_ms += self._wait_for_vectors(wait_ms - int(waited_ms))
        provider = self.engine.provider
        embedding = (self.engine._query_pool.submit(self._embed_query, query[:QUERY_EMBED_CHARS])
                     if provider.dims else None)
        with self.engine.store.lock:
            # The query is embedded on another thread while SQLite runs the keyword side.
            privacy = self.engine.privacy(mode)
            hides = privacy.is_private if privacy.shared else None
            settings = self.engine.cfg.search
            reranking = bool(settings.rerank_url) and params.max_results < settings.rerank_top
            wide = dataclasses.replace(params, max_results=settings.rerank_top) if reranking else params
            results = hybrid_search(self.engine.store, query, embedding.result if embedding else None, wide, hides=hides)
            if not results and (scope_warning := empty_scope(self.engine.store, params.options, hides)):
                warnings.append(scope_warning)
            generation = None if privacy.shared else self.engine.store.generation
            pending = (self.engine.store.counts(include_private=False)["pending"] if privacy.shared
                       else self.engine.store.pending_count())
        if self.engine.cfg.embedding.provider != "none" and (embedding is None or embedding.result() is None):
            warnings.append(f"embedding provider failed ({self.engine.provider_error}); keyword results only")
        if self.engine.cfg.search.rerank_url:
            try:
                results, _ = rerank(self.engine.cfg.search, query, results)
            except RerankFailed as exc:
                warnings.append(f"{exc}: results in memfs's own order")
            results = results[: params.max_results]
        warnings += file_warnings(self.engine, results, privacy)
        results = [dataclasses.replace(r, session=info) if (info := self._session_of(r.path, privacy)) else r
                   for r in results]
        if readers:  # another agent's private paths are hidden as from a shared reader of ours
            results, more = across.search_others(
                readers, self.engine.store, self.engine.cfg.agent, results, query, embedding.result if embedding else None, params,
                Privacy(self.engine.cfg.privacy.private_paths, SHARED_MODE).is_private)
            warnings += more
        # The passages big writes still being chunked will add wait too, as `memfs status` counts
        # them (an estimate from the lines their keyword rows hold): told "pending: 0" during an
        # import, an agent took it that nothing waited.
        chunking = self.engine.store.provisional_paths(include_private=not privacy.shared)
        coming = self._still_to_come(not privacy.shared) if chunking else 0
        pending += coming
        note = self.engine.backlog(pending, include_private=not privacy.shared).line(chunking=bool(chunking))
        if chunking:
            shown = ", ".join(chunking[:3]) + (f" and {len(chunking) - 3} more" if len(chunking) > 3 else "")
            shown += f"; about {coming} of the passages waiting are to come from {'it' if len(chunking) == 1 else 'them'}" \
                if coming else ""
            owed = (f"{len(chunking)} file{'s' if len(chunking) != 1 else ''} still being chunked ({shown}): "
                    "found by keyword only until then")
            note = f"{note}; {owed}" if note else owed
        return SearchResponse(
            query=query,
            results=results,
            provider=provider.name if not self.engine.provider_error else f"{self.engine.cfg.embedding.provider} (failed)",
            model=provider.model,
            generation=generation,
            pending=pending,
            pending_estimated=coming,
            warnings=warnings,
            pending_note=note,
            waited_ms=waited_ms,
            agents=[self.engine.cfg.agent, *(agent for agent, _ in readers)] if readers else [],
        )

    def _session_of(self, rel: str, privacy: Privacy) -> dict[str, str] | None:
        """The session a transcript result comes from (runtime, title, project, start), read once
        per version of its file; None for any other file."""
        if classify(rel, self.engine.cfg.index.extra_paths) is not FileKind.SESSION:
            return None
        try:
            st = longpath.stat_of(self.engine.cfg.workspace / rel)
        except OSError:
            return None
        key = (rel, st.st_size, st.st_mtime_ns)
        if key not in self._sessions:
            try:
                data = read_visible(self.engine.cfg.workspace, rel, privacy)
            except OSError:
                return None
            if len(self._sessions) >= SESSIONS_KEPT:
                self._sessions.pop(next(iter(self._sessions)))
            self._sessions[key] = session_info(data)
        return self._sessions[key]

    def _still_to_come(self, include_private: bool) -> int:
        """The passages the big writes still being chunked will add (estimated as status does),
        summed again only when the text changed."""
        if not self.engine.store.has_vectors:
            return 0
        generation = self.engine.store.content_generation  # read first: a change meanwhile sums again
        known = self._coming.get(include_private)
        if known is None or known[0] != generation:
            owed = self.engine.store.provisional_lines(include_private)
            known = (generation, still_to_chunk(sum(n for _, n, _ in owed), sum(n for _, n, jsonl in owed if jsonl)))
            self._coming[include_private] = known
        return known[1]

    def _chunk_few(self, wait_ms: int, include_private: bool) -> float:
        """Exact chunks for the files still indexed by keyword only, when they are few and small
        (FEW_TO_CHUNK, FEW_BYTES_TO_CHUNK), so their passages can get vectors before this search
        reads (and their unchanged passages their vectors back from the index), within
        ``wait_ms``: nothing when it is 0, and none started once it is spent.  Only in the
        process completing them (a mount: Engine.completes_here); a shared reader's search
        chunks public files only (its wait must not tell of private writes).  Never raises: the
        completion worker (or the next start) does what this could not.  Returns the
        milliseconds spent."""
        if wait_ms <= 0 or not self.engine.completes_here or not self.engine.indexer.embeds:
            return 0.0
        owed = self.engine.store.provisional_paths(include_private=include_private)
        if not owed or len(owed) > FEW_TO_CHUNK:
            return 0.0
        records = [self.engine.store.file(rel) for rel in owed]
        big = threshold(self.engine.cfg.index.defer_mb)  # a big write is the completion worker's
        if any(r is None or r.size >= big for r in records):
            return 0.0
        if sum(r.size for r in records if r) > FEW_BYTES_TO_CHUNK:
            return 0.0
        began = time.monotonic()
        for rel in owed:
            if time.monotonic() - began >= min(wait_ms, READ_WAIT_MS) / 1000:
                break
            try:
                self.engine.complete(rel)
            except Exception as exc:  # a locked index, a file gone meanwhile: the search goes on
                log.info("search: %s left to the completion worker (%s)", rel, exc)
                break
        return round((time.monotonic() - began) * 1000, 1)

    def _wait_for_vectors(self, wait_ms: int) -> float:
        """Give the freshest passages still waiting their vectors before searching, so a note
        just written (a mount's first seconds too) is found by its meaning: up to FEW_PENDING of
        them, the freshest first, embedded here (or by the process embedding them, whose turn
        this waits for), within ``wait_ms`` (at most READ_WAIT_MS).  A backlog (more than
        FEW_PENDING waiting) never makes a read wait: it is the background embedder's, which takes
        the freshest first, and the answer says what waits.  Returns the milliseconds spent."""
        if wait_ms <= 0 or not self.engine.indexer.embeds or not self.engine.has_pending:
            return 0.0
        if self.engine.store.pending_count() > FEW_PENDING:
            return 0.0  # a backlog: the background embedder takes the freshest first; a read never waits on it
        began = time.monotonic()
        self.engine.embed_fresh(FEW_PENDING, min(wait_ms, READ_WAIT_MS) / 1000)
        return round((time.monotonic() - began) * 1000, 1)

    def _embed_query(self, query: str) -> np.ndarray | None:
        try:
            vector = self.engine.provider.embed([query])[0]
            self.engine.provider_error = ""  # it works (again): a failure before is not news any more
            return vector
        except EmbeddingError as exc:
            self.engine.provider_error = str(exc)
            log.warning("query embedding failed, keyword search only: %s", exc)
            return None
