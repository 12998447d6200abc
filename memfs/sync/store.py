"""Storing sync messages: each id once across every date file, each message in the file of its own
timestamp's date, appended as one canonical line; existing lines are never touched.

The id index is rebuilt from the files whenever they changed since it was built (files are the
truth).  An exclusive lock on ``clawgpt-memory/.lock`` serialises writers across processes (the
mount, `memfs sync`, several at once), so concurrent overlapping batches still store each id once.
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from memfs.sync.protocol import SyncMessage
from memfs.workspace import SYNC_DIR

log = logging.getLogger(__name__)
REJECTED_DIR = ".rejected"


@dataclass
class IngestResult:
    stored: int = 0
    duplicates: int = 0
    files: list[str] = field(default_factory=list)  # workspace-relative date files that grew


def _signature(folder: Path) -> tuple[tuple[str, int, int], ...]:
    entries = []
    for path in sorted(folder.glob("*.jsonl")):
        try:
            st = path.stat()
        except FileNotFoundError:
            continue
        entries.append((path.name, st.st_size, st.st_mtime_ns))
    return tuple(entries)


class SyncStore:
    def __init__(self, workspace: Path, tz: dt.tzinfo) -> None:
        self.folder = workspace / SYNC_DIR
        self.tz = tz
        self._ids: set[str] | None = None
        self._seen: tuple[tuple[str, int, int], ...] = ()
        self._lock = threading.Lock()

    def _load_ids(self) -> set[str]:
        signature = _signature(self.folder)
        if self._ids is None or signature != self._seen:
            ids: set[str] = set()
            for path in sorted(self.folder.glob("*.jsonl")):
                for raw in path.read_text(encoding="utf-8", errors="replace").split("\n"):
                    try:
                        record = json.loads(raw)
                    except ValueError:
                        continue
                    if isinstance(record, dict) and isinstance(record.get("id"), str):
                        ids.add(record["id"])
            self._ids, self._seen = ids, signature
        return self._ids

    def date_file(self, message: SyncMessage) -> str:
        day = dt.datetime.fromtimestamp(message.timestamp / 1000, dt.timezone.utc).astimezone(self.tz).date()
        return f"{SYNC_DIR}/{day.isoformat()}.jsonl"

    def ingest(self, messages: list[SyncMessage]) -> IngestResult:
        result = IngestResult()
        self.folder.mkdir(parents=True, exist_ok=True)
        with self._lock, open(self.folder / ".lock", "a") as lock_file:
            fcntl.flock(lock_file, fcntl.LOCK_EX)
            try:
                ids = self._load_ids()
                batches: dict[str, list[str]] = {}
                fresh: set[str] = set()
                for message in messages:
                    if message.id in ids or message.id in fresh:
                        result.duplicates += 1
                        continue
                    fresh.add(message.id)
                    batches.setdefault(self.date_file(message), []).append(message.canonical())
                for rel, lines in sorted(batches.items()):
                    self._append(self.folder.parent / rel, lines)
                    result.files.append(rel)
                    result.stored += len(lines)
                ids |= fresh
                self._seen = _signature(self.folder)
            finally:
                fcntl.flock(lock_file, fcntl.LOCK_UN)
        return result

    @staticmethod
    def _append(path: Path, lines: list[str]) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            size = os.fstat(fd).st_size
            prefix = b""
            if size:
                with open(path, "rb") as existing:
                    existing.seek(size - 1)
                    if existing.read(1) != b"\n":
                        prefix = b"\n"  # never glue our line onto a line someone left unfinished
            os.write(fd, prefix + ("\n".join(lines) + "\n").encode("utf-8"))
            os.fsync(fd)
        finally:
            os.close(fd)

    def reject(self, name: str, data: bytes, reason: str) -> Path:
        """Keep refused bytes with the reason beside them, for a person to look at."""
        folder = self.folder / REJECTED_DIR
        folder.mkdir(parents=True, exist_ok=True)
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        base = folder / f"{stamp}-{os.getpid()}-{time.monotonic_ns() % 10**9}-{Path(name).name or 'stdin'}"
        base.write_bytes(data)
        Path(str(base) + ".reason").write_text(reason + "\n", encoding="utf-8")
        return base
