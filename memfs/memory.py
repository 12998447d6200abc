"""``Memory``: the one façade every front end (CLI, FUSE, watcher) calls.

It owns the (workspace, agent) store, the embedding provider and the indexer, and answers
search, get, bundle, status, file_changed and ingest_sync.  Reads take a mode: ``main`` sees
everything, any other mode is shared and never sees a private path (see :mod:`memfs.privacy`).
Nothing here knows about FUSE or click.
"""

from __future__ import annotations


import contextlib
import dataclasses
import datetime as dt
import fcntl
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs import longpath, notes
from memfs.cleantext import clean_text, describe
from memfs.config import MAIN_MODE, READ_WAIT_MS, SHARED_MODE, BundleConfig, Config, PrivacyConfig
from memfs.history.keeper import (
    History,
    NoSuchVersion,  # noqa: F401  (front ends take them from here)
)
from memfs.history.provenance import BESIDE, CLI, MCP, MOUNT, Provenance  # noqa: F401
from memfs.history.store import FAILURES as HISTORY_FAILURES
from memfs.history.store import Forgotten, HistoryError, Version  # noqa: F401
from memfs.index.backlog import Backlog, still_to_chunk
from memfs.index.deferred import PathLocks, threshold
from memfs.index.backlog import read as read_backlog
from memfs.index.embeddings import EmbeddingError, NoProvider, Provider, make_provider, provider_identity
from memfs.index.embedturns import EmbedTurns
from memfs.index.messages import as_text as messages_as_text
from memfs.index.messages import parse_jsonl, session_header
from memfs.index.indexer import (
    Indexer,
    Outcome,
    Progress,
    fingerprint,
    fingerprint_change,
    kept_reading,
    reading_mode,
    reading_words,
    replace_index_file,
    serves,
)
from memfs.index.search import (  # noqa: F401  (front ends take them from here)
    QUERY_EMBED_CHARS,
    BadOption,
    SearchOptions,
    SearchParams,
    SearchResponse,
    empty_scope,
    hybrid_search,
    parse_options,
)
from memfs.index import across
from memfs.index.across import NotReadable  # noqa: F401  (front ends take it from here)
from memfs.index.backend import IndexUnavailable, open_store
from memfs.index.interface import IndexOffline, IndexStore  # noqa: F401  (front ends take IndexOffline from here)
from memfs.index.outage import Outage
from memfs.indexmove import IndexInUse, MoveRefused, move_index  # noqa: F401  (front ends take them from here)
from memfs.index.store import Store
from memfs.privacy import Privacy, read_visible
from memfs.render import bundle as bundle_render
from memfs.state import StatePaths, WorkspaceIdentity, locate
from memfs.sync import protocol as sync_protocol
from memfs.sync.store import IngestResult, SyncStore, SyncStoreError
from memfs.versions import Versions, VersionsError  # noqa: F401
from memfs.workspace import (
    LONG_TERM_NAMES,
    FileKind,
    OutsideWorkspace,
    SYNC_DIR,
    classify,
    is_memory,
    iter_memory_files,
    name_is_text,
    relative,
    shown,
    timezone,
    today,
)

log = logging.getLogger(__name__)

GET_DEFAULT_LINES = 200
# How few passages may be pending for a read to wait at all (at most READ_WAIT_MS, to which
# search.pending_wait_ms is capped): a note just written, not a backlog.
FEW_PENDING = 16
GET_MAX_CHARS = 20_000


@dataclass(frozen=True)
class GetResult:
    path: str
    from_line: int
    to_line: int  # last line included (from_line - 1 when nothing was returned)
    total_lines: int
    text: str
    next_from: int | None  # where to continue, None at the end
    bad_bytes: int = 0  # bytes of the file that are not text (shown as U+FFFD)

    @property
    def warning(self) -> str:
        return f"{self.path}: {describe(self.bad_bytes)}" if self.bad_bytes else ""

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "from": self.from_line,
            "to": self.to_line,
            "total_lines": self.total_lines,
            "next_from": self.next_from,
            "text": self.text,
            "warnings": [self.warning] if self.warning else [],
        }


class GetError(ValueError):
    pass


BUNDLE_MODES = (MAIN_MODE, SHARED_MODE)
SyncError = sync_protocol.SyncError  # what ingest_sync raises, for front ends that must not import sync/
# Sync data validated already: (its messages, how many bytes and how many lines they came from).
ParsedSync = tuple[list[sync_protocol.SyncMessage], int, int]


AppendError = notes.AppendError


class UnknownMode(ValueError):
    pass


class IndexBusy(RuntimeError):
    """The index cannot be opened or replaced now: another process uses it, or (PostgreSQL) its
    server cannot be reached or refuses this login; the message says which, in one line."""


class NotAllowed(PermissionError):
    """What a shared mode may not read (the main context bundle)."""


