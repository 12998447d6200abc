"""What one Memory opens and keeps: the (workspace, agent) index's store, its indexer, the sync
store and the version store, the embedding provider; and the index's lifecycle: opened (its
schema upgraded when alone), checked against the settings and the workspace it was made for,
rebuilt (beside the old file, then swapped in), kept in step with the files (reconcile, the
backlog of embeddings), caught up after its server was away, stopped and closed.  The services
beside this module (search, get, sync, bundle, status, changes) each hold the Engine.
"""

from __future__ import annotations

import fcntl
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memfs.config import SHARED_MODE, BundleConfig, Config, PrivacyConfig
from memfs.history.keeper import (
    History,
)
from memfs.history.store import FAILURES as HISTORY_FAILURES
from memfs.index.bigwrites import PathLocks
from memfs.index.embedding.backlog import Backlog
from memfs.index.embedding.backlog import read as read_backlog
from memfs.index.embedding.choice import make_provider
from memfs.index.embedding.fingerprint import (
    fingerprint,
    fingerprint_change,
    serves,
)
from memfs.index.embedding.providers import EmbeddingError, NoProvider, Provider, provider_identity
from memfs.index.embedding.turns import EmbedTurns
from memfs.index.indexer import Indexer, Outcome, Progress, replace_index_file
from memfs.index.storage.backend import IndexUnavailable, open_store
from memfs.index.storage.interface import IndexOffline, IndexStore
from memfs.index.storage.outage import Outage
from memfs.index.storage.sqlite.store import Store
from memfs.privacy import Privacy
from memfs.state import StatePaths, WorkspaceIdentity, locate
from memfs.sync.store import SyncStore
from memfs.userdirs import private_opener
from memfs.workspace import (
    LONG_TERM_NAMES,
    iter_memory_files,
    timezone,
)

log = logging.getLogger(__name__)
# Once the backlog is embedded (the mount idle), the index's write-ahead log is emptied when it
# holds more than this: a small workspace's WAL otherwise kept up to journal_size_limit (4 MB)
# beside an index of a few MB for as long as the mount ran.  Not after every write: a checkpoint
# writes the log's pages into the index and syncs it, which a burst of small files need not wait on.
IDLE_WAL = 256 << 10


class IndexBusy(RuntimeError):
    """The index cannot be opened or replaced now: another process uses it, or (PostgreSQL) its
    server cannot be reached or refuses this login; the message says which, in one line."""


