"""Watching a workspace for changes made by other programs and re-indexing them.

Used by ``memfs serve`` (no FUSE at all) and by the mount, which also passes a callback that
drops the kernel's cached attributes and pages of the changed paths.
"""

from __future__ import annotations

import logging
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio
import watchfiles
from watchfiles._rust_notify import WatchfilesRustInternalError  # not re-exported by the package

from memfs import longpath
from memfs.memory import Memory
from memfs.mounttable import OtherMounts
from memfs.workspace import is_memory

log = logging.getLogger(__name__)
# watchfiles says "N changes detected" at INFO for every batch: most of a mount's log, saying
# nothing the lines below do not.
logging.getLogger("watchfiles").setLevel(logging.WARNING)
RETRIES = 20  # tries of a path whose indexing failed, one per wake of the watch (at least every 0.5 s)

# Called with (workspace-relative path, exists now) for every change, memory file or not.
OnChange = Callable[[str, bool], Awaitable[None]]
# Tells whether a change (the path's stat now, None if it is gone) is the echo of something done
# through the mount (nothing to do then).
IsOwn = Callable[[str, os.stat_result | None], bool]


def _relative(workspace: Path, raw: str) -> str | None:
    try:
        return Path(raw).relative_to(workspace).as_posix()
    except ValueError:
        return None


def _reindex(memory: Memory, rel: str, is_own: IsOwn | None = None) -> None:
    full = memory.cfg.workspace / rel
    extra = memory.cfg.index.extra_paths
    try:
        mode: int | None = longpath.stat_of(full).st_mode  # past PATH_MAX too
    except OSError:
        mode = None
    if mode is not None and stat.S_ISDIR(mode):
        # A folder changes when a file is made in it: one the mount is writing now (mkdir -p,
        # then a write) is the mount's, versioned and indexed when it is closed.
        for below in longpath.files_below(full):
            child = f"{rel}/{below}"
            if is_memory(child, extra) and not _own(is_own, child, full / below):
                memory.file_changed(child)
    elif mode is not None:
        if is_memory(rel, extra):
            memory.file_changed(rel)
    else:
        memory.path_removed(rel)


def _own(is_own: IsOwn | None, rel: str, full: Path) -> bool:
    if is_own is None:
        return False
    try:
        return is_own(rel, longpath.lstat(full))
    except OSError:
        return False


async def watch_workspace(
    memory: Memory,
    kick: Callable[[], None],
    stop: trio.Event,
    on_change: OnChange | None = None,
    is_own: IsOwn | None = None,
) -> None:
    """Re-index what other programs change in the workspace until ``stop``; ``kick`` tells the
    process's background embedder (:mod:`memfs.embedder`) that there is work."""
    while not stop.is_set():
        failure: BaseException | None = None
        try:
            await _watch(memory, kick, stop, on_change, is_own)
        except* WatchfilesRustInternalError as group:  # raised inside anyio's nursery: a group
            failure = group.exceptions[0]
        if failure is None:
            continue
        # watchfiles gives up on a name that is not UTF-8 ("Unable to decode path"): such a file
        # is skipped (memfs status names it) and the watch goes on, after a rescan that picks
        # up what changed while it was down.
        log.warning("watch: restarted after %s", failure)
        try:
            await trio.to_thread.run_sync(memory.reconcile)
        except Exception as err:  # a locked index: the next change or mount picks it up
            log.warning("watch: rescan failed (%s)", err)
        kick()
        await trio.sleep(0.2)


async def _watch(memory: Memory, kick: Callable[[], None], stop: trio.Event, on_change: OnChange | None,
                 is_own: IsOwn | None) -> None:
    workspace = memory.cfg.workspace
    others = OtherMounts(memory.cfg.state_dir, workspace)
    history = memory.history
    if history is not None:
        # checked again after a change is read: another mount can start writing in between
        history.written_elsewhere = lambda rel: others.writing(workspace / rel)
    # rust_timeout: the watching thread returns at least this often (ms), so a stop that comes
    # without ``stop`` being set (a cancelled nursery) waits no longer than this for it.
    # Paths whose indexing failed for a moment (an index locked past its busy timeout by a long
    # write on a loaded machine): tried again at the next wake, which comes at least every
    # rust_timeout, rather than left unindexed until they change again.
    failed: dict[str, int] = {}
    async for changes in watchfiles.awatch(workspace, debounce=50, step=20, stop_event=stop, rust_timeout=500,
                                           recursive=True, ignore_permission_denied=True, yield_on_timeout=True):
        paths = sorted({rel for _, raw in changes if (rel := _relative(workspace, raw))} | failed.keys())
        if not paths:
            continue
        embed = False
        for rel in paths:
            try:
                st = longpath.lstat(workspace / rel)
                exists = True
            except FileNotFoundError:
                st, exists = None, False
            except OSError as exc:
                log.warning("watch: cannot stat %s: %s", rel, exc)
                continue
            if is_own is not None and is_own(rel, st):
                continue
            if st is not None and is_memory(rel, memory.cfg.index.extra_paths) and others.writing(workspace / rel):
                # Another mount of this workspace is writing it: that mount keeps the version and
                # indexes it at close, in the writer's name; only this mount's caches must go.
                log.debug("changed through another mount, still open there: %s", rel)
                if on_change is not None:
                    await on_change(rel, exists)
                continue
            if is_memory(rel, memory.cfg.index.extra_paths):
                log.info("changed %s: %s", "beside the mount" if on_change is not None else "in the workspace", rel)
            else:  # any other file (a build, .rejected/): the kernel's caches go, nothing more to say
                log.debug("changed %s: %s", "beside the mount" if on_change is not None else "in the workspace", rel)
            try:
                await trio.to_thread.run_sync(_reindex, memory, rel, is_own)
                failed.pop(rel, None)
            except Exception as exc:  # one bad moment (a locked index, a vanished file) must not end the watch
                tries = failed.pop(rel, 0) + 1
                if tries < RETRIES:
                    failed[rel] = tries
                    log.info("watch: could not index %s now (%s); trying again", rel, exc)
                else:
                    log.warning("watch: could not index %s (%s, %d tries); the next change or mount picks it up",
                                rel, exc, tries)
            embed = True
            if on_change is not None:
                await on_change(rel, exists)
        if embed:
            kick()
