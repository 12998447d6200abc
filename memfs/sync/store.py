"""Storing sync messages: each id once across every date file, each message in the file of its own
timestamp's date, appended as one canonical line; existing lines are never touched.

The id index is rebuilt from the files whenever they changed since it was built (files are the
truth).  An exclusive lock on the ``clawgpt-memory/`` folder itself (flock on its descriptor)
serialises writers across processes (the mount, `memfs sync`, several at once), so concurrent
overlapping batches still store each id once; no lock file is left in the workspace, where
``git add -A`` and every file tool would see it.

Only regular files are read or appended to, never through a symlink: a day file that is a link
(say, to MEMORY.md) would otherwise let whoever can write a sync message write into its target.

With the index on PostgreSQL, the hosts of one tenant (two hosts mounting one workspace, or each
its own copy of it) also share the ids: :class:`IdClaims` (the tenant's ``sync_messages`` rows)
is asked before anything is written, so a message stored through one host is a duplicate through
another even when that host's files do not hold it (yet), and two hosts storing one message at
once store it once.  The claims commit when the day files are written, and are dropped when they
are not.  The ids the files hold are recorded there too as they are met, so messages stored
before the index moved to PostgreSQL count as well.
"""

from __future__ import annotations

import ctypes
import datetime as dt
import errno
import fcntl
import json
import logging
import os
import stat
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

import orjson

from memfs.sync.protocol import SyncMessage, joined_lines
from memfs.workspace import SYNC_DIR

log = logging.getLogger(__name__)
REJECTED_DIR = ".rejected"


OLD_LOCK_FILE = ".lock"  # where versions before 2026-11-25 locked; removed when found empty


def _drop_old_lock_file(folder: Path) -> None:
    try:
        if (folder / OLD_LOCK_FILE).lstat().st_size == 0:
            (folder / OLD_LOCK_FILE).unlink()
    except OSError:
        pass


@dataclass
class IngestResult:
    stored: int = 0
    duplicates: int = 0
    files: list[str] = field(default_factory=list)  # workspace-relative date files that grew
    grew_from: dict[str, int] = field(default_factory=dict)  # each of them: its size before
    # each of them: the bytes appended and its stat right after (Memory indexes a day file the
    # batch created from these bytes instead of reading it back)
    written: dict[str, tuple[bytes, os.stat_result]] = field(default_factory=dict)
    provisional: list[str] = field(default_factory=list)  # of them, those indexed provisionally (Memory)


class IdClaims(Protocol):
    """Sync message ids shared by the hosts of one tenant (see the module's docstring)."""

    def __call__(self, fresh: dict[str, str], known: dict[str, str],
                 shared: bool) -> AbstractContextManager[set[str] | None]:
        """Claim the ``fresh`` ids (id -> the day file it goes to) and record the ``known`` ones
        (held by the files already); yields the fresh ids some host stored already (for a
        ``shared`` writer: only those it may know of), or None when nothing could be claimed
        (the server did not answer).  The claims hold once the block ends without an error."""
        ...


class SyncStoreError(OSError):
    """A day file that cannot safely be written (a symlink, a folder, ...)."""


_libc = ctypes.CDLL(None, use_errno=True)


def _sync_all(fd: int) -> None:
    """Flush the file system holding ``fd`` (Linux syncfs: every day file just written, in one
    call); elsewhere, everything (sync)."""
    syncfs = getattr(_libc, "syncfs", None)
    if syncfs is None or syncfs(fd) != 0:
        os.sync()


def _day_files(folder: Path) -> list[tuple[Path, os.stat_result]]:
    """The regular ``*.jsonl`` files of the folder (symlinks and the like are not ours)."""
    found = []
    for path in sorted(folder.glob("*.jsonl")):
        try:
            st = os.lstat(path)
        except FileNotFoundError:
            continue
        if stat.S_ISREG(st.st_mode):
            found.append((path, st))
    return found


def _signature(folder: Path, hidden: Callable[[str], bool] | None = None) -> tuple[tuple[str, int, int], ...]:
    return tuple((path.name, st.st_size, st.st_mtime_ns) for path, st in _day_files(folder)
                 if hidden is None or not hidden(f"{SYNC_DIR}/{path.name}"))


SPANS_KEPT = 4096  # days whose span is kept (about 11 years of history)
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
_MS = dt.timedelta(milliseconds=1)


