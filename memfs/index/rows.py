"""An index's rows as they are, for copying one store into another (:mod:`memfs.index.transfer`):
a file's record with its chunks, units and vectors, and embedding cache entries.  Ids, vectors and
states are carried unchanged, so the copy answers a search exactly as the original did and
nothing is embedded again.
"""

from __future__ import annotations

from dataclasses import dataclass

from memfs.index.store import FileRecord, StoredUnit

PENDING, EMBEDDED, PROVISIONAL_STATE = 0, 1, 2  # a chunk's state (SQLite's chunks.embedded)


@dataclass(frozen=True)
class ChunkRow:
    """A chunk with all its store keeps of it: ``vector`` is its float32 bytes (None: not
    embedded yet, or provisional)."""

    id: int
    path: str
    start_line: int
    end_line: int
    hash: str
    text: str
    state: int  # PENDING, EMBEDDED or PROVISIONAL_STATE
    private: bool
    jsonl: bool
    first_day: str | None
    last_day: str | None
    chat_id: str
    chat_title: str
    vector: bytes | None


@dataclass(frozen=True)
class FileRows:
    """One indexed file: its record (and when it was indexed), its chunks and their units (a
    unit's ``vector`` packed as the stores keep it, :func:`memfs.index.vectors.pack_unit_vector`)."""

    record: FileRecord
    indexed_at: float
    chunks: tuple[ChunkRow, ...]
    units: tuple[StoredUnit, ...]


@dataclass(frozen=True)
class CachedVector:
    """An embedding cache entry.  ``private``: the vector of private text (PostgreSQL keeps every
    entry in the tenant's own cache, a private one out of the tenant's shared-mode login's view)."""

    provider: str
    model: str
    hash: str
    vector: bytes  # float32
    private: bool = False