def _try_lock(held: object, kind: int) -> bool:
    """``kind`` of flock on ``held`` if nobody's lock is in the way now."""
    try:
        fcntl.flock(held, kind | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


class Engine:
    """The index of one (workspace, agent) and what keeps it: see the module's docstring."""

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
        self._history: History | None = None
        self._history_lock = threading.Lock()
        self._indexing = PathLocks()  # a close() and the completion worker never index one file at once
        # Whether this process makes the exact chunks of files indexed provisionally (a mount's
        # completion worker): only then may its searches make a few themselves.  Its path locks
        # keep a completion from storing an older version than a close stored meanwhile; another
        # process's would not (set by Memory.complete_here).
        self.completes_here = False
        self.sync_validated = 0  # sync messages validated by this process (the mount shows it)
        self.paths: StatePaths = locate(cfg)
        # Every process using this index holds a shared lock on it; replacing the file (a
        # rebuild) takes it exclusively, so no running mount ever has its index swapped away.
        # (An index on PostgreSQL is another index than the SQLite file of the same name: its own lock.)
        held = str(self.paths.index) + (".pg" if cfg.index.backend == "postgres" else "")
        self._setup = held + ".setup"
        self._using = open(held + ".lock", "a", opener=private_opener)
        with open(self._setup, "a", opener=private_opener) as setup:
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
        """The index's server answers again (:mod:`memfs.index.storage.outage`): the checks a start
        while it was away put off, then the index reconciled with the files."""
        if self._unchecked:
            with open(self._setup, "a", opener=private_opener) as setup:
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
        # The new index takes the old one's vectors of every text it still holds, read the same
        # way (an index of an earlier layout is converted so: nothing is embedded again).
        old = self.store if isinstance(self.store, Store) and not self.store.outdated else None
        fresh.donor = old
        ident = self._identity()
        fresh.set_fingerprint(fingerprint(self.cfg, ident), ident[2])
        fresh.set_meta("workspace", self.paths.identity.as_json())
        builder = Indexer(self.cfg, fresh, self.indexer.provider_source, self._identity)
        outcomes = builder.reconcile(progress)
        try:
            builder.embed_pending()
        except EmbeddingError as exc:
            log.warning("rebuild: embedding failed, chunks stay keyword-only: %s", exc)
        fresh.donor = None
        if old is not None:
            fresh.take_over(old)
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
            outcomes = self.indexer.reconcile(progress, hold=self._indexing.held)
            self._checkpoint()  # an import's or a catch-up's write-ahead log, folded in
            return outcomes
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

    def reconcile_index(self) -> list[Outcome]:
        """The index (not the history) in step with the files, beside writes being indexed: a
        mount's privacy change, and the catch-up after the index's server was away (see
        :mod:`memfs.index.storage.outage`); writes indexed meanwhile are not undone (each path's lock)."""
        return self.indexer.reconcile(hold=self._indexing.held)

    def embed_pending(self, limit: int | None = None, progress: Progress | None = None) -> int:
        """Embed chunks still without a vector; a provider failure is logged, not raised."""
        if not self.indexer.embeds or self._stopping.is_set():
            return 0
        with self._embed_lock:
            if self._stopping.is_set():  # stopped while this thread waited: the store may be closing
                return 0
            try:
                done = self.indexer.embed_pending(limit=limit, progress=progress, stop=self._stopping)
                if done and not self.store.has_pending():
                    self._checkpoint(IDLE_WAL)  # the backlog is embedded: its write-ahead log folded in
                return done
            except IndexOffline as exc:
                self.outage.down(exc)  # its catch-up embeds what is left
                return 0
            except EmbeddingError as exc:
                self.provider_error = str(exc)
                log.warning("embedding failed, new chunks stay keyword-only for now: %s", exc)
                return 0

    def _checkpoint(self, over: int | None = None) -> None:
        """The store's write-ahead logs emptied if a big write left them larger than ``over``
        bytes (the store's journal_size_limit by default; SQLite's, PostgreSQL keeps its own)."""
        checkpoint = getattr(self.store, "checkpoint", None)
        if checkpoint is not None:
            try:
                checkpoint() if over is None else checkpoint(over=over)
            except Exception as exc:  # never fails what it follows: the next one does it
                log.info("index %s: write-ahead log not emptied now: %s", self.paths.index, exc)

    def embed_fresh(self, limit: int, budget_s: float) -> int:
        """Embed up to ``limit`` of the passages waiting, the freshest first (as the background
        embedder orders them), within about ``budget_s``: a search that finds a note just
        written (or a mount's first seconds) still waiting answers by its meaning, not by keyword
        alone.  Waits for the embedding in progress (this process's, another's turn) at most
        the budget, and stops between model calls once it is spent; never raises."""
        if not self.indexer.embeds or self._stopping.is_set() or budget_s <= 0:
            return 0
        deadline = time.monotonic() + budget_s
        if not self._embed_lock.acquire(timeout=budget_s):
            return 0
        spent = threading.Event()
        timer = threading.Timer(max(0.0, deadline - time.monotonic()), spent.set)
        timer.start()
        try:
            return self.indexer.embed_pending(limit=limit, stop=spent)
        except IndexOffline as exc:
            self.outage.down(exc)
            return 0
        except EmbeddingError as exc:
            self.provider_error = str(exc)
            return 0
        finally:
            timer.cancel()
            self._embed_lock.release()

    def warm(self) -> None:
        """Load the embedding model now (a mount or daemon starting), so the first search and the
        first write do not wait for it; a failure is what the provider says later."""
        if self.cfg.embedding.provider == "none":
            return
        try:
            self.provider.embed(["memfs"])
        except EmbeddingError as exc:
            log.info("the embedding model could not be loaded at start (%s)", exc)

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

    def _owed_now(self, mode: str | None) -> list[str]:
        """The files whose indexing waits for the index's server, that ``mode`` may know of."""
        if not self.outage.active:
            return []
        privacy = self.privacy(mode)
        return sorted(p for p in self.outage.owed if not privacy.hides(p))

    def backlog(self, pending: int | None = None, include_private: bool = True) -> Backlog:
        """What waits for vectors, at the embedding rate last measured (by any process);
        ``include_private``: measured over every batch (the main mode's view), else over those
        without private text (what a shared reader may be told)."""
        return read_backlog(self.store, self.store.pending_count() if pending is None else pending, include_private)

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

    def _owed(self, rel: str, exc: IndexOffline) -> Outcome:
        """``rel`` changed while the index's server is away: the change stands, its indexing is owed."""
        self.outage.down(exc, rel)
        return Outcome(rel, "owed", reason=str(exc))

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

    def _index_changed(self, rel: str, defer_over: int | None = None) -> Outcome:
        with self._indexing.held(rel):
            try:
                outcome = self.indexer.index_file(rel, defer_over=defer_over)
            except IndexOffline as exc:
                return self._owed(rel, exc)
        if outcome.action == "skipped" and outcome.reason:
            log.warning("not indexed: %s: %s", outcome.path, outcome.reason)  # printable, whatever the name
        return outcome

    def _long_term_spelling(self, rel: str) -> str:
        """OpenClaw reads MEMORY.md, or memory.md when that is the one that exists."""
        if rel in LONG_TERM_NAMES and not (self.cfg.workspace / rel).exists():
            for other in LONG_TERM_NAMES:
                if (self.cfg.workspace / other).is_file():
                    return other
        return rel

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
