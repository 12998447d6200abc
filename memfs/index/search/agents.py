"""Searching other agents' memory beside one's own: ``memfs search --agent a --agent b QUERY``.

The first agent is the one the command runs as (its login, ``index.dsn``); each other agent's
index is opened read-only through that login (:meth:`memfs.index.storage.postgres.store.PgStore.reading`), which
works only when the other agent's owner granted it (``memfs pg grant --agent b --reader a``).
PostgreSQL's row-level security shows such a reader the other tenant's public rows alone; the
search asks for public rows only as well, and drops any path the caller's privacy settings call
private, so MEMORY.md and ``privacy.private_paths`` of another agent never appear.

Scores are calibrated (a score means the same across queries and indexes), so each agent's
results are found as its own search finds them and merged by score, each saying whose it is.

On SQLite there is no grant to check: every agent's index is a file of the same user, and
nothing but a convention would keep one agent out of another's.  Naming a second agent there is
an error saying it needs the PostgreSQL backend.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memfs.config import Config
from memfs.index.search.hybrid import QueryVector, SearchParams, SearchResult, hybrid_search

if TYPE_CHECKING:
    from memfs.index.storage.interface import IndexStore

# What must agree for one agent's query vector to be compared with another index's vectors.
_SAME_VECTORS = ("provider", "model", "dims")


class NotReadable(PermissionError):
    """Another agent's memory cannot be searched from here, said in one line."""


def open_readers(cfg: Config, agents: Sequence[str]) -> list[tuple[str, IndexStore]]:
    """(agent, its index opened read-only) for each other agent, in order; NotReadable naming
    the first that cannot be read (none is left open then)."""
    others = [a for a in dict.fromkeys(agents) if a != cfg.agent]
    if not others:
        return []
    if cfg.index.backend != "postgres":
        raise NotReadable(f"searching another agent's memory ({', '.join(others)}) needs index.backend = postgres, "
                          "where the other agent's owner grants it (`memfs pg grant --reader`); with SQLite search "
                          "one agent at a time")
    from memfs.index.storage.postgres.connect import PgError
    from memfs.index.storage.postgres.store import PgStore
    from memfs.workspaceid import WorkspaceIdError, workspace_id

    opened: list[tuple[str, IndexStore]] = []
    try:
        own = workspace_id(cfg.workspace)
        for agent in others:
            opened.append((agent, PgStore.reading(cfg.index.dsn, own, agent)))
    except (PgError, WorkspaceIdError) as exc:
        close(opened)
        raise NotReadable(str(exc)) from None
    return opened


def close(readers: Sequence[tuple[str, IndexStore]]) -> None:
    for _, store in readers:
        store.close()


def _comparable(own: dict[str, object] | None, other: dict[str, object] | None) -> bool:
    return bool(own and other) and all(own.get(k) == other.get(k) for k in _SAME_VECTORS)  # type: ignore[union-attr]


def search_others(readers: Sequence[tuple[str, IndexStore]], own_store: IndexStore, own_agent: str,
                  own: list[SearchResult], query: str, query_vector: QueryVector,
                  params: SearchParams, hides: Callable[[str], bool]) -> tuple[list[SearchResult], list[str]]:
    """The caller's results and each other agent's public ones, merged best first and cut to
    ``params.max_results``, each naming its agent; and warnings (an index whose vectors cannot be
    compared with the query's is searched by keyword only, and says so)."""
    merged = [_tagged(r, own_agent) for r in own]
    warnings: list[str] = []
    own_fingerprint = own_store.fingerprint
    own_workspace = getattr(own_store, "workspace", None)
    for agent, store in readers:
        vector = query_vector
        if store.has_vectors and not _comparable(own_fingerprint, store.fingerprint):
            vector = None
            warnings.append(f"agent {agent}'s index was embedded with another model: its results are by keyword only")
        with store.lock:
            found = hybrid_search(store, query, vector, params, hides=hides)
        # Two agents of one workspace index the same files: a passage already shown is not repeated.
        same_files = getattr(store, "workspace", None) == own_workspace
        if not same_files and found:
            # The name was granted from another workspace (none of this one's agents has it, or
            # its grant was revoked): its results cite that workspace's files, not this one's.
            warnings.append(f"agent {agent} is of another workspace (id {getattr(store, 'workspace', '?')}): "
                            "its results cite that workspace's files")
        shown = {(r.path, r.start_line, r.end_line) for r in merged} if same_files else set()
        merged += [_tagged(r, agent) for r in found if (r.path, r.start_line, r.end_line) not in shown]
    # Stable: on equal scores the caller's own results, then the agents in the order named.
    merged.sort(key=lambda r: -r.score)
    return merged[:params.max_results], warnings


def _tagged(result: SearchResult, agent: str) -> SearchResult:
    from dataclasses import replace

    return replace(result, agent=agent)
