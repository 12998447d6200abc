"""When versions are taken, and restoring one.

What a memory file holds is kept at three moments: **before** a change through the mount or the
CLI (if the file no longer looks as it did when its newest version was taken, someone changed it
beside the mount: that content is kept first, so the change cannot lose it), **after** a change
(close, fsync, truncate, rename into place: the new content, with who made it), and when the
watcher or a reconciliation sees a change made beside the mount.  A version identical to the
newest one is not kept again.  When the mount knows a change only appended to the file (no byte
below the newest version's end was written through it since), only the appended bytes are read:
the whole content's SHA-256 goes on from the state this process kept of the newest version, and
the last bytes before the old end are compared with those it kept, so an append to a 30 MB
transcript costs what the appended bytes cost.  Forgetting versions on purpose is here too, with what it leaves
(the same bytes under another version, a file that holds them now).
"""

from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import stat
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memfs import longpath
from memfs.cleantext import clean_text
from memfs.config import Config
from memfs.history.provenance import BESIDE, FOUND, Provenance
from memfs.history.store import Forgotten, HistoryError, HistoryStore, Version
from memfs.privacy import open_resolved, opened_at, resolve_within
from memfs.replacing import staged_replacement, sync_folder
from memfs.workspace import is_memory, name_is_text

log = logging.getLogger(__name__)

# Age and size limits are enforced at start, then after this many new versions or this long.
PRUNE_EVERY_VERSIONS = 64
PRUNE_EVERY_S = 3600.0
READ_ATTEMPTS = 5  # a file changing while it is read is read again
TAIL_CHECK = 4096  # the bytes before a file's old end compared before only its new ones are read
KNOWN_FILES = 256  # files whose newest version's hash state is kept, for appends


@dataclass
class _Known:
    """What this process knows of a file's newest version: enough to take an append from the
    appended bytes alone."""

    blob: int
    size: int
    hasher: Any  # hashlib's sha256 of the content, to go on from
    tail: bytes  # the content's last TAIL_CHECK bytes


class _NotAnAppend(Exception):
    """The file is not its newest version plus appended bytes: it is read whole instead."""


class NoSuchVersion(LookupError):
    pass


@dataclass(frozen=True)
class Snapshot:
    data: bytes
    fingerprint: str
    mtime_ns: int
    linked: bool  # the file had other names (hard links): its bytes may be a private file's


@dataclass(frozen=True)
class Forgetting:
    """What forgetting did, and what it could not do."""

    forgotten: list[Forgotten]
    emptied: bool  # the write-ahead log was emptied (else it may keep the bytes until its next checkpoint)
    still_held: list[Version]  # versions not asked about that hold the very bytes of a forgotten one
    held_now: list[str]  # files that hold the text (or a forgotten content) now: their next version will too


