"""Moving the index of one (workspace, agent) between its SQLite file and its PostgreSQL tenant
(``memfs index --to postgres|sqlite``), without embedding anything again.

What is copied, and how, is :mod:`memfs.index.storage.moving`'s; this module owns what surrounds it:
finding both stores of the pair, keeping every other memfs process of the pair out while it runs,
and refusing, in one line, a move that would not give a working index.  The processes that use an
index hold a shared lock on it (see ``Memory``); the move takes both backends' locks exclusively,
and their setup locks, so a mount or daemon that runs refuses the move, and one that starts meanwhile
waits for it.  A SQLite target is built beside the index file and swapped in whole, as a rebuild
does; a PostgreSQL tenant is emptied and refilled batch by batch (an interrupted move leaves a
tenant that `memfs index` completes from the files, or that the move fills again).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

from memfs.config import Config
from memfs.index.embedding.fingerprint import fingerprint
from memfs.index.embedding.providers import EmbeddingError, provider_identity
from memfs.index.indexer import replace_index_file
from memfs.index.storage.backend import IndexUnavailable, open_store
from memfs.index.storage.interface import IndexStore
from memfs.index.storage.moving import Progress, TransferError, Transferred, check_settings, transfer
from memfs.index.storage.sqlite.store import Store
from memfs.state import StatePaths, locate
from memfs.userdirs import private_opener

BACKENDS = ("sqlite", "postgres")


class MoveRefused(RuntimeError):
    """The move is not made; the message says why in one line."""


class IndexInUse(MoveRefused):
    """A mount or daemon of the pair uses its index (the front end can name it: this layer does
    not know what a mount is)."""


def move_index(cfg: Config, to: str, progress: Progress | None = None) -> tuple[Transferred, str, str]:
    """Copy the index of ``cfg``'s (workspace, agent) to the ``to`` backend from the other one:
    (what was copied, where from, where to).  ``cfg`` reaches the PostgreSQL side (``index.dsn``)
    whichever way the move goes; its other settings are the ones the moved index must have been
    built with."""
    if to not in BACKENDS:
        raise MoveRefused(f"--to takes sqlite or postgres, not {to!r}")
    paths = locate(cfg)
    try:
        identity = provider_identity(cfg.embedding)
    except EmbeddingError as exc:
        raise MoveRefused(str(exc)) from None
    wanted = fingerprint(cfg, identity)
    with _alone(cfg, paths):
        try:
            if to == "postgres":
                return _to_postgres(cfg, paths, wanted, progress)
            return _to_sqlite(cfg, paths, wanted, progress)
        except TransferError as exc:
            raise MoveRefused(str(exc)) from None


@contextlib.contextmanager
def _alone(cfg: Config, paths: StatePaths) -> Iterator[None]:
    """Both backends' locks of the pair, exclusively (see the module's docstring)."""
    with contextlib.ExitStack() as held:
        for held_as in (str(paths.index), str(paths.index) + ".pg"):
            setup = held.enter_context(open(held_as + ".setup", "a", opener=private_opener))
            fcntl.flock(setup, fcntl.LOCK_EX)
            using = held.enter_context(open(held_as + ".lock", "a", opener=private_opener))
            try:
                fcntl.flock(using, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise IndexInUse(f"the index of {cfg.workspace} (agent {cfg.agent}) is in use by a running mount or "
                                  "memfs daemon: unmount it (`memfs umount MOUNTPOINT`) or stop it, then move "
                                  "the index") from None
        yield


def _postgres(cfg: Config, paths: StatePaths) -> IndexStore:
    try:
        return open_store(cfg, paths.index, paths.cache)
    except IndexUnavailable as exc:
        raise MoveRefused(str(exc)) from None


def _to_postgres(cfg: Config, paths: StatePaths, wanted: dict[str, object],
                 progress: Progress | None) -> tuple[Transferred, str, str]:
    if not paths.index.exists():
        raise MoveRefused(f"{cfg.workspace} has no SQLite index for the agent {cfg.agent!r} ({paths.index}): "
                          "nothing to move")
    source = Store(paths.index, paths.cache)
    try:
        if source.outdated:
            raise MoveRefused(f"{paths.index} was made by an earlier memfs: run `memfs index --rebuild` first")
        recorded = source.get_meta("workspace")
        if recorded != paths.identity.as_json():
            # Memory reconciles or rebuilds such an index before it answers (moved, or another's).
            raise MoveRefused(f"{paths.index} was last used at another path or for another workspace: run "
                              "`memfs index` first, which checks it against the files")
        check_settings(source, wanted, "SQLite")
        target = _postgres(cfg, paths)
        try:
            moved = transfer(source, target, progress)
            return moved, source.location, target.location
        finally:
            target.close()
    finally:
        source.close()


def _to_sqlite(cfg: Config, paths: StatePaths, wanted: dict[str, object],
               progress: Progress | None) -> tuple[Transferred, str, str]:
    source = _postgres(cfg, paths)
    try:
        check_settings(source, wanted, "PostgreSQL")
        scratch = paths.index.with_name(f"{paths.index.name}.move-{os.getpid()}")
        _remove(scratch)
        target = Store(scratch, paths.cache)
        try:
            # The workspace it serves, or Memory would take it for another's and rebuild it.
            target.set_meta("workspace", paths.identity.as_json())
            moved = transfer(source, target, progress)
            target.settle()
        except BaseException:
            target.close()
            _remove(scratch)
            raise
        target.close()
        replace_index_file(scratch, paths.index)
        return moved, source.location, str(paths.index)
    finally:
        source.close()


def _remove(index: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(str(index) + suffix).unlink(missing_ok=True)
