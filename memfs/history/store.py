"""The version store of one (workspace, agent): an SQLite file beside the index.

Content is addressed by its SHA-256 and kept zlib-compressed.  A version whose content starts
with the previous version of the same file (an append to a daily log or a JSONL) is stored as
its new bytes only, on top of that one; a chain is cut (the whole content stored again) every
``MAX_CHAIN`` links so reading a version stays bounded.  Each version records when and by whom
it was made; a deletion is recorded too, so a deleted file keeps its history.  A version can be
forgotten on purpose (``forget``): its record goes, its bytes leave the file for good (the
database is rewritten and its write-ahead log emptied), and only when and by whom is recorded.

Writes commit with ``synchronous=FULL``: a version is on disk before the change that follows it
is acknowledged.  A version of what a file holds after a change (``durable=False``: a close, an
fsync, a rename into place) commits with ``synchronous=NORMAL`` instead, in the order of the
log but without waiting for the disk: the file itself holds those bytes, so a power cut (never a
crash of the process: the log is written before the commit returns) can lose only that record,
and the next start's reconcile keeps the file as it is then ("found").  The next durable commit
(or checkpoint) puts every one before it on disk too.  One connection behind a lock; other
processes read through WAL.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
import threading
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import apsw

from memfs.history.provenance import Provenance
from memfs.userdirs import private_file

SCHEMA_VERSION = "2"
# Reading a version joins at most this many pieces; beyond, the whole content is stored again.
# 1,000 appends of 2 KiB to a daily log then cost one extra copy of the log (measured in
# scripts/bench_history.py), and reading the newest version stays under a few ms.
MAX_CHAIN = 1000
NAME_TIME = "%Y-%m-%dT%H-%M-%SZ"
SEVERAL_NAMES = ""  # held's name for "read from a file with more than one hard link"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS blobs(
    id INTEGER PRIMARY KEY AUTOINCREMENT,  -- never reused: a cached history/ file never reads other bytes
    sha256 TEXT NOT NULL UNIQUE,       -- of the whole content
    size INTEGER NOT NULL,             -- of the whole content
    base INTEGER REFERENCES blobs(id), -- NULL: data is the whole content; else base's content + data
    chain INTEGER NOT NULL,            -- pieces to join to read it
    data BLOB NOT NULL                 -- zlib
);
CREATE INDEX IF NOT EXISTS blobs_base ON blobs(base);
CREATE TABLE IF NOT EXISTS versions(
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    path TEXT NOT NULL,
    name TEXT,                         -- NULL for a deletion
    time_ns INTEGER NOT NULL,
    blob INTEGER REFERENCES blobs(id), -- NULL for a deletion
    uid INTEGER, pid INTEGER, process TEXT,
    via TEXT NOT NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS versions_name ON versions(path, name);
CREATE INDEX IF NOT EXISTS versions_path ON versions(path, id);
CREATE INDEX IF NOT EXISTS versions_blob ON versions(blob);
-- Every name a content was kept under, for as long as the content is kept (whatever versions
-- are pruned): a shared reader is shown no content a private file has held.  The name ''
-- (SEVERAL_NAMES) marks content read from a file with several hard links.
CREATE TABLE IF NOT EXISTS held(
    blob INTEGER NOT NULL, path TEXT NOT NULL, PRIMARY KEY(blob, path)) WITHOUT ROWID;
-- Versions forgotten on purpose (memfs history forget): which, when and by whom; never their
-- bytes.  Kept so the listing can say so and so a forgotten name is never given to other bytes.
CREATE TABLE IF NOT EXISTS forgotten(
    version INTEGER PRIMARY KEY,       -- the id the version had
    path TEXT NOT NULL, name TEXT NOT NULL,
    time_ns INTEGER NOT NULL,          -- when the version was made
    forgotten_ns INTEGER NOT NULL,
    uid INTEGER, pid INTEGER, process TEXT,
    via TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS forgotten_path ON forgotten(path, version);
CREATE TABLE IF NOT EXISTS seen(
    path TEXT PRIMARY KEY,
    fingerprint TEXT NOT NULL          -- the file's identity and times when its newest version was taken
);
"""


