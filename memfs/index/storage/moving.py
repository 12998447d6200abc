"""Copying the index of one (workspace, agent) from one store to another (SQLite to PostgreSQL and
back), through :class:`memfs.index.storage.interface.IndexStore` alone: files, chunks, units, their vectors
and the embedding cache entries of their texts (and of the readings their vectors are made of), with their ids, so the copy answers every search as
the original does, and nothing is embedded again (no model is asked for anything here).

The target is emptied first, then filled in batches of files, one transaction each; a copy run
again gives the same rows.  Only the cache entries of this index's own texts go along: a SQLite
cache is shared by every workspace of its user, and a vector of another workspace's text must not
reach the tenant's cache on the server.  Entries of private text go to the target as private.
(PostgreSQL keeps every entry in the tenant's own cache, guarded like its other rows: a move in
or out carries the tenant's entries and nobody else's.)
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from memfs.index.embedding import readings
from memfs.index.embedding.backlog import RATE_KEY
from memfs.index.embedding.fingerprint import cache_model, fingerprint_change, text_hash
from memfs.index.storage.interface import IndexStore
from memfs.index.storage.records import CachedVector
from memfs.workspace import FileKind

BATCH_CHUNKS = 2_000  # chunks per transaction (a file with more is one batch of its own)
CACHE_BATCH = 5_000  # cache entries per transaction
CARRIED_META = ("reconciled_at", RATE_KEY)  # what else of the index's metadata goes along

Progress = Callable[[int, int], None]


class TransferError(RuntimeError):
    """The copy cannot be made (the message says why, in one line)."""


@dataclass(frozen=True)
class Transferred:
    files: int
    chunks: int
    units: int
    vectors: int  # chunk and unit vectors carried (none made)
    cached: int  # embedding cache entries carried
    seconds: float


def check_settings(source: IndexStore, wanted: dict[str, object], name: str) -> dict[str, object]:
    """The settings ``source`` was built with, if they are ``wanted`` (the fingerprint the target's
    configuration asks for); else TransferError saying what differs.  ``wanted`` without dims
    (a model whose size is known once it is loaded) takes the source's: the model is not loaded
    to find out."""
    built = source.fingerprint
    if built is None:
        raise TransferError(f"the {name} index records no settings (it was never built): nothing to move; "
                            "run `memfs index` first")
    if not wanted.get("dims"):
        wanted = {**wanted, "dims": built.get("dims")}
    if built != wanted:
        raise TransferError(f"the {name} index was built with other settings ({fingerprint_change(built, wanted)}): "
                            "moving it would keep vectors these settings would not make; run `memfs index --rebuild` "
                            "on it first, or move it with the settings it was built with")
    return built


def transfer(source: IndexStore, target: IndexStore, progress: Progress | None = None) -> Transferred:
    """Make ``target`` a copy of ``source`` (see the module's docstring)."""
    began = time.monotonic()
    built = source.fingerprint
    if built is None:
        raise TransferError("the source index records no settings: nothing to move")
    if not source.sees_private:
        raise TransferError(f"{source.location} is read through a login that cannot see private rows: move it "
                            "with the agent's own login")
    records = source.files()
    if any(r.private for r in records) and not target.sees_private:
        raise TransferError(f"{target.location} is a login that may not hold private rows (a shared-mode login): "
                            "move with the agent's own login (the DSN `memfs pg grant` printed)")
    target.clear()
    target.set_fingerprint(built, int(built.get("dims") or 0))  # type: ignore[call-overload]
    total = sum(r.chunks for r in records)
    done = chunks = units = vectors = 0
    public: set[str] = set()
    private: set[str] = set()
    for batch in _batches(records):
        rows = source.export_files([r.path for r in batch])
        target.import_files(rows)
        for file_rows in rows:
            hashes = private if file_rows.record.private else public
            hashes.update(c.hash for c in file_rows.chunks if c.hash)
            hashes.update(u.hash for u in file_rows.units if u.hash)
            # Read once (Markdown by default), the cache holds the readings a vector is made of (a
            # unit's text, its heading path), not the unit's own text with its headings.
            hashes.update(text_hash(t) for u in file_rows.units for t in readings.unit_readings(u))
            chunks += len(file_rows.chunks)
            units += len(file_rows.units)
            vectors += sum(c.vector is not None for c in file_rows.chunks)
            vectors += sum(u.vector is not None for u in file_rows.units)
        done += sum(r.chunks for r in batch)
        if progress:
            progress(done, total)
    names = {cache_model(str(built.get("readings", "whole")), str(built.get("model", "")), kind) for kind in FileKind}
    cached = _carry_cache(source, target, str(built.get("provider", "")), names,
                          public, private) if built.get("provider") not in (None, "", "none") else 0
    for key in CARRIED_META:
        value = source.get_meta(key)
        if value is not None:
            target.set_meta(key, value)
    return Transferred(len(records), chunks, units, vectors, cached, time.monotonic() - began)


def _batches(records: list) -> list[list]:
    """Files in groups of about BATCH_CHUNKS chunks (in the source's path order)."""
    found: list[list] = []
    size = 0
    for record in records:
        if not found or (found[-1] and size + record.chunks > BATCH_CHUNKS):
            found.append([])
            size = 0
        found[-1].append(record)
        size += record.chunks
    return found


def _carry_cache(source: IndexStore, target: IndexStore, provider: str, names: set[str], public: set[str],
                 private: set[str]) -> int:
    """The cache entries of this index's texts made by its model the ways this index reads (the
    names its reading files vectors under: ``model``, ``model+once``, ...; a shared cache holds the
    same texts read other ways by other indexes); private when any private file holds the text
    (public and private text alike is then kept the private way)."""
    wanted = sorted(public | private)
    carried = 0
    for begin in range(0, len(wanted), CACHE_BATCH):
        entries = [CachedVector(e.provider, e.model, e.hash, e.vector, e.private or e.hash in private)
                   for e in source.cache_entries(provider, names, wanted[begin : begin + CACHE_BATCH])]
        if entries:
            target.put_cache_entries(entries)
        carried += len(entries)
    return carried
