"""ClawGPT sync data into the workspace: validated (invalid data kept under
``clawgpt-memory/.rejected/`` with the reason), deduplicated by message id, appended to its day
files, and those indexed (a big batch: keyword rows first, its versions kept beside them).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from memfs.history.provenance import BESIDE, Provenance
from memfs.history.store import FAILURES as HISTORY_FAILURES
from memfs.index.bigwrites import threshold
from memfs.index.storage.interface import IndexOffline
from memfs.services.lifecycle import Engine
from memfs.sync import protocol as sync_protocol
from memfs.sync.store import IngestResult, SyncStoreError
from memfs.workspace import (
    SYNC_DIR,
)

log = logging.getLogger(__name__)

SyncError = sync_protocol.SyncError  # what ingest_sync raises, for front ends that must not import sync/
# Sync data validated already: (its messages, how many bytes and how many lines they came from).
ParsedSync = tuple[list[sync_protocol.SyncMessage], int, int]


class SyncIngest:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        sync = engine.cfg.sync
        self.limits = sync_protocol.Limits(sync.max_message_kb * 1024, int(sync.max_envelope_mb * 1024 * 1024))

    def _parse_sync(self, data: bytes, source: str, first_line: int = 1,
                    whole: bytes | None = None) -> list[sync_protocol.SyncMessage]:
        """Validated messages; invalid data (``whole``, if ``data`` is the end of it) is kept
        under clawgpt-memory/.rejected/ with the reason, and raises SyncError."""
        try:
            messages = sync_protocol.parse(data, first_line, limits=self.limits)
        except sync_protocol.SyncError as exc:
            kept = self._reject(source, data if whole is None else whole, exc)
            # INFO: the front end reports it (a mount's log line, the CLI's error), once.
            log.info("rejected sync data from %s: %s (kept in %s)", source, exc, kept)
            raise
        self.engine.sync_validated += len(messages)
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
            sync_protocol.check_unfinished(data, first_line, limits=self.limits, scan=scan)
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
        return self.engine.sync_store.reject(source, data, reason)

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
        privacy = self.engine.privacy(mode)
        try:
            result = self.engine.sync_store.ingest(messages, privacy.is_private if privacy.shared else None, writing)
        except SyncStoreError as exc:
            kept = self.engine.sync_store.reject(source, data, exc.strerror or str(exc))
            log.info("refused sync data from %s: %s (kept in %s)", source, exc.strerror, kept)
            raise sync_protocol.SyncError(exc.strerror or str(exc)) from None
        # A big batch (a year imported at once) lands in hundreds of small day files: each gets
        # its keyword rows now and its exact chunks from the completion worker.
        big = defer and len(data) >= threshold(self.engine.cfg.index.defer_mb)
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
        history = self.engine.history
        if history is None:
            return
        try:
            with history.store.transaction(bulk=big):
                for rel in result.files:
                    if result.grew_from.get(rel) == 0 and rel in result.written:  # made by the batch: its bytes
                        self.engine._after_change(lambda h, rel=rel: h.written(rel, who, *result.written[rel]), rel)
                    else:
                        self.engine._after_change(lambda h, rel=rel: h.changed(rel, who, result.grew_from.get(rel)), rel)
        except HISTORY_FAILURES as exc:
            log.error("history: no versions of the day files were kept (%s); the messages are stored", exc)

    def _index_day_files(self, result: IngestResult, big: bool) -> None:
        """Index the day files a batch grew; a big batch's get keyword rows only (in one
        transaction of the index), the day files it created taken from the bytes it wrote."""
        # A day file is taken from its bytes only when its folder is a folder: through a link,
        # the indexer must judge where the file really is.
        try:
            direct = big and stat.S_ISDIR(os.lstat(self.engine.cfg.workspace / SYNC_DIR).st_mode)
        except OSError:
            direct = False
        # The day files' locks first, then the store's (see PathLocks).
        try:
            with self.engine._indexing.held(*result.files) if big else contextlib.nullcontext(), \
                    self.engine.store.batch() if big else contextlib.nullcontext():
                for rel in result.files:
                    outcome = None
                    if direct and result.grew_from.get(rel) == 0 and rel in result.written:
                        outcome = self.engine.indexer.provisional_written(rel, *result.written[rel])
                    if outcome is None:
                        outcome = self.engine._index_changed(rel, 0 if big else None)
                    if outcome.provisional:
                        result.provisional.append(rel)
        except IndexOffline as exc:  # the batch's transaction was lost: every file of it is owed
            for rel in result.files:
                self.engine._owed(rel, exc)
            result.provisional.clear()
