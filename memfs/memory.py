"""``Memory``: the one façade every front end (CLI, FUSE, daemon, MCP, watcher) calls.

It routes, it does not compute: one (workspace, agent) index and what keeps it live in an
:class:`~memfs.services.lifecycle.Engine`, and each answer in a module of its own behind it
(:mod:`memfs.services`): search, get, sync ingest, the context bundle, status, and the changes
front ends report.  Reads take a mode: ``main`` sees everything, any other mode is shared and
never sees a private path (see :mod:`memfs.privacy`).  Nothing here knows about FUSE or click.
The names front ends need (errors, options, provenance) are taken from here, so no front end
imports the index.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from memfs.config import BundleConfig, Config, PrivacyConfig
from memfs.history.keeper import History, NoSuchVersion  # noqa: F401
from memfs.history.provenance import BESIDE, CLI, MCP, MOUNT, Provenance  # noqa: F401
from memfs.history.store import Forgotten, HistoryError, Version  # noqa: F401
from memfs.index.embedding.backlog import Backlog
from memfs.index.embedding.providers import Provider
from memfs.index.indexer import Indexer, Outcome, Progress  # noqa: F401
from memfs.index.search.agents import NotReadable  # noqa: F401
from memfs.index.search.hybrid import BadOption, SearchOptions, SearchResponse, parse_options  # noqa: F401
from memfs.index.storage.interface import IndexOffline, IndexStore  # noqa: F401
from memfs.index.storage.outage import Outage
from memfs.indexmove import IndexInUse, MoveRefused, move_index  # noqa: F401
from memfs.notes import AppendError  # noqa: F401
from memfs.privacy import Privacy
from memfs.services.bundling import BUNDLE_MODES, Bundler, NotAllowed, UnknownMode  # noqa: F401
from memfs.services.changes import Changes
from memfs.services.lifecycle import Engine, IndexBusy  # noqa: F401
from memfs.services.reading import GetError, GetResult, Reader  # noqa: F401
from memfs.services.reporting import Reporter
from memfs.services.searching import Searcher
from memfs.services.syncing import ParsedSync, SyncError, SyncIngest  # noqa: F401
from memfs.state import StatePaths
from memfs.sync.protocol import EnvelopeScan, Limits, SyncMessage
from memfs.sync.store import IngestResult
from memfs.versions import Versions, VersionsError  # noqa: F401


class Memory:
    def __init__(self, cfg: Config, provider: Provider | None = None, offline_start: bool = False) -> None:
        """``offline_start`` (a mount): an index whose server cannot be reached now does not stop
        it: the files are served and written, reads say the index is unavailable, and the index's
        checks run when the server answers (see Engine)."""
        self.engine = Engine(cfg, provider, offline_start)
        self.searcher = Searcher(self.engine)
        self.reader = Reader(self.engine)
        self.changes = Changes(self.engine)
        self.syncing = SyncIngest(self.engine)
        self.bundler = Bundler(self.engine)
        self.reporter = Reporter(self.engine)

    # -- what front ends read of the engine -----------------------------------------------------

    @property
    def cfg(self) -> Config:
        return self.engine.cfg

    @property
    def paths(self) -> StatePaths:
        return self.engine.paths

    @property
    def store(self) -> IndexStore:
        return self.engine.store  # replaced by a rebuild: always the engine's current one

    @property
    def indexer(self) -> Indexer:
        return self.engine.indexer

    @property
    def outage(self) -> Outage:
        return self.engine.outage

    @property
    def history(self) -> History | None:
        return self.engine.history

    @property
    def provider(self) -> Provider:
        return self.engine.provider

    @property
    def provider_error(self) -> str:
        return self.engine.provider_error

    @property
    def started(self) -> float:
        return self.engine.started

    @property
    def sync_validated(self) -> int:
        """Sync messages validated by this process (the mount shows it)."""
        return self.engine.sync_validated

    @property
    def sync_limits(self) -> Limits:
        """The bounds on sync input (sync.max_message_kb, sync.max_envelope_mb)."""
        return self.syncing.limits

    @property
    def pending(self) -> int:
        return self.engine.pending

    @property
    def has_pending(self) -> bool:
        """Whether anything waits for its vector (:attr:`pending` without counting it)."""
        return self.engine.has_pending

    def privacy(self, mode: str | None = None) -> Privacy:
        """What ``mode`` (default: the configured one) may see."""
        return self.engine.privacy(mode)

    # -- settings that follow a running mount's .memfs.toml -------------------------------------

    def set_privacy(self, settings: PrivacyConfig) -> None:
        self.engine.set_privacy(settings)

    def set_bundle(self, settings: BundleConfig) -> None:
        self.engine.set_bundle(settings)

    # -- the index's lifecycle (memfs.services.lifecycle) ----------------------------------------

    def index(self, progress: Progress | None = None, embed_progress: Progress | None = None) -> list[Outcome]:
        """Reconcile the index with the workspace files and embed what is missing."""
        return self.engine.index(progress, embed_progress)

    def reconcile(self, progress: Progress | None = None) -> list[Outcome]:
        """Bring the index and the history in step with the files (changes made while nothing watched)."""
        return self.engine.reconcile(progress)

    def reconcile_index(self) -> list[Outcome]:
        """The index (not the history) in step with the files, beside writes being indexed."""
        return self.engine.reconcile_index()

    def rebuild(self, progress: Progress | None = None) -> list[Outcome]:
        """Build a fresh index beside the old one, then swap it in (IndexBusy while another process uses it)."""
        return self.engine.rebuild(progress)

    def embed_pending(self, limit: int | None = None, progress: Progress | None = None) -> int:
        """Embed chunks still without a vector; a provider failure is logged, not raised."""
        return self.engine.embed_pending(limit, progress)

    def pending_told(self, mode: str | None = None) -> int:
        """:attr:`pending` as ``mode``'s reader may be told it (a shared mode: public passages only)."""
        return self.engine.pending_told(mode)

    def backlog(self, pending: int | None = None, include_private: bool = True) -> Backlog:
        """What waits for vectors, at the embedding rate last measured (by any process)."""
        return self.engine.backlog(pending, include_private)

    def warm(self) -> None:
        """Load the embedding model now (a mount or daemon starting)."""
        self.engine.warm()

    def stop(self) -> None:
        """A warm process is stopping: no further embedding batch starts."""
        self.engine.stop()

    def settle(self) -> None:
        """Wait for the embedding batch in progress."""
        self.engine.settle()

    def close(self) -> None:
        self.engine.close()

    # -- changes front ends report (memfs.services.changes) -------------------------------------

    def before_change(self, rel: str) -> None:
        """``rel`` is about to be changed: whatever it holds now is kept first."""
        self.changes.before_change(rel)

    def file_changed(self, rel: str, who: Provenance = BESIDE, appended_from: int | None = None,
                     defer: bool = False, burst: bool = False) -> Outcome:
        """A file was written by ``who``: its new content is kept as a version, then indexed."""
        return self.changes.file_changed(rel, who, appended_from, defer, burst)

    def complete(self, rel: str) -> Outcome | None:
        """The exact chunks of a file indexed provisionally (None if it is not any more)."""
        return self.changes.complete(rel)

    def complete_here(self) -> None:
        """This process (a mount) makes the exact chunks of files indexed provisionally, so its
        searches may make a few themselves (see services/searching.py)."""
        self.engine.completes_here = True

    def provisional_paths(self) -> list[str]:
        """Files whose exact chunks are still owed (see :mod:`memfs.index.bigwrites`)."""
        return self.changes.provisional_paths()

    def file_removed(self, rel: str) -> bool:
        return self.changes.file_removed(rel)

    def file_moved(self, old: str, new: str) -> Outcome:
        return self.changes.file_moved(old, new)

    def path_removed(self, rel: str, who: Provenance = BESIDE) -> int:
        """A file or a whole directory is gone: its indexed files dropped, its versions kept."""
        return self.changes.path_removed(rel, who)

    def path_moved(self, old: str, new: str, who: Provenance = BESIDE) -> list[Outcome]:
        """A file or directory was renamed: indexed files move along, arrivals are indexed."""
        return self.changes.path_moved(old, new, who)

    def append(self, text: str, section: str | None = None, mode: str | None = None,
               now: dt.datetime | None = None, who: Provenance = BESIDE, create_section: bool = False) -> str:
        """Append Markdown to today's daily log, or to ``section`` of MEMORY.md; returns its path."""
        return self.changes.append(text, section, mode, now, who, create_section)

    def versions(self, mode: str | None = None) -> Versions:
        """The history as ``mode`` may see it (see :mod:`memfs.versions`)."""
        return self.changes.versions(mode)

    # -- answers ---------------------------------------------------------------------------------

    def search(self, query: str, max_results: int | None = None, min_score: float | None = None,
               wait_ms: int | None = None, mode: str | None = None, options: SearchOptions | None = None,
               agents: tuple[str, ...] = ()) -> SearchResponse:
        """Search the memory (see :mod:`memfs.services.searching`)."""
        return self.searcher.search(query, max_results, min_score, wait_ms, mode, options, agents)

    def get(self, path: str, from_line: int = 1, lines: int | None = None, mode: str | None = None,
            messages: bool = False) -> GetResult:
        """Read part of a workspace file, bounded, saying where to continue (see :mod:`memfs.services.reading`)."""
        return self.reader.get(path, from_line, lines, mode, messages)

    def bundle(self, mode: str, now: dt.datetime | None = None, viewer: str | None = None) -> str:
        """The prompt bundle of ``mode`` as read by ``viewer`` (see :mod:`memfs.services.bundling`)."""
        return self.bundler.bundle(mode, now, viewer)

    def status(self, mode: str | None = None) -> dict[str, object]:
        """What the index holds, as ``mode`` may be told it (see :mod:`memfs.services.reporting`)."""
        return self.reporter.status(mode)

    # -- ClawGPT sync (memfs.services.syncing) ---------------------------------------------------

    def parse_sync(self, data: bytes, source: str = "stdin", first_line: int = 1) -> list[SyncMessage]:
        """Validate sync data without storing it; returns its messages."""
        return self.syncing.parse_sync(data, source, first_line)

    def check_sync_unfinished(self, data: bytes | bytearray, source: str, first_line: int = 1,
                              scan: EnvelopeScan | None = None) -> None:
        """Validate sync data that may still grow, once it is complete JSON (``scan``: an
        envelope's, from :meth:`envelope_scan`, kept while it is written)."""
        self.syncing.check_sync_unfinished(data, source, first_line, scan)

    @staticmethod
    def envelope_scan() -> EnvelopeScan:
        """What a writer of an envelope keeps from write to write."""
        return SyncIngest.envelope_scan()

    @staticmethod
    def sync_is_envelope(data: bytes) -> bool:
        """Whether sync data is (the start of) a [CLAWGPT-SYNC] envelope."""
        return SyncIngest.sync_is_envelope(data)

    def ingest_sync(self, data: bytes, source: str = "stdin", mode: str | None = None,
                    who: Provenance = BESIDE, parsed: ParsedSync | None = None,
                    defer: bool = False, writing: Callable[[list[str]], None] | None = None) -> IngestResult:
        """Store a ClawGPT sync message: validated, deduplicated, appended to its day files, indexed."""
        return self.syncing.ingest_sync(data, source, mode, who, parsed, defer, writing)