def _day_span(day: dt.date, tz: dt.tzinfo) -> tuple[int, int]:
    """The UTC milliseconds [start, end) of ``day`` in ``tz``, if its clock keeps one offset all
    day: then each timestamp in the span is on that day.  A day whose offset changes (a DST
    switch) gets an empty span, so each of its messages is dated by the zone itself.  The offset
    is looked at every hour of the day: no zone switches and back within an hour."""
    start = dt.datetime.combine(day, dt.time(), tz)
    offset = start.utcoffset()
    for hour in range(1, 25):
        if (start + dt.timedelta(hours=hour)).utcoffset() != offset:
            return 0, 0
    first = (start - _EPOCH) // _MS
    return first, first + 86_400_000


def _write_all(fd: int, data: bytes) -> None:
    """All of ``data``, or the error saying why not (a short write: a full disk)."""
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _day_file_mode(folder: Path) -> int:
    """A new day file is no more open than the folder it is made in (0644 in a 0755 folder, 0600
    in a 0700 one): its messages were written by someone who chose that folder's openness, and
    the memfs process that makes the file may be root."""
    try:
        return stat.S_IMODE(os.stat(folder).st_mode) & 0o666
    except OSError:
        return 0o600


def _check_day_file(path: Path) -> None:
    """Refuse a day file that cannot be appended to (as :meth:`SyncStore._append` would), before
    any of a batch's day files is written.  _append still opens each without following links."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(st.st_mode):
        raise SyncStoreError(errno.ELOOP, f"{path.name} is a symlink, not a day file: refusing to write through it")
    if not stat.S_ISREG(st.st_mode):
        raise SyncStoreError(errno.EINVAL, f"{path.name} is not a regular file")


class SyncStore:
    def __init__(self, workspace: Path, tz: dt.tzinfo, claims: IdClaims | None = None) -> None:
        self.folder = workspace / SYNC_DIR
        self.tz = tz
        self.claims = claims
        self._recorded: set[str] = set()  # ids of the files this process gave the claims already
        self._ids: dict[str, str] | None = None  # id -> its day file
        self._seen: tuple[tuple[str, int, int], ...] = ()
        self._lock = threading.Lock()
        self._day: tuple[int, int, str] = (0, 0, "")  # the last date_file: its day's [start, end) in ms
        self._spans: dict[dt.date, tuple[int, int, str]] = {}  # the same for each day met

    def _load_ids(self, hidden: Callable[[str], bool] | None = None) -> dict[str, str]:
        signature = _signature(self.folder, hidden)
        if hidden is not None or self._ids is None or signature != self._seen:
            ids: dict[str, str] = {}
            for path, _ in _day_files(self.folder):
                if hidden is not None and hidden(f"{SYNC_DIR}/{path.name}"):
                    continue
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
                except OSError:
                    continue
                with os.fdopen(fd, "rb") as day:
                    lines = day.read().decode("utf-8", errors="replace").split("\n")
                for raw in lines:
                    try:
                        record = orjson.loads(raw)
                    except ValueError:  # orjson refuses some JSON that json takes (NaN, ...)
                        try:
                            record = json.loads(raw)
                        except (ValueError, RecursionError):  # a line nested deep, edited in beside
                            continue
                    if isinstance(record, dict) and isinstance(record.get("id"), str):
                        ids.setdefault(record["id"], f"{SYNC_DIR}/{path.name}")
            if hidden is not None:
                return ids  # a view without the private day files: not the cache of the whole
            self._ids, self._seen = ids, signature
        return self._ids

    def date_file(self, message: SyncMessage) -> str:
        stamp = message.timestamp
        low, high, rel = self._day
        if type(stamp) is int and low <= stamp < high:
            return rel  # the day of the message before it (a batch comes in runs of one day)
        day = dt.datetime.fromtimestamp(stamp / 1000, dt.timezone.utc).astimezone(self.tz).date()
        span = self._spans.get(day)
        if span is None:  # days interleave (several chats): each day's span is worked out once
            if len(self._spans) > SPANS_KEPT:
                self._spans.clear()
            span = self._spans[day] = (*_day_span(day, self.tz), f"{SYNC_DIR}/{day.isoformat()}.jsonl")
        self._day = span
        return span[2]

    def ingest(self, messages: list[SyncMessage], hidden: Callable[[str], bool] | None = None,
               writing: Callable[[list[str]], None] | None = None) -> IngestResult:
        """Store new messages.  ``hidden`` (a shared mode's test for private paths): day files it
        hides are neither written nor consulted for duplicates, so a shared writer cannot add
        to them, nor learn which ids they hold by what gets stored.  ``writing`` is told the day
        files about to grow before the first is written (a mount's watcher must not take them
        for changes made beside it)."""
        result = IngestResult()
        self.folder.mkdir(parents=True, exist_ok=True)
        _drop_old_lock_file(self.folder)
        with self._lock:
            lock_fd = os.open(self.folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            fcntl.flock(lock_fd, fcntl.LOCK_EX)
            try:
                ids = self._load_ids(hidden)
                fresh: dict[str, str] = {}  # id -> its day file
                new: list[tuple[SyncMessage, str]] = []
                low, high, day = 0, 0, ""  # the day of the message before (each new day judged below)
                for message in messages:
                    ident = message.id
                    if ident in ids or ident in fresh:
                        result.duplicates += 1
                        continue
                    # date_file's first test, made here: a year's batch is some 90k messages.
                    stamp = message.timestamp
                    if type(stamp) is int and low <= stamp < high:
                        target = day
                    else:
                        target = self.date_file(message)
                        low, high, day = self._day
                        if hidden is not None and hidden(target):
                            raise SyncStoreError(errno.EACCES, f"{target} is private: a shared mode does not write "
                                                               "to it")
                    fresh[ident] = target
                    new.append((message, target))
                known = {} if self.claims is None else {i: rel for i, rel in ids.items() if i not in self._recorded}
                asked = self.claims is not None and bool(fresh or known)
                with self.claims(fresh, known, hidden is not None) if asked else nullcontext(set()) as answer:
                    elsewhere = set() if answer is None else answer
                    batches: dict[str, list[SyncMessage]] = {}
                    for message, target in new:
                        if message.id in elsewhere:  # stored through another host
                            result.duplicates += 1
                            continue
                        batches.setdefault(target, []).append(message)
                    for rel in batches:  # all refused before any is written: a batch lands whole or not at all
                        _check_day_file(self.folder.parent / rel)
                    if batches and writing is not None:
                        writing(sorted(batches))
                    for rel, stored in sorted(batches.items()):
                        size, data, st = self._append(self.folder.parent / rel, joined_lines(stored),
                                                      sync=len(batches) == 1)
                        result.grew_from[rel] = size
                        result.written[rel] = (data, st)
                        result.files.append(rel)
                        result.stored += len(stored)
                    if len(batches) > 1:
                        _sync_all(lock_fd)  # one flush for a year of day files, not one each
                if asked and answer is not None:
                    self._recorded |= known.keys()
                ids.update((i, rel) for i, rel in fresh.items() if i not in elsewhere)
                if hidden is None:
                    self._seen = _signature(self.folder)
            finally:
                fcntl.flock(lock_fd, fcntl.LOCK_UN)
                os.close(lock_fd)
        return result

    @staticmethod
    def _append(path: Path, lines: bytes, sync: bool = True) -> tuple[int, bytes, os.stat_result]:
        """Append ``lines`` (joined by newlines, without the last) to the day file ``path``;
        returns its size before, the bytes appended and its stat after."""
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC,
                         _day_file_mode(path.parent))
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise SyncStoreError(errno.ELOOP, f"{path.name} is a symlink, not a day file: refusing to write "
                                                  "through it") from None
            raise
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                raise SyncStoreError(errno.EINVAL, f"{path.name} is not a regular file")
            size = st.st_size
            prefix = b""
            if size and os.pread(fd, 1, size - 1) != b"\n":
                prefix = b"\n"  # never glue our line onto a line someone left unfinished
            data = prefix + lines + b"\n"
            _write_all(fd, data)
            if sync:
                os.fsync(fd)
            after = os.fstat(fd)
        finally:
            os.close(fd)
        return size, data, after

    def reject(self, name: str, data: bytes | bytearray, reason: str) -> Path:
        """Keep refused bytes with the reason beside them, for a person to look at (new files
        only, never through a symlink)."""
        folder = self.folder / REJECTED_DIR
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if folder.is_symlink() or not folder.is_dir():
            raise SyncStoreError(errno.EINVAL, f"{folder} is not a folder of ours: not keeping rejected data there")
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        base = folder / f"{stamp}-{os.getpid()}-{time.monotonic_ns() % 10**9}-{Path(name).name or 'stdin'}"
        for path, content in ((base, data), (Path(str(base) + ".reason"), (reason + "\n").encode())):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(content)
        return base