class HistoryError(RuntimeError):
    pass


# What keeping a version can fail with (a corrupt or locked database, a full disk, a file that
# vanished mid-read): after a change has happened, it is logged rather than undoing the change.
FAILURES = (HistoryError, apsw.Error, OSError)


@dataclass(frozen=True)
class Version:
    id: int
    path: str
    name: str
    time_ns: int
    size: int
    sha256: str
    blob: int
    uid: int | None
    pid: int | None
    process: str | None
    via: str

    @property
    def time_iso(self) -> str:
        return _iso(self.time_ns)

    def as_json(self) -> dict[str, object]:
        return {"version": self.name, "time": self.time_iso, "size": self.size, "sha256": self.sha256,
                "uid": self.uid, "pid": self.pid, "process": self.process, "via": self.via}


@dataclass(frozen=True)
class Forgotten:
    """A version forgotten on purpose: its name and time, and who forgot it when."""

    version: int
    path: str
    name: str
    time_ns: int
    forgotten_ns: int
    uid: int | None
    pid: int | None
    process: str | None
    via: str

    def as_json(self) -> dict[str, object]:
        return {"version": self.name, "time": _iso(self.time_ns), "forgotten": _iso(self.forgotten_ns),
                "uid": self.uid, "pid": self.pid, "process": self.process, "via": self.via}


def _iso(time_ns: int) -> str:
    moment = dt.datetime.fromtimestamp(time_ns / 1e9, dt.timezone.utc)
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")


_VERSION_COLUMNS = ("v.id, v.path, v.name, v.time_ns, b.size, b.sha256, v.blob, v.uid, v.pid, v.process, v.via")


# Pieces larger than this are compressed at zlib's fastest level: a 30 MB import is kept in a
# fraction of a second instead of a few (the text compresses about a fifth less well).  So are
# the versions of a bulk transaction (a 30 MB sync batch's hundreds of small day files).
FAST_COMPRESS_BYTES = 1 << 20


def compress(data: bytes | memoryview, fast: bool = False) -> bytes:
    return zlib.compress(data, 1 if fast or len(data) > FAST_COMPRESS_BYTES else 6)


SAME_SECOND = "_v"  # before the counter of a second change within one second (see version_name)


