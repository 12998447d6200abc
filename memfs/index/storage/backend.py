"""Which store holds the index: ``index.backend`` picks SQLite (a file in the state directory) or
PostgreSQL (the tenant of this workspace's id and agent, :mod:`memfs.index.storage.postgres.store`)."""

from __future__ import annotations

import logging
from pathlib import Path

from memfs.config import Config
from memfs.index.storage.interface import IndexStore

# Not this module's name: a shared-mode command quiets memfs.index's log (its per-file lines would
# name private files), and this warning is for exactly that mode.
log = logging.getLogger("memfs.config")


class IndexUnavailable(RuntimeError):
    """The index cannot be opened (a server that cannot be reached, refuses the login, lacks
    pgvector or the schema, or a workspace without an id): said in one line."""


def open_store(cfg: Config, index: Path, cache: Path, wait: bool = False, migrate: bool = True) -> IndexStore:
    """The store ``cfg`` asks for; IndexUnavailable saying why there is none.  ``wait`` (a
    mount): a PostgreSQL server that cannot be reached now gives a store not opened yet, whose
    every call says IndexOffline until its server answers (:class:`memfs.index.storage.postgres.store.PgStore`);
    what the server answers (a refused login, no schema) is an error all the same.  ``migrate``:
    a SQLite index of an earlier schema may be brought up to date in place (nobody else uses it)."""
    if cfg.index.backend != "postgres":
        from memfs.index.storage.sqlite.store import Store

        return Store(index, cache, migrate)
    from memfs.index.storage.postgres.connect import PgError
    from memfs.index.storage.postgres.store import PgStore
    from memfs.workspaceid import ID_FILE, WorkspaceIdError, read_id

    if not cfg.index.dsn:
        # Said here, where the index is opened, not when settings load: `memfs config` (what one
        # debugs settings with) and `memfs init` work without one.
        raise IndexUnavailable("index.backend = postgres needs a DSN: set index.dsn (the one `memfs pg grant` "
                               "printed) or MEMFS_PG_DSN")
    try:
        # Read, never made here: a tenant exists only for an id `memfs pg grant` wrote, so a new
        # one could match no login (a copy of the workspace, or one granted by id elsewhere,
        # needs the id file of the workspace it is).
        found = read_id(cfg.workspace)
        if found is None:
            raise WorkspaceIdError(f"workspace {cfg.workspace} has no id ({ID_FILE}): `memfs pg grant --workspace "
                                   f"{cfg.workspace} --agent {cfg.agent}` writes it, or copy it from the host where "
                                   "this workspace was granted")
        # The main mode on a shared-mode login is refused by the store (also when it opens later):
        # that login cannot see private rows, so it would answer without MEMORY.md as though it
        # were empty, and index private files nowhere.
        store = PgStore(cfg.index.dsn, found, cfg.agent, cfg.index.timeout_s, wait=wait,
                        needs_private=cfg.mode == "main")
    except (PgError, WorkspaceIdError) as exc:
        raise IndexUnavailable(f"index.backend = postgres: {exc}") from None
    if cfg.mode == "shared" and store.sees_private:
        # It answers right (memfs filters private rows out), but the login itself reads them: an
        # agent given this DSN could read MEMORY.md with psql.  (A store not opened yet, its
        # server away, is not known to be either: nothing said.)
        log.warning("index.dsn is the main login of agent %s: it can read private rows (MEMORY.md) from the "
                    "server; give shared-mode mounts and commands the login `memfs pg grant --shared` prints",
                    cfg.agent)
    return store