def _try_lock(held: object, kind: int) -> bool:
    """``kind`` of flock on ``held`` if nobody's lock is in the way now."""
    try:
        fcntl.flock(held, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class Memory:
    def __init__(self, cfg: Config, provider: Provider | None = None, offline_start: bool = False) -> None:
        """``offline_start`` (a mount): an index whose server cannot be reached now does not stop
        it: the files are served and written, reads say the index is unavailable, and the checks
        below run when the server answers, before the catch-up reconciles (:meth:`_catch_up`)."""
        self.cfg = cfg
        self._offline_start = offline_start
        self._unchecked = False  # the index's checks wait for its server (started while it was away)
        self.started = time.time()
        self._provider = provider
        self.provider_error = ""
        self._embed_lock = threading.Lock()
        self._identity_known: tuple[str, str, int] | None = None
        self._stopping = threading.Event()  # set by stop(): no new embedding batch starts
        self._query_pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memfs-query")
        # include_private -> (content generation, the passages big writes being chunked will add):
        # summing their lines took 1.6 ms a search during an 8 MB import; they change with the text.
        self._coming: dict[bool, tuple[int, int]] = {}
        self._history: History | None = None
        self._history_lock = threading.Lock()
        self._indexing = PathLocks()  # a close() and the completion worker never index one file at once
        self.sync_validated = 0  # sync messages validated by this process (the mount shows it)
        self.sync_limits = sync_protocol.Limits(cfg.sync.max_message_kb * 1024,
                                                int(cfg.sync.max_envelope_mb * 1024 * 1024))
        self.paths: StatePaths = locate(cfg)
        # Every process using this index holds a shared lock on it; replacing the file (a
        # rebuild) takes it exclusively, so no running mount ever has its index swapped away.
        # (An index on PostgreSQL is another index than the SQLite file of the same name: its own lock.)
        held = str(self.paths.index) + (".pg" if cfg.index.backend == "postgres" else "")
        self._setup = held + ".setup"
        self._using = open(held + ".lock", "a")
        with open(self._setup, "a") as setup:
            fcntl.flock(setup, fcntl.LOCK_EX)  # one process at a time upgrades or checks it
            try:
                # Alone with the index (no other process holds it), its schema may be upgraded in
                # place; the exclusive lock becomes the shared one at the end of this block.
                alone = _try_lock(self._using, fcntl.LOCK_EX)
                self.store: IndexStore = open_store(cfg, self.paths.index, self.paths.cache, wait=offline_start,
                                                    migrate=alone)
            except IndexUnavailable as exc:
                self._using.close()
                raise IndexBusy(str(exc)) from None
            # On PostgreSQL the tenant's hosts share the sync message ids (dedup across hosts).
            claims = getattr(self.store, "sync_claims", None)
            self.sync_store = SyncStore(cfg.workspace, timezone(cfg.sync.timezone), None if claims is None else (
                lambda fresh, known, shared: claims(fresh, known, shared, self.privacy(SHARED_MODE).is_private)))
            self.indexer = Indexer(cfg, self.store, lambda: self.provider, self._identity, EmbedTurns(held + ".embed"))
            # A server that goes away later (PostgreSQL): writes stand, their indexing is owed.
            self.outage = Outage(lambda: self.store.generation, self._catch_up, self.embed_pending)
            try:
                self._check_index()
            except IndexOffline as exc:
                if not offline_start:
                    self.store.close()
                    self._using.close()
                    raise IndexBusy(str(exc)) from None
                # Started while the index's server is away: as an outage that began now.
                self._unchecked = True
                self.outage.down(exc)
            fcntl.flock(self._using, fcntl.LOCK_SH)

    def _check_index(self) -> None:
        """Before the index answers: rebuilt if an earlier memfs made it or other settings built
        it, and (SQLite) its workspace checked.  IndexOffline: its server is away."""
        if self.store.outdated:
            log.warning("index %s was made by an earlier memfs: rebuilding it (vectors come from the cache)",
                        self.paths.index)
            try:
                self._rebuild_alone()
            except IndexBusy:
                raise IndexBusy(f"{self.paths.index} was made by an earlier memfs and is in use by its running "
                                "mount: unmount it (`memfs umount MOUNTPOINT`) and mount again, and this "
                                "command works") from None
        self._check_fingerprint()
        self._check_workspace()

    def _catch_up(self) -> list[Outcome]:
        """The index's server answers again (:mod:`memfs.index.outage`): the checks a start
        while it was away put off, then the index reconciled with the files."""
        if self._unchecked:
            with open(self._setup, "a") as setup:
                fcntl.flock(setup, fcntl.LOCK_EX)
                self._check_index()
            self._unchecked = False
        return self.reconcile_index()

    def set_privacy(self, settings: PrivacyConfig) -> None:
        """New privacy settings (the workspace's .memfs.toml changed under a running mount)."""
        self.cfg.privacy = settings
        self.indexer.privacy = Privacy(settings.private_paths, SHARED_MODE)

    def set_bundle(self, settings: BundleConfig) -> None:
        """New context settings (the workspace's .memfs.toml changed under a running mount)."""
        self.cfg.bundle = settings

    def privacy(self, mode: str | None = None) -> Privacy:
        """What ``mode`` (default: the configured one) may see."""
        return Privacy(self.cfg.privacy.private_paths, self.cfg.mode if mode is None else mode)

    def _check_workspace(self) -> None:
        """An index serves only the workspace it was made from.  One recorded for the same
        folder at another path (the workspace was moved) is reconciled with the files; one of
        unknown origin (an index of an earlier version, a copied state directory) is rebuilt
        from this workspace's files before it answers anything, so no other text survives."""
        if self.store.backend == "postgres":
            return  # the tenant is the workspace's own id (.memfs-id), whatever its path on this host
        wanted = self.paths.identity
        raw = self.store.get_meta("workspace")
        recorded = WorkspaceIdentity.from_json(raw) if raw else None
        if recorded == wanted:
            return
        # The same folder at another path (moved), or the same path with another device number
        # (overlay and network file systems renumber devices): its own files, reconciled.
        same = recorded is not None and ((recorded.dev, recorded.ino) == (wanted.dev, wanted.ino)
                                         or recorded.path == wanted.path)
        if same:
            assert recorded is not None
            log.info("workspace %s is now %s: reconciling its index", recorded.path, wanted.path)
            self.indexer.reconcile()
        elif raw is not None or self.store.files():
            log.warning("index %s was made for %s; rebuilding it for %s before use", self.paths.index,
                        recorded.path if recorded else "an unknown workspace", wanted.path)
            self._rebuild_alone()
        self.store.set_meta("workspace", wanted.as_json())

    # -- provider and fingerprint -------------------------------------------------------------

    @property
    def provider(self) -> Provider:
        if self._provider is None:
            try:
                self._provider = make_provider(self.cfg.embedding)
            except EmbeddingError as exc:
                # Keyword search keeps working; searches carry this warning until it is fixed.
                self.provider_error = str(exc)
                log.warning("embedding provider %s unavailable: %s", self.cfg.embedding.provider, exc)
                self._provider = NoProvider()
        return self._provider

    def _identity(self) -> tuple[str, str, int]:
        """(provider, model, dims), settled once: with embedding.model_path it hashes the model
        file, and indexing asks for every file it writes."""
        if self._identity_known is None:
            self._identity_known = self._settle_identity()
        return self._identity_known

    def _settle_identity(self) -> tuple[str, str, int]:
        name, model, dims = provider_identity(self.cfg.embedding)
        if name != "none" and not dims:
            provider = self.provider
            if provider.dims:
                model, dims = provider.model, provider.dims
        return name, model, dims

    def _check_fingerprint(self) -> None:
        wanted = fingerprint(self.cfg, self._identity())
        current = self.store.fingerprint
        if current is None:
            self.store.set_fingerprint(wanted, int(wanted["dims"]))  # type: ignore[arg-type]
        elif not serves(current, wanted):
            if self._served_elsewhere():
                log.warning("these settings differ from those the running mount or daemon indexes with (%s): they "
                            "take effect when it is mounted or started again; this command uses the index as it is",
                            fingerprint_change(current, wanted))
                built = (current.get("provider"), current.get("model"), current.get("dims"))
                if built != (wanted["provider"], wanted["model"], wanted["dims"]):
                    # Vectors of this command's model would not fit that index: it looks vectors up
                    # as the index was built, embeds nothing, and searches by keyword, saying why.
                    self._identity_known = (str(built[0]), str(built[1]), int(built[2] or 0))  # type: ignore[arg-type]
                    self._provider = NoProvider()
                    self.provider_error = (
                        f"the index was built with {built[0]} {built[1] or ''} ({built[2]} dims) by a memfs process "
                        f"that is using it; these settings embed with {wanted['provider']} {wanted['model'] or ''} "
                        f"({wanted['dims']} dims): stop that mount or daemon, then run `memfs index --rebuild`")
                return
            log.warning("the index was built with other settings (%s): rebuilding it (vectors the cache holds are "
                        "not embedded again)", fingerprint_change(current, wanted))
            self._rebuild_alone()

    def _served_elsewhere(self) -> bool:
        """Whether another process uses this index (holds its lock)."""
        try:
            fcntl.flock(self._using, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(self._using, fcntl.LOCK_SH)
        return False

    def rebuild(self, progress: Progress | None = None) -> list[Outcome]:
        """Build a fresh index beside the old one, then swap it in atomically.  Searches keep using
        the old index until the swap; the embedding cache carries over.  Refused (IndexBusy) while
        another process uses the index: a running mount would go on with the old file.  Says
        which settings changed, if any (an index kept with an older reading moves to the new)."""
        built = dict(self.store.fingerprint or {})
        outcomes = self._rebuild_alone(progress)
        if built and (changed := fingerprint_change(built, dict(self.store.fingerprint or {}))):
            log.warning("rebuilt with these settings: %s", changed)
        return outcomes

    def _rebuild_alone(self, progress: Progress | None = None) -> list[Outcome]:
        """:meth:`rebuild`, with the index to itself (see there)."""
        try:
            fcntl.flock(self._using, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise IndexBusy(f"{self.store.location} is in use by a running mount or another memfs: unmount "
                            "(`memfs umount MOUNTPOINT`) before rebuilding it") from None
        try:
            return self._rebuild(progress)
        finally:
            fcntl.flock(self._using, fcntl.LOCK_SH)

    def _rebuild(self, progress: Progress | None) -> list[Outcome]:
        if self.store.backend == "postgres":
            return self._rebuild_in_place(progress)
        target = self.paths.index
        scratch = target.with_name(f"{target.name}.rebuild-{os.getpid()}")
        for suffix in ("", "-wal", "-shm"):
            Path(str(scratch) + suffix).unlink(missing_ok=True)
        fresh = Store(scratch, self.paths.cache)
        ident = self._identity()
        fresh.set_fingerprint(fingerprint(self.cfg, ident), ident[2])
        fresh.set_meta("workspace", self.paths.identity.as_json())
        builder = Indexer(self.cfg, fresh, self.indexer.provider_source, self._identity)
        outcomes = builder.reconcile(progress)
        try:
            builder.embed_pending()
        except EmbeddingError as exc:
            log.warning("rebuild: embedding failed, chunks stay keyword-only: %s", exc)
        fresh.settle()
        fresh.close()
        with self.store.lock:
            self.store.close()
            replace_index_file(scratch, target)
            self.store = Store(target, self.paths.cache)
            self.indexer = Indexer(self.cfg, self.store, self.indexer.provider_source, self._identity)
        return outcomes

    def _rebuild_in_place(self, progress: Progress | None) -> list[Outcome]:
        """A tenant's index is emptied and refilled from the files (vectors from the cache):
        there is no second file to build beside it and swap in."""
        ident = self._identity()
        with self.store.lock:
            self.store.clear()  # type: ignore[attr-defined]
            self.store.set_fingerprint(fingerprint(self.cfg, ident), ident[2])
            outcomes = self.indexer.reconcile(progress)
        try:
            self.indexer.embed_pending()
        except EmbeddingError as exc:
            log.warning("rebuild: embedding failed, chunks stay keyword-only: %s", exc)
        return outcomes

    # -- indexing -----------------------------------------------------------------------------

    def index(self, progress: Progress | None = None, embed_progress: Progress | None = None) -> list[Outcome]:
        """Reconcile the index with the workspace files and embed what is missing."""
        outcomes = self.reconcile(progress)
        self.embed_pending(progress=embed_progress)
        return outcomes

    def reconcile(self, progress: Progress | None = None) -> list[Outcome]:
        """Bring the index and the history in step with the files (changes made while nothing
        watched): at a mount's or a daemon's start, and by ``memfs index``."""
        if self.history is not None:
            self.history.reconcile(iter_memory_files(self.cfg))
            self.history.prune()
        if self._unchecked:
            return []  # started while the index's server was away: its catch-up reconciles, once checked
        # Writes may be indexed meanwhile (a daemon, `memfs index` beside a mount): each path's lock.
        try:
            return self.indexer.reconcile(progress, hold=self._indexing.held)
        except IndexOffline as exc:
            if not self._offline_start:
                raise
            self.outage.down(exc)  # a mount's start or rescan: the catch-up reconciles when it answers
            return []

    @property
    def history(self) -> History | None:
        """The versions of the memory files (None with history.enabled = false); opened on first use."""
        if self._history is None and self.cfg.history.enabled:
            with self._history_lock:
                if self._history is None:
                    self._history = History(self.cfg, self.paths.history, self.paths.identity.as_json())
        return self._history

    def versions(self, mode: str | None = None) -> Versions:
        """The history as ``mode`` may see it (see :mod:`memfs.versions`)."""
        privacy = self.privacy(mode)
        writable = tuple(w.rstrip("/") for w in self.cfg.privacy.shared_writable)

        def may_write(rel: str) -> bool:
            return not privacy.shared or any(rel == w or rel.startswith(w + "/") for w in writable)

        return Versions(self.history, privacy, may_write, self.file_changed)

    def _after_change(self, keep: Callable[[History], object], rel: str) -> None:
        """Keep a version of a change that has happened already: if that fails, the change stands
        and is still indexed; the log says the version is missing and why."""
        history = self.history
        if history is None:
            return
        try:
            keep(history)
        except HISTORY_FAILURES as exc:
            log.error("history: no version of %s was kept (%s); the change itself stands", rel, exc)

    def before_change(self, rel: str) -> None:
        """``rel`` is about to be changed (truncated, written, replaced, removed): whatever it
        holds now is kept first, if it is not kept already."""
        if self.history is not None:
            self.history.before_change(rel)

    def file_changed(self, rel: str, who: Provenance = BESIDE, appended_from: int | None = None,
                     defer: bool = False) -> Outcome:
        """A file was written (closed, fsynced, renamed into place, changed beside the mount) by
        ``who``: its new content is kept as a version, then indexed.  ``appended_from``: nothing
        before this offset was written since its last version (see History.changed).  ``defer``:
        a big write gets its keyword rows only (Outcome.provisional; :meth:`complete` does the
        rest, see :mod:`memfs.index.deferred`)."""
        # Under the path's lock: a watcher in this process that sees the write before its writer
        # got here waits, then finds the version kept already (not one of its own, "via watcher").
        with self._indexing.held(rel):
            self._after_change(lambda history: history.changed(rel, who, appended_from), rel)
            return self._index_changed(rel, threshold(self.cfg.index.defer_mb) if defer else None)

    def _index_changed(self, rel: str, defer_over: int | None = None) -> Outcome:
        with self._indexing.held(rel):
            try:
                outcome = self.indexer.index_file(rel, defer_over=defer_over)
            except IndexOffline as exc:
                return self._owed(rel, exc)
        if outcome.action == "skipped" and outcome.reason:
            log.warning("not indexed: %s: %s", outcome.path, outcome.reason)  # printable, whatever the name
        return outcome

    def complete(self, rel: str) -> Outcome | None:
        """The exact chunks of a file indexed provisionally (None if it is not any more)."""
        if self._stopping.is_set():
            return None  # the next start's reconcile does it
        with self._indexing.held(rel):
            try:
                return self.indexer.complete(rel)
            except IndexOffline as exc:
                self._owed(rel, exc)
                return None

    def _owed(self, rel: str, exc: IndexOffline) -> Outcome:
        """``rel`` changed while the index's server is away: the change stands, its indexing is owed."""
        self.outage.down(exc, rel)
        return Outcome(rel, "owed", reason=str(exc))

    def reconcile_index(self) -> list[Outcome]:
        """The index (not the history) in step with the files, beside writes being indexed: a
        mount's privacy change, and the catch-up after the index's server was away (see
        :mod:`memfs.index.outage`); writes indexed meanwhile are not undone (each path's lock)."""
        return self.indexer.reconcile(hold=self._indexing.held)

    def provisional_paths(self) -> list[str]:
        """Files whose exact chunks are still owed (see :mod:`memfs.index.deferred`); none while
        the index's server is away (the catch-up's reconcile completes them)."""
        try:
            return self.store.provisional_paths()
        except IndexOffline as exc:
            self.outage.down(exc)
            return []

    def file_removed(self, rel: str) -> bool:
        try:
            return self.indexer.remove(rel)
        except IndexOffline as exc:
            self._owed(rel, exc)
            return False

    def file_moved(self, old: str, new: str) -> Outcome:
        try:
            return self.indexer.rename(old, new)
        except IndexOffline as exc:
            return self._owed(new, exc)

    def path_removed(self, rel: str, who: Provenance = BESIDE) -> int:
        """A file or a whole directory is gone: drop every indexed file at or below ``rel``
        (their versions stay, with the deletion recorded)."""
        self._after_change(lambda history: history.removed(rel, who), rel)
        try:
            paths = self.store.paths_under(shown(rel))  # a name that is not UTF-8 is indexed as shown()
            for path in paths:
                self.indexer.remove(path)
        except IndexOffline as exc:
            self._owed(rel, exc)
            return 0
        return len(paths)

    def path_moved(self, old: str, new: str, who: Provenance = BESIDE) -> list[Outcome]:
        """A file or directory was renamed: move indexed files along (no re-embedding), drop
        those that left the memory paths, index memory files that arrived.  In the history the
        old name is deleted and the new one has a new version."""
        self._after_change(lambda history: history.moved(old, new, who), new)
        try:
            return self._index_moved(old, new)
        except IndexOffline as exc:
            return [self._owed(new, exc)]

    def _index_moved(self, old: str, new: str) -> list[Outcome]:
        outcomes = []
        moved = set()
        if name_is_text(old) and name_is_text(new):
            for path in self.store.paths_under(old):
                target = new + path[len(old):]
                outcomes.append(self.indexer.rename(path, target))
                moved.add(target)
        else:
            # A name that is not UTF-8 is indexed as shown() and holds no chunks (it is skipped):
            # its rows go, and whatever arrived under the new name is indexed below.
            for path in self.store.paths_under(shown(old)):
                self.indexer.remove(path)
        full = self.cfg.workspace / new
        candidates = [new] if not full.is_dir() else [
            (Path(d).relative_to(self.cfg.workspace) / name).as_posix()
            for d, _, names in os.walk(full) for name in names
        ]
        for path in candidates:
            if path not in moved and is_memory(path, self.cfg.index.extra_paths):
                outcomes.append(self.indexer.index_file(path))
        return outcomes

    def embed_pending(self, limit: int | None = None, progress: Progress | None = None) -> int:
        """Embed chunks still without a vector; a provider failure is logged, not raised."""
        if not self.indexer.embeds or self._stopping.is_set():
            return 0
        with self._embed_lock:
            if self._stopping.is_set():  # stopped while this thread waited: the store may be closing
                return 0
            try:
                return self.indexer.embed_pending(limit=limit, progress=progress, stop=self._stopping)
            except IndexOffline as exc:
                self.outage.down(exc)  # its catch-up embeds what is left
                return 0
            except EmbeddingError as exc:
                self.provider_error = str(exc)
                log.warning("embedding failed, new chunks stay keyword-only for now: %s", exc)
                return 0

    @property
    def pending(self) -> int:
        return int(self._waiting(self.store.pending_count))

    @property
    def has_pending(self) -> bool:
        """Whether anything waits for its vector (:attr:`pending` without counting it)."""
        return bool(self._waiting(self.store.has_pending))

    def _waiting(self, ask: Callable[[], int | bool]) -> int | bool:
        """The store's answer about the backlog; none (0) while the index is away: nothing can be
        embedded now, and the event loop must not wait to be told."""
        if self.outage.reason:
            return 0
        try:
            return ask()
        except IndexOffline as exc:
            self.outage.down(exc)
            return 0

    def pending_told(self, mode: str | None = None) -> int:
        """:attr:`pending` as ``mode``'s reader may be told it: a shared mode counts public
        passages only (a count of private ones says how much private text was written)."""
        privacy = self.privacy(mode)
        if not privacy.shared:
            return self.pending
        if self.outage.reason:
            return 0
        try:
            return self.store.counts(include_private=False, exclude=self._hidden_now(privacy))["pending"]
        except IndexOffline as exc:
            self.outage.down(exc)
            return 0

    # -- reading ------------------------------------------------------------------------------

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
        :mod:`memfs.index.search`), ``max_results``/``min_score`` override theirs.  ``agents``:
        other agents whose public memory is searched too, through this login's reader grants
        (:mod:`memfs.index.across`); NotReadable naming one that may not be read.  An index whose
        server is away answers no results and says so (SearchResponse.unavailable)."""
        readers = across.open_readers(self.cfg, agents)  # before anything: refused means no rows at all
        try:
            response = self._search(query, max_results, min_score, wait_ms, mode, options, readers)
        except IndexOffline as exc:
            self.outage.down(exc)
            return SearchResponse(query=query, results=[], provider=self.cfg.embedding.provider, generation=None,
                                  warnings=[f"{exc}; nothing was searched (writes are kept, and indexed when "
                                            "it answers again)"], unavailable=str(exc))
        finally:
            across.close(readers)
        if owed := self._owed_now(mode):
            response.warnings.append(f"the index is catching up with {len(owed)} file{'s' if len(owed) != 1 else ''} "
                                     "written while its server was unavailable: they may be missing from these "
                                     "results for a moment")
        return response

    def _owed_now(self, mode: str | None) -> list[str]:
        """The files whose indexing waits for the index's server, that ``mode`` may know of."""
        if not self.outage.active:
            return []
        privacy = self.privacy(mode)
        return sorted(p for p in self.outage.owed if not privacy.hides(p))

    def _search(self, query: str, max_results: int | None, min_score: float | None, wait_ms: int | None,
                mode: str | None, options: SearchOptions | None,
                readers: list[tuple[str, IndexStore]]) -> SearchResponse:
        options = dataclasses.replace(
            options or SearchOptions(),
            **{k: v for k, v in (("max_results", max_results), ("min_score", min_score)) if v is not None})
        params = SearchParams.from_config(self.cfg.search, options)
        warnings: list[str] = []
        if not query.strip():
            return SearchResponse(query=query, results=[], provider=self.cfg.embedding.provider,
                                  generation=self.store.generation, warnings=["the query is empty"])
        if self.store.get_meta("reconciled_at") is None:
            warnings.append(
                f"this workspace has not been indexed yet for agent {self.cfg.agent}: run `memfs index` "
                "(a mount or `memfs watch` keeps it current)"
            )
        waited_ms = self._wait_for_vectors(self.cfg.search.pending_wait_ms if wait_ms is None else wait_ms)
        provider = self.provider
        embedding = (self._query_pool.submit(self._embed_query, query[:QUERY_EMBED_CHARS])
                     if provider.dims else None)
        with self.store.lock:
            # The query is embedded on another thread while SQLite runs the keyword side.
            privacy = self.privacy(mode)
            hides = privacy.is_private if privacy.shared else None
            results = hybrid_search(self.store, query, embedding.result if embedding else None, params, hides=hides)
            if not results and (scope_warning := empty_scope(self.store, params.options, hides)):
                warnings.append(scope_warning)
            generation = None if privacy.shared else self.store.generation
            pending = (self.store.counts(include_private=False)["pending"] if privacy.shared
                       else self.store.pending_count())
        if self.cfg.embedding.provider != "none" and (embedding is None or embedding.result() is None):
            warnings.append(f"embedding provider failed ({self.provider_error}); keyword results only")
        warnings += self._file_warnings(results, privacy)
        if readers:  # another agent's private paths are hidden as from a shared reader of ours
            results, more = across.search_others(
                readers, self.store, self.cfg.agent, results, query, embedding.result if embedding else None, params,
                Privacy(self.cfg.privacy.private_paths, SHARED_MODE).is_private)
            warnings += more
        # The passages big writes still being chunked will add wait too, as `memfs status` counts
        # them (an estimate from the lines their keyword rows hold): told "pending: 0" during an
        # import, an agent took it that nothing waited.
        chunking = self.store.provisional_paths(include_private=not privacy.shared)
        coming = self._still_to_come(not privacy.shared) if chunking else 0
        pending += coming
        note = self.backlog(pending, include_private=not privacy.shared).line()
        if chunking:
            shown = ", ".join(chunking[:3]) + (f" and {len(chunking) - 3} more" if len(chunking) > 3 else "")
            shown += f"; about {coming} of the passages waiting are to come from {'it' if len(chunking) == 1 else 'them'}" \
                if coming else ""
            owed = (f"{len(chunking)} big write{'s' if len(chunking) != 1 else ''} still being chunked ({shown}): "
                    "found by keyword only until then")
            note = f"{note}; {owed}" if note else owed
        return SearchResponse(
            query=query,
            results=results,
            provider=provider.name if not self.provider_error else f"{self.cfg.embedding.provider} (failed)",
            model=provider.model,
            generation=generation,
            pending=pending,
            pending_estimated=coming,
            warnings=warnings,
            pending_note=note,
            waited_ms=waited_ms,
            agents=[self.cfg.agent, *(agent for agent, _ in readers)] if readers else [],
        )

    def _still_to_come(self, include_private: bool) -> int:
        """The passages the big writes still being chunked will add (estimated as status does),
        summed again only when the text changed."""
        if not self.store.has_vectors:
            return 0
        generation = self.store.content_generation  # read first: a change meanwhile sums again
        known = self._coming.get(include_private)
        if known is None or known[0] != generation:
            owed = self.store.provisional_lines(include_private)
            known = (generation, still_to_chunk(sum(n for _, n, _ in owed), sum(n for _, n, jsonl in owed if jsonl)))
            self._coming[include_private] = known
        return known[1]

    def _wait_for_vectors(self, wait_ms: int) -> float:
        """Give a process that is embedding a just-written note's few passages a moment to
        finish, at most READ_WAIT_MS in all; a read never embeds, and never waits on a backlog
        (more than FEW_PENDING passages): it answers from what has vectors now.  Returns the
        milliseconds waited."""
        began = time.monotonic()
        deadline = began + min(wait_ms, READ_WAIT_MS) / 1000
        if not self.indexer.embeds:
            return 0.0
        slept = False
        while time.monotonic() < deadline:
            pending = self.store.pending_count()
            if not pending or pending > FEW_PENDING or not self.backlog(pending).active:
                break
            time.sleep(0.005)
            slept = True
        return round((time.monotonic() - began) * 1000, 1) if slept else 0.0

    def backlog(self, pending: int | None = None, include_private: bool = True) -> Backlog:
        """What waits for vectors, at the embedding rate last measured (by any process);
        ``include_private``: measured over every batch (the main mode's view), else over those
        without private text (what a shared reader may be told)."""
        return read_backlog(self.store, self.store.pending_count() if pending is None else pending, include_private)

    def _embed_query(self, query: str) -> np.ndarray | None:
        try:
            vector = self.provider.embed([query])[0]
            self.provider_error = ""  # it works (again): a failure before is not news any more
            return vector
        except EmbeddingError as exc:
            self.provider_error = str(exc)
            log.warning("query embedding failed, keyword search only: %s", exc)
            return None

    def get(self, path: str, from_line: int = 1, lines: int | None = None, mode: str | None = None,
            messages: bool = False) -> GetResult:
        """Read part of a workspace file, bounded, saying where to continue.  ``messages``: a sync
        file's or transcript's lines as the messages they hold, under their chat's title (what
        search indexes), instead of the JSON; the line numbers stay the file's."""
        if from_line < 1:
            raise GetError("--from must be 1 or more")
        count = GET_DEFAULT_LINES if lines is None else lines
        if count < 1:
            raise GetError("--lines must be 1 or more")
        try:
            rel = relative(self.cfg.workspace, path)
        except OutsideWorkspace as exc:
            raise GetError(str(exc)) from None
        # A private file answers exactly like a missing one: a shared reader learns nothing.
        try:
            data = read_visible(self.cfg.workspace, rel, self.privacy(mode))
        except IsADirectoryError:
            raise GetError(f"{rel} is a folder, not a file (ls it, or name a file in it)") from None
        except OSError:
            raise GetError(f"{rel}: no such file in the workspace") from None
        text, bad = clean_text(data)  # as search shows it: a stray byte is a mark, not a refusal
        all_lines = text.split("\n")
        if all_lines and all_lines[-1] == "":
            all_lines.pop()
        total = len(all_lines)
        if from_line > max(total, 1):
            raise GetError(f"{rel} has {total} line{'s' if total != 1 else ''}: --from {from_line} is past its end")
        picked: list[str] = []
        size = 0
        for line in all_lines[from_line - 1 : from_line - 1 + count]:
            if picked and size + len(line) + 1 > GET_MAX_CHARS:
                break
            if len(line) > GET_MAX_CHARS:
                line = line[:GET_MAX_CHARS] + " …[line truncated]"
            picked.append(line)
            size += len(line) + 1
        to_line = from_line + len(picked) - 1
        next_from = to_line + 1 if to_line < total else None
        body = "\n".join(picked) + ("\n" if picked else "")
        if messages:
            body = self._as_messages(rel, body, from_line, all_lines[0] if all_lines else "")
        return GetResult(rel, from_line, to_line, total, body, next_from, bad)

    def _as_messages(self, rel: str, body: str, from_line: int, first_line: str) -> str:
        kind = classify(rel, self.cfg.index.extra_paths)
        if not kind.is_jsonl:
            raise GetError(f"{rel} is not a sync file or session transcript: --messages reads JSONL messages "
                           "(leave it out to read the file)")
        session = kind is FileKind.SESSION
        header = session_header(first_line) if session and from_line > 1 else ("", "")
        return messages_as_text(parse_jsonl(body, session=session, first_line=from_line, header=header))

    def _parse_sync(self, data: bytes, source: str, first_line: int = 1,
                    whole: bytes | None = None) -> list[sync_protocol.SyncMessage]:
        """Validated messages; invalid data (``whole``, if ``data`` is the end of it) is kept
        under clawgpt-memory/.rejected/ with the reason, and raises SyncError."""
        try:
            messages = sync_protocol.parse(data, first_line, limits=self.sync_limits)
        except sync_protocol.SyncError as exc:
            kept = self._reject(source, data if whole is None else whole, exc)
            # INFO: the front end reports it (a mount's log line, the CLI's error), once.
            log.info("rejected sync data from %s: %s (kept in %s)", source, exc, kept)
            raise
        self.sync_validated += len(messages)
        return messages

    def parse_sync(self, data: bytes, source: str = "stdin",
                   first_line: int = 1) -> list[sync_protocol.SyncMessage]:
        """Validate sync data without storing it; returns its messages (for ingest_sync's
        ``parsed``, so they are not parsed again)."""
        return self._parse_sync(data, source, first_line)

    def check_sync_unfinished(self, data: bytes | bytearray, source: str, first_line: int = 1,
                              scan: sync_protocol.EnvelopeScan | None = None) -> None:
        """Validate sync data that may still grow, once it is complete JSON (see
        :func:`memfs.sync.protocol.check_unfinished`; ``scan``: an envelope's, from
        :meth:`envelope_scan`, kept while it is written); invalid data is kept and raises SyncError."""
        try:
            sync_protocol.check_unfinished(data, first_line, limits=self.sync_limits, scan=scan)
        except sync_protocol.SyncError as exc:
            kept = self._reject(source, data, exc)
            log.info("rejected sync data from %s: %s (kept in %s)", source, exc, kept)
            raise

    def _reject(self, source: str, data: bytes | bytearray, exc: sync_protocol.SyncError) -> Path:
        """Keep refused sync data with the reason; of data refused for its size, only its head
        (a person needs to see what it was, not to have a disk filled with every attempt)."""
        reason = str(exc)
        if isinstance(exc, sync_protocol.TooLarge) and len(data) > sync_protocol.KEPT_OF_OVERSIZED:
            reason += f" (kept: its first {sync_protocol.KEPT_OF_OVERSIZED:,} of {len(data):,} bytes)"
            data = data[: sync_protocol.KEPT_OF_OVERSIZED]
        return self.sync_store.reject(source, data, reason)

    @staticmethod
    def envelope_scan() -> sync_protocol.EnvelopeScan:
        """What a writer of an envelope keeps from write to write (see EnvelopeScan)."""
        return sync_protocol.EnvelopeScan()

    @staticmethod
    def sync_is_envelope(data: bytes) -> bool:
        """Whether sync data is (the start of) a [CLAWGPT-SYNC] envelope, judged only whole."""
        return sync_protocol.is_envelope_start(data)

    def ingest_sync(self, data: bytes, source: str = "stdin", mode: str | None = None,
                    who: Provenance = BESIDE, parsed: ParsedSync | None = None,
                    defer: bool = False, writing: Callable[[list[str]], None] | None = None) -> IngestResult:
        """Store a ClawGPT sync message (envelope or JSONL lines): validate all of it, drop ids
        already stored anywhere (a shared mode: in the day files it may see), append the rest to
        their date files, index those files.  Invalid input stores nothing, is kept under
        clawgpt-memory/.rejected/ and raises SyncError.  ``parsed``: (messages, bytes, lines) of
        ``data``'s first complete lines, validated already (as the mount validates each write);
        only the rest is parsed here.  ``writing``: told which day files are about to grow,
        before any is written (see SyncStore.ingest)."""
        if parsed is not None:
            done, size, lines = parsed
            messages = done + self._parse_sync(data[size:], source, lines + 1, whole=data)
        else:
            messages = self._parse_sync(data, source)
        privacy = self.privacy(mode)
        try:
            result = self.sync_store.ingest(messages, privacy.is_private if privacy.shared else None, writing)
        except SyncStoreError as exc:
            kept = self.sync_store.reject(source, data, exc.strerror or str(exc))
            log.info("refused sync data from %s: %s (kept in %s)", source, exc.strerror, kept)
            raise sync_protocol.SyncError(exc.strerror or str(exc)) from None
        # A big batch (a year imported at once) lands in hundreds of small day files: each gets
        # its keyword rows now and its exact chunks from the completion worker.
        big = defer and len(data) >= threshold(self.cfg.index.defer_mb)
        if not big:
            self._keep_day_versions(result, who, big)
            self._index_day_files(result, big)
            return result
        # The versions (mostly zlib) are kept in a thread beside the keyword rows (mostly FTS5):
        # both spend their time in C that lets go of the interpreter, so on a second core they
        # overlap.  close() waits for both.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="memfs-sync-versions") as beside:
            keeping = beside.submit(self._keep_day_versions, result, who, big)
            self._index_day_files(result, big)
        keeping.result()
        return result

    def _keep_day_versions(self, result: IngestResult, who: Provenance, big: bool) -> None:
        """A version of each day file a batch grew, each from its appended lines, in one
        transaction of the history (one flush, not one per file)."""
        history = self.history
        if history is None:
            return
        try:
            with history.store.transaction(bulk=big):
                for rel in result.files:
                    if result.grew_from.get(rel) == 0 and rel in result.written:  # made by the batch: its bytes
                        self._after_change(lambda h, rel=rel: h.written(rel, who, *result.written[rel]), rel)
                    else:
                        self._after_change(lambda h, rel=rel: h.changed(rel, who, result.grew_from.get(rel)), rel)
        except HISTORY_FAILURES as exc:
            log.error("history: no versions of the day files were kept (%s); the messages are stored", exc)

    def _index_day_files(self, result: IngestResult, big: bool) -> None:
        """Index the day files a batch grew; a big batch's get keyword rows only (in one
        transaction of the index), the day files it created taken from the bytes it wrote."""
        # A day file is taken from its bytes only when its folder is a folder: through a link,
        # the indexer must judge where the file really is.
        try:
            direct = big and stat.S_ISDIR(os.lstat(self.cfg.workspace / SYNC_DIR).st_mode)
        except OSError:
            direct = False
        # The day files' locks first, then the store's (see PathLocks).
        try:
            with self._indexing.held(*result.files) if big else contextlib.nullcontext(), \
                    self.store.batch() if big else contextlib.nullcontext():
                for rel in result.files:
                    outcome = None
                    if direct and result.grew_from.get(rel) == 0 and rel in result.written:
                        outcome = self.indexer.provisional_written(rel, *result.written[rel])
                    if outcome is None:
                        outcome = self._index_changed(rel, 0 if big else None)
                    if outcome.provisional:
                        result.provisional.append(rel)
        except IndexOffline as exc:  # the batch's transaction was lost: every file of it is owed
            for rel in result.files:
                self._owed(rel, exc)
            result.provisional.clear()

    def append(self, text: str, section: str | None = None, mode: str | None = None,
               now: dt.datetime | None = None, who: Provenance = BESIDE, create_section: bool = False) -> str:
        """Append Markdown to today's daily log (today in bundle.timezone, the day the context
        bundle reads), or to ``section`` of MEMORY.md (which must exist unless ``create_section``),
        and index it; returns the file's path.  Raises AppendError."""
        privacy = self.privacy(mode)
        if section is not None and not section.strip():
            raise notes.AppendError("the section name is empty")
        if section:
            rel = self._long_term_spelling("MEMORY.md")
        else:
            moment = (now or dt.datetime.now(dt.timezone.utc)).astimezone(timezone(self.cfg.bundle.timezone))
            rel = f"memory/{moment.date().isoformat()}.md"
            text = notes.daily_entry(text, moment)
        with self._indexing.held(rel):  # the write and its version as one, for a watcher (file_changed)
            if not privacy.hides(rel):
                self.before_change(rel)
            notes.append(self.cfg.workspace, rel, text, section, privacy, tuple(self.cfg.privacy.shared_writable),
                         create_section)
            self.file_changed(rel, who)
        return rel

    def bundle(self, mode: str, now: dt.datetime | None = None, viewer: str | None = None) -> str:
        """The prompt bundle of ``mode`` (main: everything; shared: without private files), as
        read by ``viewer`` (default: the configured mode; a shared viewer may not read main)."""
        if mode not in BUNDLE_MODES:
            raise UnknownMode(f"unknown context mode {mode!r}: use main or shared")
        if mode == MAIN_MODE and self.privacy(viewer).shared:
            raise NotAllowed("the main context is not available in shared mode: read the shared context")
        privacy = self.privacy(mode)
        settings = self.cfg.bundle
        day = today(timezone(settings.timezone), now)
        names = {"today": day.isoformat(), "yesterday": (day - dt.timedelta(days=1)).isoformat()}
        files = []
        for pattern in settings.files:
            rel = self._long_term_spelling(pattern.format(**names))
            if privacy.hides(rel):
                continue
            bad = 0
            try:
                text: str | None
                text, bad = clean_text(read_visible(self.cfg.workspace, rel, privacy))
            except OSError:
                text = None  # missing, or private for this mode: the same word for both
            kind = classify(rel, self.cfg.index.extra_paths)
            if text is not None and kind.is_jsonl:
                # An agent reads a chat as words under its title, not as JSON keys.
                rendered = messages_as_text(parse_jsonl(text, session=kind is FileKind.SESSION))
                text, escaped = clean_text(rendered.encode("utf-8", "surrogatepass"))  # "\u001b" in JSON
                bad += escaped
            files.append(bundle_render.BundleFile(rel, text, bad, kind.is_jsonl))
        return bundle_render.bundle(mode, day.isoformat(), files, settings.total_tokens, settings.per_file_tokens)

    def _long_term_spelling(self, rel: str) -> str:
        """OpenClaw reads MEMORY.md, or memory.md when that is the one that exists."""
        if rel in LONG_TERM_NAMES and not (self.cfg.workspace / rel).exists():
            for other in LONG_TERM_NAMES:
                if (self.cfg.workspace / other).is_file():
                    return other
        return rel

    def status(self, mode: str | None = None) -> dict[str, object]:
        """What the index holds.  A shared mode counts only what it may see, and is not told what
        moves with private text (the index's size and generation, the embedding cache): watching
        those change would tell when, and roughly how much, MEMORY.md was edited."""
        try:
            info = self._status(mode)
        except IndexOffline as exc:
            self.outage.down(exc)
            info = {"workspace": str(self.cfg.workspace), "agent": self.cfg.agent, "mode": self.privacy(mode).mode,
                    "indexed": True, "provider": self.cfg.embedding.provider, "index_unavailable": str(exc)}
        if owed := self._owed_now(mode):
            info["owed"] = owed
        return info

    def _status(self, mode: str | None) -> dict[str, object]:
        privacy = self.privacy(mode)
        counts = self.store.counts(include_private=not privacy.shared, exclude=self._hidden_now(privacy))
        # As the index records it: status never loads the model (nor calls a server) to say so.
        recorded = self.store.fingerprint or {}
        info: dict[str, object] = {
            "workspace": str(self.cfg.workspace),
            "agent": self.cfg.agent,
            "mode": privacy.mode,
            "indexed": self.store.get_meta("reconciled_at") is not None,
            **{key: n for key, n in counts.items() if not key.startswith("provisional_")},
            **self._progress(counts, include_private=not privacy.shared),
            # Big writes keyword-indexed whose exact chunks are still being made (memfs.index.deferred).
            "provisional": [p for p in self.store.provisional_paths(include_private=not privacy.shared)
                            if not privacy.hides(p)],
            "provider": self.cfg.embedding.provider,
            "reading": reading_words(str(recorded.get("readings", "whole"))),
            "model": recorded.get("model", ""),
            "dims": recorded.get("dims", 0),
            "provider_error": self.provider_error,
            "generation": self.store.generation,
            "index_path": self.store.location,  # the file, or the server (no password) and tenant
            "index_bytes": self.store.size_bytes(),
            "problems": [{"path": path, "not_indexed": error, "warning": warning}
                         for path, (error, warning) in sorted(self.problems(privacy).items())],
        }
        if kept := kept_reading(recorded, reading_mode(self.cfg, self.cfg.embedding.provider)):
            info["reading_wanted"] = reading_words(kept)  # until `memfs index --rebuild`
        if self.cfg.embedding.provider == "local" and self.cfg.embedding.service:
            from memfs.index.embedclient import service_record

            info["embedding_service"] = service_record(self.cfg.embedding)
        if self.history is not None and not privacy.shared:
            # Not for a shared view: the history grows when MEMORY.md is edited.
            info.update(self.history.status())
        if privacy.shared:
            for key in ("generation", "index_path", "index_bytes", "cached_embeddings"):
                info.pop(key)
        return info

    def _progress(self, counts: dict[str, int], include_private: bool) -> dict[str, object]:
        """How far embedding has got: the rate, the time left, whether a process embeds now.
        ``passages`` is every passage to embed, those the big writes still being chunked will
        make among them (``pending_estimated``, an estimate); a provisional chunk is none
        (keyword rows, never embedded, replaced by those): embedded passages plus ``pending``
        plus ``pending_estimated`` make ``passages``, so a share of it does not fall back when the
        exact chunks arrive (unless they are more than estimated)."""
        provisional = counts.get("provisional_chunks", 0)
        coming = (still_to_chunk(counts.get("provisional_lines", 0), counts.get("provisional_jsonl_lines", 0))
                  if self.store.has_vectors else 0)
        backlog = self.backlog(counts["pending"] + coming, include_private).as_dict()
        backlog.pop("pending")
        return {**backlog, "pending_estimated": coming,
                "passages": counts["chunks"] - provisional + counts["units"] + coming}

    def problems(self, privacy: Privacy) -> dict[str, tuple[str, str]]:
        """Files not indexed (why) or not all text (what), that ``privacy`` may know of: for a
        shared view, only files it would list (not a symlink to a private file or out of the
        workspace, nor a file with several names), judged as its mount judges them."""
        found = {path: problem for path, problem in self.store.problem_files().items() if not privacy.hides(path)}
        if privacy.shared:
            found = {path: problem for path, problem in found.items() if self._listed(privacy, path)}
        return found

    def _listed(self, privacy: Privacy, rel: str) -> bool:
        try:
            st = longpath.lstat(self.cfg.workspace / rel)
        except OSError:
            return False
        return not privacy.hides_entry(self.cfg.workspace, rel, st)

    def _file_warnings(self, results: list, privacy: Privacy) -> list[str]:
        """What a reader of these results must know: a cited file holds bytes that are not text;
        memory files are not searched at all (too large)."""
        problems = self.problems(privacy)
        notes = [f"{path}: {problems[path][1]}" for path in dict.fromkeys(r.path for r in results)
                 if path in problems and problems[path][1]]
        skipped = sorted(p for p, (error, _) in problems.items() if "index.max_file_mb" in error)
        if skipped:
            named = ", ".join(skipped[:3]) + (f" and {len(skipped) - 3} more" if len(skipped) > 3 else "")
            notes.append(f"{len(skipped)} memory file{'s are' if len(skipped) > 1 else ' is'} not searched, larger "
                         f"than index.max_file_mb ({self.cfg.index.max_file_mb:g} MB): {named}")
        return notes

    def _hidden_now(self, privacy: Privacy) -> frozenset[str]:
        """Public-part paths that are private by the current settings (indexed before they became
        private; the next reconcile moves them)."""
        if not privacy.shared:
            return frozenset()
        return privacy.hidden_among(self.store.public_paths())

    def stop(self) -> None:
        """A warm process is stopping: start no further embedding batch (the one in progress
        finishes, and close() waits for it); what is pending stays recorded for the next start."""
        self._stopping.set()

    def settle(self) -> None:
        """Wait for the embedding batch in progress (a stopping process abandons the thread that
        runs it, and its vectors are stored before the store is closed)."""
        with self._embed_lock:
            pass

    def close(self) -> None:
        self._stopping.set()
        self.outage.stop()
        self.settle()
        self._query_pool.shutdown(wait=True)
        self.store.close()
        if self._history is not None:
            self._history.close()
        self._using.close()
