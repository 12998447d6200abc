"""The index as the embedding cache of the vectors it holds (schema 8), and the cache file as the
keeper of the rest.

A vector was kept twice: in the index (a chunk's, a unit's) and in the embedding cache beside it,
which alone was 13-16 times the text (float32, every vector ever made).  Now a vector is looked
up by its text's hash first among the index's own rows (:meth:`StoreReuse.held_vectors`: a chunk
or unit with that hash and a vector, made under the same model name, which the cache's key
holds: :func:`memfs.index.embedding.fingerprint.cache_model` of the row's file kind), then among
the rows of the index a rebuild replaces (``donor``), then in the cache file: ``vector_cache``
(this layout's, packed) and last ``embedding_cache`` (float32, written by indexes of schema 7).

So the cache keeps only what the index lacks: a reading that is no passage of its own (a
heading read once for the facts under it), a vector whose passage was replaced before it came,
and the vectors that leave the index (:meth:`StoreReuse._evict`): a file edited or removed, an
index rebuilt with other settings, each kept unless the same text stays.  A text that comes
back (an editor's save through a temporary name, an undo, the same settings again) is not
embedded again.

An index of schema 7 is a donor too (a rebuild converts it: its hash indexes are made then), and
the old table's entries the new index holds are dropped once it is built (:meth:`take_over`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Sequence

import apsw

from memfs.index.embedding.fingerprint import cache_model
from memfs.index.storage.sqlite.layout import HASH_INDEXES, log
from memfs.index.storage.sqlite.unitrows import HASH_SQL, pack_hash
from memfs.index.storage.vectors import as_packed
from memfs.workspace import FileKind

_BATCH = 400  # hashes a statement


class StoreReuse:
    """Store's vectors found again and kept (:mod:`memfs.index.storage.sqlite.store` composes it)."""

    def _models(self) -> tuple[str, dict[str, list[str]]]:
        """The provider that made this index's vectors, and for each model name the cache files
        them under, the kinds of file whose rows hold such vectors."""
        built = self.fingerprint or {}
        provider = str(built.get("provider") or "")
        if provider in ("", "none"):
            return "", {}
        mode, base = str(built.get("readings", "whole")), str(built.get("model") or "")
        models: dict[str, list[str]] = {}
        for kind in FileKind:
            models.setdefault(cache_model(mode, base, kind), []).append(kind.value)
        return provider, models

    def _hash_indexes(self) -> None:
        """The indexes :meth:`held_vectors` finds rows by, made on an index of schema 7 the first
        time it is asked (a rebuild reading its vectors)."""
        if getattr(self, "_hashes_ready", False):
            return
        with self.lock:
            have = {str(r[0]) for r in self.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
            missing = [sql for name, sql in HASH_INDEXES.items() if name not in have]
        if missing:
            with self._writing():
                for sql in missing:
                    self.conn.execute(sql)
        self._hashes_ready = True

    def held_vectors(self, provider: str, model: str, hashes: Iterable[str]) -> dict[str, bytes]:
        """The vectors this index holds of these texts (hex hashes), made by ``provider`` under the
        cache's ``model`` name, as the index keeps them (packed; a chunk's float32 in an index of
        schema 7, a unit's float16 in one older still)."""
        built, models = self._models()
        kinds = models.get(model)
        wanted = list(dict.fromkeys(hashes))
        if provider != built or not kinds or not wanted or not self.has_vectors:
            return {}
        self._hash_indexes()
        # One row per text asked, the first found: a line that recurs (a heading, a quoted turn)
        # is held by as many units as files hold it, and taking every one of them cost a close of
        # a small note ~4 ms at 20k units (issue #45); ``LIMIT 1`` stops at the first.
        scope, join = ("", "") if len(kinds) == len(FileKind) else (
            f" AND f.kind IN ({','.join('?' * len(kinds))})", " CROSS JOIN files f ON f.path = c.path")
        vectors = (f"CROSS JOIN {self._vector_table} v ON v.rowid = c.id", "v.vector" if self.packed else "v.embedding")
        chunk = (f"SELECT {vectors[1]} FROM chunks c INDEXED BY chunks_hash{join} {vectors[0]} WHERE "
                 f"substr(c.hash, 1, 16) = substr(a.hex, 1, 16) AND c.hash = a.hex AND c.embedded = 1{scope} LIMIT 1")
        unit = ("SELECT u.vector FROM units u INDEXED BY units_hash CROSS JOIN chunks c ON c.id = u.chunk_id"
                f"{join} WHERE substr(u.hash, 1, 8) = substr(a.{{0}}, 1, 8) AND u.hash = a.{{0}} AND u.vector IS NOT NULL"
                f"{scope} LIMIT 1")
        extra = tuple(kinds) if scope else ()
        found: dict[str, bytes] = {}
        with self.lock:
            for begin in range(0, len(wanted), _BATCH):
                part = wanted[begin : begin + _BATCH]
                rows = ",".join("(?, ?)" for _ in part)
                # A unit's hash is packed, or hex in an older index: both forms are asked.
                sql = (f"WITH a(hex, packed) AS (VALUES {rows}) SELECT a.hex, coalesce(({chunk}), "
                       f"({unit.format('packed')}), ({unit.format('hex')})) FROM a")
                args = [x for h in part for x in (h, pack_hash(h))] + [*extra, *extra, *extra]  # in the text's order
                for digest, blob in self.conn.execute(sql, args):
                    if blob is not None:
                        found[str(digest)] = bytes(blob)
        return found

    def _cached_packed(self, provider: str, model: str, wanted: list[str]) -> dict[str, bytes]:
        """:meth:`cached_vectors` of an index of schema 8 (see the module's docstring), packed."""
        dims = self.dims
        found = {h: as_packed(v, dims) if dims else v for h, v in self.held_vectors(provider, model, wanted).items()}
        rest = [h for h in wanted if h not in found]
        if rest and self.donor is not None:
            found.update((h, as_packed(v, dims or self.donor.dims))
                         for h, v in self.donor.held_vectors(provider, model, rest).items())
            rest = [h for h in rest if h not in found]
        with self.lock:
            for begin in range(0, len(rest), _BATCH):
                part = rest[begin : begin + _BATCH]
                keys = {pack_hash(h): h for h in part}
                for digest, blob in self.conn.execute(
                        f"SELECT hash, vector FROM cache.vector_cache WHERE provider = ? AND model = ? AND hash IN "
                        f"({','.join('?' * len(keys))})", (provider, model, *keys)):
                    found[keys[digest]] = bytes(blob)
            rest = [h for h in rest if h not in found]
            if rest and self._legacy_cache():
                for begin in range(0, len(rest), _BATCH):
                    part = rest[begin : begin + _BATCH]
                    for digest, size, blob in self.conn.execute(
                            f"SELECT hash, dims, vector FROM cache.embedding_cache WHERE provider = ? AND model = ? "
                            f"AND hash IN ({','.join('?' * len(part))})", (provider, model, *part)):
                        found[str(digest)] = as_packed(bytes(blob), dims or int(size))
        return found

    def _legacy_cache(self) -> bool:
        """Whether the cache file has the table of schema 7's indexes (made by them, never by 8)."""
        return self.conn.execute("SELECT 1 FROM cache.sqlite_master WHERE name = 'embedding_cache'").fetchone() is not None

    def _keep(self, conn: apsw.Connection, provider: str, model: str, items: Sequence[tuple[str, bytes]],
              now: float) -> None:
        """Vectors the index lacks into the cache (hex hashes; packed vectors)."""
        conn.executemany("INSERT OR REPLACE INTO cache.vector_cache(provider, model, hash, vector, created_at) "
                         "VALUES (?, ?, ?, ?, ?)", [(provider, model, pack_hash(h), v, now) for h, v in items])

    def _taken(self, conn: apsw.Connection, kind: str | None, hashes: Iterable[str]) -> None:
        """These texts' vectors are the index's now (rows of a file of ``kind``; None: any kind):
        the cache's copies of them go (a text removed and written back, a rebuild)."""
        provider, models = self._models()
        wanted = [pack_hash(h) for h in dict.fromkeys(hashes) if h]
        if not provider or not wanted:
            return
        for model, kinds in models.items():
            if kind is not None and kind not in kinds:
                continue
            for begin in range(0, len(wanted), _BATCH):
                part = wanted[begin : begin + _BATCH]
                conn.execute(f"DELETE FROM cache.vector_cache WHERE provider = ? AND model = ? AND hash IN "
                             f"({','.join('?' * len(part))})", (provider, model, *part))

    def _evict(self, conn: apsw.Connection, path: str | None, from_line: int = 0, keep: Iterable[str] = ()) -> None:
        """The vectors of the rows about to be deleted (``path``'s from ``from_line`` on; every
        row when ``path`` is None) kept in the cache, but for the texts in ``keep`` (the hashes
        the rows replacing them hold)."""
        provider, models = self._models()
        if not self.packed or not provider or not self.has_vectors:
            return
        kept = json.dumps(sorted(set(keep)))
        where = "c.path = ? AND c.start_line >= ?" if path is not None else "1"
        args: tuple[object, ...] = (path, from_line) if path is not None else ()
        now = time.time()
        for model, kinds in models.items():
            marks = ",".join("?" * len(kinds))
            conn.execute(
                "INSERT OR IGNORE INTO cache.vector_cache(provider, model, hash, vector, created_at) "
                "SELECT ?, ?, coalesce(unhex(c.hash), c.hash), v.vector, ? FROM chunks c CROSS JOIN files f "
                "ON f.path = c.path CROSS JOIN chunk_vectors v ON v.id = c.id "
                f"WHERE {where} AND c.embedded = 1 AND f.kind IN ({marks}) "
                "AND c.hash NOT IN (SELECT value FROM json_each(?))", (provider, model, now, *args, *kinds, kept))
            conn.execute(
                "INSERT OR IGNORE INTO cache.vector_cache(provider, model, hash, vector, created_at) "
                "SELECT ?, ?, CASE WHEN typeof(u.hash) = 'blob' THEN u.hash ELSE coalesce(unhex(u.hash), u.hash) END, "
                "u.vector, ? FROM chunks c CROSS JOIN files f ON f.path = c.path CROSS JOIN units u "
                f"ON u.chunk_id = c.id WHERE {where} AND u.vector IS NOT NULL AND f.kind IN ({marks}) "
                f"AND {HASH_SQL} NOT IN (SELECT value FROM json_each(?))", (provider, model, now, *args, *kinds, kept))

    def take_over(self, old: StoreReuse) -> None:
        """After a rebuild built this index from ``old`` (which it replaces): ``old``'s vectors
        this one does not hold kept in the cache (an index of schema 8), or, ``old`` being of
        schema 7 (its every vector in the old cache table already), the old table's entries
        this one holds dropped from it, its space given back when nobody else is using the cache."""
        provider, models = old._models()
        if not provider or not old.has_vectors:
            return
        now = time.time()
        if old.packed:
            with old.lock:
                rows = old.conn.execute(
                    "SELECT c.hash, v.vector, f.kind FROM chunks c CROSS JOIN files f ON f.path = c.path CROSS JOIN "
                    "chunk_vectors v ON v.id = c.id WHERE c.embedded = 1 UNION ALL "
                    f"SELECT {HASH_SQL}, u.vector, f.kind FROM units u CROSS JOIN chunks c ON c.id = u.chunk_id "
                    "CROSS JOIN files f ON f.path = c.path WHERE u.vector IS NOT NULL").fetchall()
            for model, kinds in models.items():
                mine = [(str(h), bytes(v)) for h, v, kind in rows if kind in kinds]
                for begin in range(0, len(mine), 5_000):
                    part = mine[begin : begin + 5_000]
                    held = self.held_vectors(provider, model, [h for h, _ in part])
                    with self._writing() as conn:
                        self._keep(conn, provider, model, [(h, v) for h, v in part if h not in held], now)
            return
        provider, models = self._models()  # the entries of what this index holds, as it made them
        if not provider or not self._legacy_cache():
            return
        dropped = 0
        for model in models:
            with self.lock:
                hashes = [str(r[0]) for r in self.conn.execute(
                    f"SELECT c.hash FROM chunks c WHERE c.embedded = 1 UNION SELECT {HASH_SQL} FROM units u "
                    "CROSS JOIN chunks c ON c.id = u.chunk_id WHERE u.vector IS NOT NULL")]
            for begin in range(0, len(hashes), 5_000):
                part = list(self.held_vectors(provider, model, hashes[begin : begin + 5_000]))
                with self._writing() as conn:
                    conn.executemany("DELETE FROM cache.embedding_cache WHERE provider = ? AND model = ? AND hash = ?",
                                     [(provider, model, h) for h in part])
                    dropped += len(part)
        if dropped:
            self._vacuum_cache(dropped)

    def _vacuum_cache(self, dropped: int) -> None:
        """The cache file rewritten without the pages its dropped entries held (VACUUM); left for
        another time if another process is using it."""
        with self.lock:
            self.conn.setbusytimeout(200)
            try:
                self.conn.execute("VACUUM cache")
                self.conn.execute("PRAGMA cache.wal_checkpoint(TRUNCATE)")
            except (apsw.BusyError, apsw.LockedError) as exc:
                log.info("embedding cache %s: %d entries the index holds dropped; its space is reused, not given "
                         "back now (%s)", self.cache_path, dropped, exc)
            finally:
                self.conn.setbusytimeout(10_000)