def fingerprint(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _same_workspace(recorded: str, wanted: str) -> bool:
    try:
        old, new = json.loads(recorded), json.loads(wanted)
        return old["path"] == new["path"] or (old["dev"], old["ino"]) == (new["dev"], new["ino"])
    except (ValueError, KeyError, TypeError):
        return False


class History:
    def __init__(self, cfg: Config, path: Path, identity: str) -> None:
        self.workspace = Path(os.path.realpath(cfg.workspace))
        self.settings = cfg.history
        self.extra = cfg.index.extra_paths
        self.store = self._open(path, identity)
        self._since_prune = 0
        self._pruned_at = time.monotonic()  # a mount or daemon prunes as it starts (Memory.reconcile)
        self._known: OrderedDict[str, _Known] = OrderedDict()
        # Set by a watcher beside other mounts of this workspace: whether one of them has the
        # file open for writing now (see memfs.mounttable.OtherMounts).
        self.written_elsewhere: Callable[[str], bool] | None = None

    @staticmethod
    def _open(path: Path, identity: str) -> HistoryStore:
        """The store of this workspace; one recorded for another (a copied state folder) is set
        aside, never shown."""
        store = HistoryStore(path)
        recorded = store.get_meta("workspace")
        if recorded is not None and recorded != identity and not _same_workspace(recorded, identity):
            store.close()
            aside = path.with_name(f"{path.name}.other-workspace-{int(time.time())}")
            for suffix in ("", "-wal"):
                if os.path.exists(str(path) + suffix):
                    os.replace(str(path) + suffix, str(aside) + suffix)
            Path(str(path) + "-shm").unlink(missing_ok=True)
            log.warning("history %s was made for another workspace: set aside as %s", path, aside)
            store = HistoryStore(path)
        if recorded != identity:
            store.set_meta("workspace", identity)
        return store

    def close(self) -> None:
        self.store.close()

    def tracks(self, rel: str) -> bool:
        # A name that is not UTF-8 cannot be stored (nor shown): the index lists it as skipped.
        return is_memory(rel, self.extra) and name_is_text(rel)

    # -- reading the workspace -----------------------------------------------------------------

    def _open_own(self, rel: str) -> int:
        """``rel`` opened for reading if it is a file of the workspace under its own name: no
        symlink on the way (a link's target has a history of its own if it is memory, and one
        that leads out of the workspace has none: the one rule of memfs.privacy.read_visible),
        past PATH_MAX too.  OSError otherwise."""
        if resolve_within(self.workspace, rel) != rel.strip("/"):
            raise FileNotFoundError(rel)
        fd = open_resolved(self.workspace, rel.strip("/"), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            if not opened_at(self.workspace, fd, rel.strip("/")):
                raise FileNotFoundError(rel)
        except BaseException:
            os.close(fd)
            raise
        return fd

    def _snapshot(self, rel: str) -> Snapshot | None:
        """The bytes of ``rel`` as one consistent read; None unless it is a regular file (a
        symlink is not followed: its target has a history of its own if it is memory)."""
        for _ in range(READ_ATTEMPTS):
            try:
                fd = self._open_own(rel)
            except OSError:
                return None
            try:
                before = os.fstat(fd)
                if not stat.S_ISREG(before.st_mode):
                    return None
                chunks = []
                while block := os.read(fd, 1 << 20):
                    chunks.append(block)
                after = os.fstat(fd)
            finally:
                os.close(fd)
            if fingerprint(before) == fingerprint(after):
                return Snapshot(b"".join(chunks), fingerprint(after), after.st_mtime_ns, after.st_nlink > 1)
        log.warning("history: %s kept changing while it was read; its version is what was read last", rel)
        return Snapshot(b"".join(chunks), "", after.st_mtime_ns, after.st_nlink > 1)

    def current_fingerprint(self, rel: str) -> str | None:
        try:
            st = longpath.lstat(self.workspace / rel)
        except OSError:
            return None
        return fingerprint(st) if stat.S_ISREG(st.st_mode) else None

    # -- taking versions -----------------------------------------------------------------------

    def unseen(self, rel: str) -> bool:
        """Whether ``rel`` holds content that may not be kept yet (cheap: one stat, one lookup)."""
        if not self.tracks(rel):
            return False
        now = self.current_fingerprint(rel)
        return now is not None and now != self.store.seen(rel)

    def before_change(self, rel: str, who: Provenance = BESIDE) -> Version | None:
        """``rel`` is about to change: keep what it holds now if that is not kept yet (as
        ``who`` made it: beside the mount, or found by a scan)."""
        if not self.unseen(rel):
            return None
        return self._take(rel, who, beside=True)

    def changed(self, rel: str, who: Provenance, appended_from: int | None = None) -> Version | None:
        """``rel`` was changed by ``who``: keep its new content.  ``appended_from``: no byte
        before this offset was written since the newest version was taken (the mount tracks its
        writes); then, if the newest version ends there or before, only the rest is read."""
        if not self.tracks(rel):
            return None
        if appended_from is not None:
            try:
                return self._take_appended(rel, who, appended_from)
            except _NotAnAppend:
                pass
        # What a file holds after a change is in the file itself: its version need not wait for
        # the disk (HistoryStore.transaction); what it held before one must.
        return self._take(rel, who, beside=who is BESIDE, durable=False)

    def _remember(self, rel: str, blob: int, size: int, hasher: Any, tail: bytes) -> None:
        self._known[rel] = _Known(blob, size, hasher, tail[-TAIL_CHECK:])
        self._known.move_to_end(rel)
        while len(self._known) > KNOWN_FILES:
            self._known.popitem(last=False)

    def _take_appended(self, rel: str, who: Provenance, appended_from: int) -> Version | None:
        known = self._known.get(rel)
        if known is None or appended_from < known.size:
            raise _NotAnAppend
        with self.store.transaction(durable=False):  # after a change: the file holds these bytes
            try:
                fd = self._open_own(rel)
            except OSError:
                raise _NotAnAppend from None
            try:
                before = os.fstat(fd)
                if not stat.S_ISREG(before.st_mode) or before.st_size < known.size:
                    raise _NotAnAppend
                if os.pread(fd, len(known.tail), known.size - len(known.tail)) != known.tail:
                    raise _NotAnAppend  # changed below its old end after all (beside the mount)
                chunks = []
                offset = known.size
                while block := os.pread(fd, 1 << 20, offset):
                    chunks.append(block)
                    offset += len(block)
                after = os.fstat(fd)
            finally:
                os.close(fd)
            if fingerprint(before) != fingerprint(after):
                raise _NotAnAppend  # still being written: read whole, as a changing file is
            tail = b"".join(chunks)
            hasher = known.hasher.copy()
            hasher.update(tail)
            try:
                version = self.store.add(rel, tail, time.time_ns(), who, fingerprint(after), after.st_nlink > 1,
                                         digest=hasher.hexdigest(), on=(known.blob, known.size))
            except HistoryError:
                raise _NotAnAppend from None  # another process kept a version meanwhile
        self._remember(rel, version.blob if version else known.blob, known.size + len(tail), hasher,
                       known.tail + tail)
        if version is not None:
            self._taken(rel, version, who)
        return version

    def written(self, rel: str, who: Provenance, data: bytes, st: os.stat_result) -> Version | None:
        """``rel`` was just created by this process holding exactly ``data`` (``st``: its stat
        right after the write, taken through the descriptor written to): its version is taken
        from those bytes instead of reading the file back (a sync batch creates hundreds of day
        files at once).  Read after all if the file has changed since (its fingerprint)."""
        if not self.tracks(rel):
            return None
        return self._take(rel, who, beside=False, written=Snapshot(data, fingerprint(st), st.st_mtime_ns,
                                                                    st.st_nlink > 1))

    def _take(self, rel: str, who: Provenance, beside: bool, written: Snapshot | None = None,
              durable: bool = True) -> Version | None:
        # Read and recorded in one write transaction: of two closes racing (threads of one mount,
        # or two processes), the one that read later commits later, so the newest version is
        # never an older read of the file (concurrent `echo >>` from several shells).  Bytes
        # ``written`` by the caller stand for a read while the file is still what they made.
        with self.store.transaction(durable=durable):
            snap = written if written is not None and self.current_fingerprint(rel) == written.fingerprint \
                else self._snapshot(rel)
            if snap is None or (beside and self._half_written(rel, snap)):
                return None
            now = time.time_ns()
            # Made beside the mount: the file's own time says when (never later than now).
            when = min(snap.mtime_ns, now) if beside else now
            hasher = hashlib.sha256(snap.data)
            version = self.store.add(rel, snap.data, when, who, snap.fingerprint or None, snap.linked,
                                     digest=hasher.hexdigest())
            newest = version or self.store.latest(rel)
            if newest is not None and snap.fingerprint and newest.size == len(snap.data):
                self._remember(rel, newest.blob, len(snap.data), hasher, snap.data[-TAIL_CHECK:])
            else:
                self._known.pop(rel, None)
        if version is not None:
            self._taken(rel, version, who)
        return version

    def _half_written(self, rel: str, snap: Snapshot) -> bool:
        """Whether a change seen beside the mount was read in the middle of another mount's write
        (``>`` truncates at open and writes later): that mount keeps the version when it closes.
        Asked after the read, since a write can start between the watcher's look and the read;
        a file that changed since the read is skipped too, its next change event takes it."""
        if self.written_elsewhere is None:
            return False
        if self.written_elsewhere(rel) or self.current_fingerprint(rel) != snap.fingerprint:
            log.debug("history: %s is being written through another mount: not kept now", rel)
            return True
        return False

    def _taken(self, rel: str, version: Version, who: Provenance) -> None:
        log.debug("history: %s %s (%d bytes, via %s)", rel, version.name, version.size, who.via)
        self._since_prune += 1
        in_batch = not self.store.conn.getautocommit()  # many files in one transaction: pruned at the next
        if not in_batch and (self._since_prune >= PRUNE_EVERY_VERSIONS
                             or time.monotonic() - self._pruned_at > PRUNE_EVERY_S):
            self.prune()

    def removed(self, rel: str, who: Provenance) -> int:
        """``rel`` (a file, or a folder and all below it) is gone: record it for each file that
        has versions; they stay readable."""
        gone = 0
        for path in self._paths_under(rel):
            self._known.pop(path, None)
            if not longpath.lexists(self.workspace / path):
                gone += self.store.deleted(path, time.time_ns(), who)
        return gone

    def moved(self, old: str, new: str, who: Provenance) -> None:
        self.removed(old, who)
        target = self.workspace / new
        try:
            folder_moved = stat.S_ISDIR(longpath.lstat(target).st_mode)
        except OSError:
            folder_moved = False
        if folder_moved:
            for below in longpath.files_below(target):
                self.changed(f"{new}/{below}", who)
        else:
            self.changed(new, who)

    def _paths_under(self, rel: str) -> list[str]:
        return [p for p in self.store.paths() if p == rel or p.startswith(rel + "/")]

    def reconcile(self, present: Iterable[str]) -> int:
        """Keep what changed beside the mount while nothing watched (at a mount's or a daemon's
        start); record files that went away.  Returns how many versions were taken."""
        taken = 0
        here = set()
        for rel in present:
            here.add(rel)
            if self.before_change(rel, FOUND) is not None:
                taken += 1
        for rel in self.store.paths():
            if rel not in here and self.store.deleted_at(rel) is None and not longpath.lexists(self.workspace / rel):
                self.store.deleted(rel, time.time_ns(), FOUND)
        return taken

    def prune(self) -> int:
        self._since_prune = 0
        self._pruned_at = time.monotonic()
        cutoff = time.time_ns() - int(self.settings.keep_days * 86_400 * 1e9)
        removed = self.store.prune(cutoff, int(self.settings.max_mb * 1024 * 1024))
        if removed:
            log.info("history: pruned %d versions (history.keep_days %g, history.max_mb %g)", removed,
                     self.settings.keep_days, self.settings.max_mb)
        return removed

    # -- reading history -----------------------------------------------------------------------

    def versions(self, rel: str) -> list[Version]:
        return self.store.versions(rel)

    def version(self, rel: str, name: str) -> Version:
        found = self.store.version(rel, name)
        if found is None:
            raise NoSuchVersion(name)
        return found

    def content(self, version: Version) -> bytes:
        return self.store.content(version.blob)

    def paths(self, visible: Callable[[str], bool]) -> list[str]:
        return [p for p in self.store.paths() if visible(p)]

    def diff(self, rel: str, older: Version | None, newer: Version | None) -> str:
        """A unified diff from ``older`` (None: from nothing) to ``newer`` (None: the file as it
        is now)."""
        def lines(data: bytes) -> list[str]:
            # As get and search show the text (memfs.cleantext: no control character reaches a
            # terminal), cut at newlines only (str.splitlines also cuts at \f, \v and \x1c-\x1e).
            *whole, last = clean_text(data)[0].split("\n")
            return [line + "\n" for line in whole] + ([last] if last else [])

        def text(version: Version | None, now: bool) -> tuple[list[str], str]:
            if version is None:
                snap = self._snapshot(rel) if now else None
                return lines(snap.data if snap else b""), f"{rel} (now)" if snap else "/dev/null"
            return lines(self.content(version)), f"{rel}@{version.name}"

        (a, a_label), (b, b_label) = text(older, False), text(newer, True)
        import difflib  # here, not at import: every command loads this module, few diff

        hunks = difflib.unified_diff(a, b, a_label, b_label)
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in hunks)

    # -- forgetting ----------------------------------------------------------------------------

    def containing(self, text: bytes) -> list[Version]:
        return self.store.containing(text)

    def forget(self, versions: list[Version], who: Provenance, text: bytes | None = None) -> Forgetting:
        """Forget ``versions`` for good (see HistoryStore.forget); ``text``: what they were
        chosen for containing, to say which files hold it now."""
        gone, emptied = self.store.forget([v.id for v in versions], time.time_ns(), who)
        blobs = {v.blob for v in versions}
        digests = {v.sha256 for v in versions}
        held_now = []
        for rel in sorted({f.path for f in gone}):
            snap = self._snapshot(rel)
            if snap is not None and (text in snap.data if text else hashlib.sha256(snap.data).hexdigest() in digests):
                held_now.append(rel)
        if gone:
            log.info("history: forgot %d versions of %d files for %s (pid %s)", len(gone), len({f.path for f in gone}),
                     who.process, who.pid)
        if not emptied:
            log.warning("history: the write-ahead log of %s could not be emptied now (another process is reading "
                        "it); the forgotten bytes may stay in it until it is: ask again once the reader is done", self.store.path)
        return Forgetting(gone, emptied, self.store.holding(blobs), held_now)

    def forgotten(self, rel: str) -> list[Forgotten]:
        return self.store.forgotten(rel)

    # -- restoring -----------------------------------------------------------------------------

    def restore(self, rel: str, version: Version, who: Provenance) -> Version | None:
        """Put ``version``'s bytes back in place of ``rel`` (atomically, keeping its mode and
        owner); the restored content is itself a new version.  None: the file holds it already."""
        data = self.content(version)
        self.before_change(rel)
        full = self.workspace / rel
        try:
            if stat.S_ISLNK(longpath.lstat(full).st_mode):
                raise HistoryError(f"{rel} is a symbolic link now: remove it first")
        except FileNotFoundError:
            pass
        temp: Path | None = None
        try:
            if not longpath.exists(full.parent):
                full.parent.mkdir(parents=True, exist_ok=True)  # a deleted file's folder, put back
            with longpath.reach(full) as short:  # past PATH_MAX too: through its folder
                target = Path(short)
                try:
                    existing: os.stat_result | None = os.stat(target)
                except FileNotFoundError:
                    existing = None
                temp = staged_replacement(target, data, existing, suffix=".restore")
                os.replace(temp, target)
                temp = None
                sync_folder(target.parent)
        except OSError as exc:
            if temp is not None:
                temp.unlink(missing_ok=True)
            raise HistoryError(f"{rel}: {os.strerror(exc.errno or errno.EIO)}") from None
        return self.changed(rel, who)

    def status(self) -> dict[str, object]:
        versions, files = self.store.counts()
        return {"history_versions": versions, "history_files": files, "history_bytes": self.store.file_bytes(),
                "history_path": str(self.store.path), "history_keep_days": self.settings.keep_days,
                "history_max_mb": self.settings.max_mb}