def version_name(path: str, time_ns: int, newest: str | None) -> str:
    """``2026-11-22T14-05-33Z.md``: the UTC second and the file's own extension; a later change
    within the same second gets ``_v000002``, ``_v000003``... after ``newest`` (the path's newest
    name).  Zero-padded, and a letter after the ``_`` because locale-aware sorts (``ls`` in
    en_US.UTF-8) skip punctuation and put digits before letters: so a plain sort of the names
    keeps the order the versions were made in, in the C locale and in others (for extensions
    that start before ``v``: .md, .jsonl, .txt; a .yaml's sorts right in the C locale only).  Counting on from
    the newest, not filling gaps, means a name freed by pruning is never given to other bytes
    (the kernel may still cache it)."""
    stem = time.strftime(NAME_TIME, time.gmtime(time_ns // 1_000_000_000))
    ext = os.path.splitext(path.rpartition("/")[2])[1]
    if newest is None or not newest.startswith(stem):
        return f"{stem}{ext}"
    rest = newest[len(stem):len(newest) - len(ext)]
    n = int(rest[2:]) if rest.startswith(SAME_SECOND) and rest[2:].isdigit() else 1
    return f"{stem}{SAME_SECOND}{n + 1:06d}{ext}"


_TABLES = frozenset(re.findall(r"CREATE TABLE IF NOT EXISTS (\w+)", _SCHEMA))


# A content and every base below it; the one with no base (stored whole) comes first.
_CHAIN = """WITH RECURSIVE chain(id, base, data, depth) AS (
    SELECT id, base, data, 0 FROM blobs WHERE id = ?
    UNION ALL SELECT b.id, b.base, b.data, chain.depth + 1 FROM blobs b JOIN chain ON b.id = chain.base)
SELECT base, data FROM chain ORDER BY depth DESC"""


class HistoryStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.lock = threading.RLock()
        self._digests: tuple[tuple[int, int], dict[str, frozenset[str]]] | None = None
        self._bulk = False  # in a bulk transaction (see transaction)
        fresh = not path.exists() or path.stat().st_size == 0
        private_file(path)  # versions of MEMORY.md: this user's alone (its -wal and -shm follow)
        self.conn = apsw.Connection(str(path))
        self.conn.setbusytimeout(10_000)
        if fresh:  # pages freed by pruning go back to the file system (only settable before any table)
            self.conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
        self.conn.execute("PRAGMA journal_mode=WAL")
        # A checkpoint every 256 pages and the log cut back to 1 MiB after it: on disk the history
        # stays close to what it keeps (SQLite's default lets the log grow to 4 MiB and stay there).
        self.conn.execute("PRAGMA wal_autocheckpoint=256")
        self.conn.execute("PRAGMA journal_size_limit=1048576")
        self.conn.execute("PRAGMA synchronous=FULL")
        self.conn.execute("PRAGMA foreign_keys=OFF")  # chains are kept whole by prune(), not by SQLite
        if self._ready():
            return  # opening takes no write lock: a reader never waits on a busy (or stopped) writer
        with self.transaction():
            self.conn.execute(_SCHEMA)
            recorded = self.get_meta("schema")
            if recorded is None:
                self.set_meta("schema", SCHEMA_VERSION)
            elif recorded != SCHEMA_VERSION:
                raise HistoryError(f"{path} was made by another memfs (history schema {recorded})")

    def _ready(self) -> bool:
        """Whether the schema is all there, of this version (read without a write lock)."""
        try:
            tables = {row[0] for row in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not _TABLES <= tables:
                return False
            return self.get_meta("schema") == SCHEMA_VERSION
        except apsw.Error:
            return False

    def close(self) -> None:
        with self.lock:
            self.conn.close()

    @contextmanager
    def transaction(self, bulk: bool = False, durable: bool = True) -> Iterator[None]:
        """One write transaction, taken at once (IMMEDIATE): another process adding a version of
        the same file waits instead of deciding on a stale "newest version".  ``bulk``: many
        versions at once (a big sync batch), compressed at zlib's fastest level, as one big
        piece is.  ``durable=False``: committed without waiting for the disk (see the module's
        docstring); nested in a transaction, the outer one decides."""
        with self.lock:
            if not self.conn.getautocommit():  # nested in one already
                yield
                return
            self._bulk = bulk
            if not durable:
                self.conn.execute("PRAGMA synchronous=NORMAL")
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                try:
                    yield
                except BaseException:
                    self.conn.execute("ROLLBACK")
                    raise
                finally:
                    self._bulk = False
                self.conn.execute("COMMIT")
            finally:
                if not durable:
                    self.conn.execute("PRAGMA synchronous=FULL")

    # -- meta and fingerprints -----------------------------------------------------------------

    def get_meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else None

    def set_meta(self, key: str, value: str) -> None:
        with self.transaction():
            self.conn.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, value))

    def seen(self, path: str) -> str | None:
        with self.lock:
            row = self.conn.execute("SELECT fingerprint FROM seen WHERE path = ?", (path,)).fetchone()
        return row[0] if row else None

    def set_seen(self, path: str, fingerprint: str | None) -> None:
        with self.transaction():
            if fingerprint is None:
                self.conn.execute("DELETE FROM seen WHERE path = ?", (path,))
            else:
                self.conn.execute("INSERT OR REPLACE INTO seen(path, fingerprint) VALUES (?, ?)", (path, fingerprint))

    # -- reading -------------------------------------------------------------------------------

    def _latest_row(self, path: str) -> tuple[int | None, int] | None:
        """(blob or None for a deletion, time_ns) of the newest record of ``path``."""
        row = self.conn.execute("SELECT blob, time_ns FROM versions WHERE path = ? ORDER BY id DESC LIMIT 1",
                                (path,)).fetchone()
        return (row[0], row[1]) if row else None

    def latest(self, path: str) -> Version | None:
        """The newest version of ``path`` (None if it has none, or was deleted since)."""
        with self.lock:
            row = self.conn.execute(
                f"SELECT {_VERSION_COLUMNS} FROM versions v LEFT JOIN blobs b ON b.id = v.blob "
                "WHERE v.path = ? ORDER BY v.id DESC LIMIT 1", (path,)).fetchone()
        return Version(*row) if row and row[6] is not None else None

    def versions(self, path: str) -> list[Version]:
        with self.lock:
            rows = self.conn.execute(
                f"SELECT {_VERSION_COLUMNS} FROM versions v JOIN blobs b ON b.id = v.blob "
                "WHERE v.path = ? ORDER BY v.id", (path,)).fetchall()
        return [Version(*row) for row in rows]

    def version(self, path: str, name: str) -> Version | None:
        with self.lock:
            row = self.conn.execute(
                f"SELECT {_VERSION_COLUMNS} FROM versions v JOIN blobs b ON b.id = v.blob "
                "WHERE v.path = ? AND v.name = ?", (path, name)).fetchone()
        return Version(*row) if row else None

    def deleted_at(self, path: str) -> int | None:
        """When ``path`` was deleted, if its newest record is a deletion."""
        with self.lock:
            latest = self._latest_row(path)
        return latest[1] if latest is not None and latest[0] is None else None

    def paths(self) -> list[str]:
        """Every path with at least one version kept."""
        with self.lock:
            return [r[0] for r in self.conn.execute(
                "SELECT DISTINCT path FROM versions WHERE blob IS NOT NULL ORDER BY path")]

    def digests_by_path(self) -> dict[str, frozenset[str]]:
        """The sha256 of every kept content, by each name it was ever kept under (pruned
        versions included, while the content is kept; SEVERAL_NAMES for content read from a
        file with hard links); cached until anyone (this process or another) changes the
        history."""
        with self.lock:
            generation = (self.conn.execute("PRAGMA data_version").fetchone()[0], self.conn.total_changes())
            if self._digests is None or self._digests[0] != generation:
                found: dict[str, set[str]] = {}
                for path, digest in self.conn.execute(
                        "SELECT h.path, b.sha256 FROM held h JOIN blobs b ON b.id = h.blob"):
                    found.setdefault(path, set()).add(digest)
                self._digests = (generation, {p: frozenset(d) for p, d in found.items()})
            return self._digests[1]

    def deleted_paths(self) -> list[tuple[str, int]]:
        """(path, deleted at) of files whose newest record is a deletion and that have versions."""
        with self.lock:
            rows = self.conn.execute(
                "SELECT v.path, v.time_ns FROM versions v WHERE v.blob IS NULL AND v.id = "
                "(SELECT MAX(id) FROM versions w WHERE w.path = v.path) AND EXISTS "
                "(SELECT 1 FROM versions x WHERE x.path = v.path AND x.blob IS NOT NULL) ORDER BY v.path").fetchall()
        return [(r[0], r[1]) for r in rows]

    def content(self, blob: int) -> bytes:
        """The bytes of a stored content: its chain of appends read in one query, oldest first."""
        with self.lock:
            rows = self.conn.execute(_CHAIN, (blob,)).fetchall()
        if not rows or rows[0][0] is not None:
            raise HistoryError(f"version content {blob} (or what it stands on) is missing from {self.path}")
        return b"".join(zlib.decompress(row[1]) for row in rows)

    def size_bytes(self) -> int:
        """What the kept content takes (compressed), without SQLite's own overhead."""
        with self.lock:
            return int(self.conn.execute("SELECT COALESCE(SUM(LENGTH(data)), 0) FROM blobs").fetchone()[0])

    def _used_bytes(self) -> int:
        """The pages in use, which hold the kept content and more: a bound read without a scan."""
        with self.lock:
            pages = self.conn.execute("PRAGMA page_count").fetchone()[0] - \
                self.conn.execute("PRAGMA freelist_count").fetchone()[0]
            return int(pages) * int(self.conn.execute("PRAGMA page_size").fetchone()[0])

    def file_bytes(self) -> int:
        """What the history takes on disk: the database and its write-ahead log."""
        total = 0
        for suffix in ("", "-wal"):
            try:
                total += os.stat(str(self.path) + suffix).st_size
            except OSError:
                pass
        return total

    def counts(self) -> tuple[int, int]:
        """(versions, files with versions)."""
        with self.lock:
            row = self.conn.execute(
                "SELECT COUNT(*), COUNT(DISTINCT path) FROM versions WHERE blob IS NOT NULL").fetchone()
        return int(row[0]), int(row[1])

    # -- writing -------------------------------------------------------------------------------

    def add(self, path: str, data: bytes, time_ns: int, who: Provenance,
            fingerprint: str | None = None, linked: bool = False, digest: str | None = None,
            on: tuple[int, int] | None = None) -> Version | None:
        """Record ``data`` as the newest version of ``path``; None if that is what it holds
        already.  ``fingerprint`` is what the file looked like when ``data`` was read; ``linked``:
        the file had other names (hard links) then.  ``on`` = (blob, size): ``data`` is only what
        was appended to that content (``digest`` then names the whole), which must still be the
        path's newest version, else HistoryError."""
        digest = digest or hashlib.sha256(data).hexdigest()
        with self.transaction():
            latest = self._latest_row(path)
            if on is not None and (latest is None or latest[0] != on[0]):
                raise HistoryError(f"{path}: its newest version changed meanwhile")
            if latest is not None and latest[0] is not None:
                same = self.conn.execute("SELECT sha256 FROM blobs WHERE id = ?", (latest[0],)).fetchone()
                if same and same[0] == digest:
                    if fingerprint is not None:
                        self.conn.execute("INSERT OR REPLACE INTO seen(path, fingerprint) VALUES (?, ?)",
                                          (path, fingerprint))
                    return None
            blob = self._blob(path, data, digest) if on is None else self._appended(on, data, digest)
            # Names sort in the order the versions were made, even if a clock stepped back.
            if latest is not None:
                time_ns = max(time_ns, latest[1])
            # Counting on from the newest name, a forgotten one included (see version_name).
            newest = self.conn.execute(
                "SELECT name FROM (SELECT id, name FROM versions WHERE path = ? AND name IS NOT NULL "
                "UNION ALL SELECT version, name FROM forgotten WHERE path = ?) ORDER BY id DESC LIMIT 1",
                (path, path)).fetchone()
            name = version_name(path, time_ns, newest[0] if newest else None)
            self.conn.execute(
                "INSERT INTO versions(path, name, time_ns, blob, uid, pid, process, via) VALUES (?,?,?,?,?,?,?,?)",
                (path, name, time_ns, blob, who.uid, who.pid, who.process, who.via))
            version_id = self.conn.last_insert_rowid()
            self.conn.executemany("INSERT OR IGNORE INTO held(blob, path) VALUES (?, ?)",
                                  [(blob, path)] + ([(blob, SEVERAL_NAMES)] if linked else []))
            if fingerprint is not None:
                self.conn.execute("INSERT OR REPLACE INTO seen(path, fingerprint) VALUES (?, ?)", (path, fingerprint))
            else:
                self.conn.execute("DELETE FROM seen WHERE path = ?", (path,))
            found = self.version(path, name)
        assert found is not None and found.id == version_id
        return found

    def _appended(self, on: tuple[int, int], tail: bytes, digest: str) -> int:
        """A content made of ``on``'s (blob, size) and ``tail`` after it, stored as the tail."""
        row = self.conn.execute("SELECT id FROM blobs WHERE sha256 = ?", (digest,)).fetchone()
        if row:
            return int(row[0])
        base = self.conn.execute("SELECT chain FROM blobs WHERE id = ?", (on[0],)).fetchone()
        if base is None or base[0] >= MAX_CHAIN:
            data = self.content(on[0]) + tail  # the chain is cut here: stored whole
            self.conn.execute("INSERT INTO blobs(sha256, size, base, chain, data) VALUES (?,?,NULL,1,?)",
                              (digest, len(data), compress(data, self._bulk)))
        else:
            self.conn.execute("INSERT INTO blobs(sha256, size, base, chain, data) VALUES (?,?,?,?,?)",
                              (digest, on[1] + len(tail), on[0], base[0] + 1, compress(tail, self._bulk)))
        return int(self.conn.last_insert_rowid())

    def _blob(self, path: str, data: bytes, digest: str) -> int:
        row = self.conn.execute("SELECT id FROM blobs WHERE sha256 = ?", (digest,)).fetchone()
        if row:
            return int(row[0])
        # The newest version of this path that is content (a deleted file's last one counts: a
        # log deleted and recreated with more lines still starts with it).
        base = self.conn.execute(
            "SELECT b.id, b.size, b.sha256, b.chain FROM versions v JOIN blobs b ON b.id = v.blob "
            "WHERE v.path = ? ORDER BY v.id DESC LIMIT 1", (path,)).fetchone()
        if (base is not None and 0 < base[1] < len(data) and base[3] < MAX_CHAIN
                and hashlib.sha256(memoryview(data)[: base[1]]).hexdigest() == base[2]):
            self.conn.execute("INSERT INTO blobs(sha256, size, base, chain, data) VALUES (?,?,?,?,?)",
                              (digest, len(data), base[0], base[3] + 1,
                               compress(memoryview(data)[base[1]:], self._bulk)))
        else:
            self.conn.execute("INSERT INTO blobs(sha256, size, base, chain, data) VALUES (?,?,NULL,1,?)",
                              (digest, len(data), compress(data, self._bulk)))
        return int(self.conn.last_insert_rowid())

    def deleted(self, path: str, time_ns: int, who: Provenance) -> bool:
        """Record that ``path`` is gone (its versions stay); False if it had none or is gone already."""
        with self.transaction():
            latest = self._latest_row(path)
            if latest is None or latest[0] is None:
                return False
            self.conn.execute(
                "INSERT INTO versions(path, name, time_ns, blob, uid, pid, process, via) VALUES (?,NULL,?,NULL,?,?,?,?)",
                (path, max(time_ns, latest[1]), who.uid, who.pid, who.process, who.via))
            self.conn.execute("DELETE FROM seen WHERE path = ?", (path,))
        return True

    # -- forgetting on purpose -------------------------------------------------------------------

    def containing(self, needle: bytes) -> list[Version]:
        """Every version (of any path, deleted ones included) whose bytes contain ``needle``,
        by path and age.  Each stored piece is read once: a content contains ``needle`` if what
        it stands on does, or if the piece does, with the end of what it stands on before it
        (``needle`` may straddle the seam)."""
        if not needle:
            raise HistoryError("the text to look for is empty")
        overlap = len(needle) - 1
        hits: set[int] = set()
        tails: dict[int, bytes] = {}
        with self.lock:
            for blob, base, data in self.conn.execute("SELECT id, base, data FROM blobs ORDER BY id"):
                piece = zlib.decompress(data)  # a base is always older than what stands on it
                joined = piece if base is None else tails.get(base, b"") + piece
                if needle in joined or (base is not None and base in hits):
                    hits.add(blob)
                tails[blob] = joined[max(0, len(joined) - overlap):] if overlap else b""
            rows = self.conn.execute(
                f"SELECT {_VERSION_COLUMNS} FROM versions v JOIN blobs b ON b.id = v.blob "
                "ORDER BY v.path, v.id").fetchall()
        return [Version(*row) for row in rows if row[6] in hits]

    def holding(self, blobs: set[int]) -> list[Version]:
        """The versions whose content is one of ``blobs``."""
        with self.lock:
            rows = self.conn.execute(
                f"SELECT {_VERSION_COLUMNS} FROM versions v JOIN blobs b ON b.id = v.blob "
                "ORDER BY v.path, v.id").fetchall()
        return [Version(*row) for row in rows if row[6] in blobs]

    def forgotten(self, path: str) -> list[Forgotten]:
        with self.lock:
            rows = self.conn.execute(
                "SELECT version, path, name, time_ns, forgotten_ns, uid, pid, process, via FROM forgotten "
                "WHERE path = ? ORDER BY version", (path,)).fetchall()
        return [Forgotten(*row) for row in rows]

    def forget(self, ids: list[int], time_ns: int, who: Provenance) -> tuple[list[Forgotten], bool]:
        """Forget the versions ``ids``: their records go (a record that they were forgotten,
        when and by ``who``, takes their place), and so does content no other version holds;
        content that stood on it is stored whole first, so every other version reads back as
        before.  Then the database is rewritten (VACUUM, with deleted cells zeroed meanwhile)
        and its write-ahead log emptied, so no page of the file, in use or free, keeps the
        bytes.  Returns what was forgotten, and whether the log could be emptied (not while
        another process reads an older state of the history for longer than the busy timeout)."""
        with self.lock:
            before = int(self.conn.execute("PRAGMA secure_delete").fetchone()[0])
            self.conn.execute("PRAGMA secure_delete=ON")  # until the VACUUM: a crash leaves zeros, not text
            try:
                with self.transaction():
                    rows = []
                    for chunk in range(0, len(ids), 500):
                        part = ids[chunk : chunk + 500]
                        rows += self.conn.execute(
                            "SELECT id, path, name, time_ns FROM versions WHERE blob IS NOT NULL AND "
                            f"id IN ({','.join('?' * len(part))})", part).fetchall()
                    gone = [Forgotten(r[0], r[1], r[2], r[3], time_ns, who.uid, who.pid, who.process, who.via)
                            for r in sorted(rows)]
                    self.conn.executemany(
                        "INSERT INTO forgotten(version, path, name, time_ns, forgotten_ns, uid, pid, process, via) "
                        "VALUES (?,?,?,?,?,?,?,?,?)",
                        [(f.version, f.path, f.name, f.time_ns, f.forgotten_ns, f.uid, f.pid, f.process, f.via)
                         for f in gone])
                    self.conn.executemany("DELETE FROM versions WHERE id = ?", [(f.version,) for f in gone])
                    # A file with no content left has nothing for a deletion record to be about.
                    self.conn.execute(
                        "DELETE FROM versions WHERE blob IS NULL AND NOT EXISTS "
                        "(SELECT 1 FROM versions w WHERE w.path = versions.path AND w.blob IS NOT NULL)")
                    self._collect()
                # Even with nothing left to forget: asked again, it finishes what an interrupted
                # or busy run could not.
                self.conn.execute("VACUUM")  # free pages and cells moved earlier may hold old copies
                busy = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            finally:
                self.conn.execute(f"PRAGMA secure_delete={before}")
        return gone, not busy

    # -- pruning -------------------------------------------------------------------------------

    def prune(self, older_than_ns: int, max_bytes: int) -> int:
        """Drop versions replaced before ``older_than_ns`` (a version's age counts from when the
        next one of its file was made: text that stood unchanged for months and was then
        clobbered is kept as long as text replaced yesterday), then the oldest ones while the
        content takes more than ``max_bytes``; never the newest version of a path.  Returns how
        many versions went."""
        removed = 0
        with self.transaction():
            removed += self._drop("(SELECT MIN(w.time_ns) FROM versions w WHERE w.path = v.path AND w.id > v.id) < ?",
                                  (older_than_ns,))
            if removed:  # else nothing new to collect: a pass over every content, every PRUNE_EVERY_VERSIONS
                self._collect()
            self.conn.execute("DELETE FROM forgotten WHERE forgotten_ns < ?", (older_than_ns,))
        while self._used_bytes() > max_bytes and self.size_bytes() > max_bytes:
            with self.transaction():
                prunable = self.conn.execute(
                    "SELECT COUNT(*) FROM versions v WHERE v.blob IS NOT NULL AND v.id < "
                    "(SELECT MAX(id) FROM versions w WHERE w.path = v.path AND w.blob IS NOT NULL)").fetchone()[0]
                if not prunable:
                    break
                # The oldest tenth at a time: each round rewrites what the survivors stood on.
                oldest = [r[0] for r in self.conn.execute(
                    "SELECT id FROM versions v WHERE v.blob IS NOT NULL AND v.id < (SELECT MAX(id) FROM versions w "
                    "WHERE w.path = v.path AND w.blob IS NOT NULL) ORDER BY v.time_ns, v.id LIMIT ?",
                    (max(1, prunable // 10),))]
                removed += self._drop(f"v.id IN ({','.join('?' * len(oldest))})", tuple(oldest))
                self._collect()
        if removed:
            with self.lock:
                self.conn.execute("PRAGMA incremental_vacuum")
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return removed

    def _drop(self, condition: str, args: tuple) -> int:
        """Delete the versions matching ``condition`` except each path's newest content, and
        deletion records older than what is kept of their path."""
        keep = ("v.id = (SELECT MAX(id) FROM versions w WHERE w.path = v.path AND w.blob IS NOT NULL) "
                "OR (v.blob IS NULL AND v.id > (SELECT COALESCE(MAX(id), 0) FROM versions w WHERE "
                "w.path = v.path AND w.blob IS NOT NULL))")
        ids = [r[0] for r in self.conn.execute(f"SELECT v.id FROM versions v WHERE ({condition}) AND NOT ({keep})", args)]
        for chunk in range(0, len(ids), 500):
            part = ids[chunk : chunk + 500]
            self.conn.execute(f"DELETE FROM versions WHERE id IN ({','.join('?' * len(part))})", part)
        return len(ids)

    def _collect(self) -> None:
        """Delete content no version uses; content still in use that stood on deleted content
        is stored whole first."""
        live = {r[0] for r in self.conn.execute("SELECT DISTINCT blob FROM versions WHERE blob IS NOT NULL")}
        needed = set(live)
        # Content in use needs its whole chain unless it is rewritten whole; rewrite those whose
        # base is not itself in use, so everything else can go.
        orphans_below = [r[0] for r in self.conn.execute("SELECT id, base FROM blobs WHERE base IS NOT NULL")
                         if r[0] in live and r[1] not in live]
        for blob in orphans_below:
            whole = self._content_unlocked(blob)
            self.conn.execute("UPDATE blobs SET base = NULL, chain = 1, data = ? WHERE id = ?",
                              (zlib.compress(whole), blob))
        self._renumber_chains()
        doomed = [r[0] for r in self.conn.execute("SELECT id FROM blobs") if r[0] not in needed]
        for chunk in range(0, len(doomed), 500):
            part = doomed[chunk : chunk + 500]
            marks = ",".join("?" * len(part))
            self.conn.execute(f"DELETE FROM blobs WHERE id IN ({marks})", part)
            self.conn.execute(f"DELETE FROM held WHERE blob IN ({marks})", part)

    def _content_unlocked(self, blob: int) -> bytes:
        return self.content(blob)  # the lock is re-entrant

    def _renumber_chains(self) -> None:
        rows = self.conn.execute("SELECT id, base FROM blobs ORDER BY id").fetchall()
        chain: dict[int, int] = {}
        for blob, base in rows:  # a base is always older than what stands on it
            chain[blob] = 1 if base is None else chain.get(base, 0) + 1
        self.conn.executemany("UPDATE blobs SET chain = ? WHERE id = ? AND chain != ?",
                              [(n, b, n) for b, n in chain.items()])
