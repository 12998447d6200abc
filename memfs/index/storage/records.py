"""What both stores (SQLite and PostgreSQL) hold and hand out, defined once: a file's record, a
stored chunk and unit, and an index's rows as they are for copying one store into another
(:mod:`memfs.index.storage.moving`): a file's record with its chunks, units and vectors, and
embedding cache entries.  Ids, vectors and states are carried unchanged, so the copy answers a
search exactly as the original did and nothing is embedded again.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memfs.index.text.units import plain
from memfs.workspace import FileKind

# files.hash of a file whose chunks are provisional starts with this: a reconcile (the next
# start, if the daemon stopped before the exact chunks were made) sees a hash that differs from
# the file's and indexes it again, exactly.
PROVISIONAL_HASH = "provisional:"

# The kinds of file a store records, and (for SQL) those read as messages.
KINDS = frozenset(kind.value for kind in FileKind)
JSONL_KINDS_SQL = ", ".join(f"'{kind.value}'" for kind in FileKind if kind.is_jsonl)
# A file's record as both stores' ``files`` tables hold it, in FileRecord's order.
FILE_COLUMNS = "path, kind, hash, mtime, size, chunks, error, private, warning, tail_hash, resume_line, resume_offset"

# A scoped search (in=, after=, before=) compares this many chunks one by one at most; beyond,
# it filters the nearest neighbours of the whole index instead.
SCOPED_EXACT = 20_000


@dataclass(frozen=True)
class FileRecord:
    path: str
    kind: str
    hash: str
    mtime: float
    size: int
    chunks: int
    error: str
    private: bool = False
    warning: str = ""  # indexed, but not all of it is text (bad bytes shown as U+FFFD)
    tail_hash: str = ""  # JSONL: hash of the last bytes indexed, to tell an append from a rewrite
    resume_line: int = 0  # JSONL: the first line of the last chunk, where an append re-chunks from
    resume_offset: int = 0  # JSONL: that line's byte offset


@dataclass(frozen=True)
class StoredChunk:
    id: int
    path: str
    start_line: int
    end_line: int
    hash: str
    text: str
    jsonl: bool = False  # a chunk of messages (its lines are messages, not the file's lines)
    chat_id: str = ""  # a chunk of messages: its chat (sync) or session (transcript)
    chat_title: str = ""


@dataclass(frozen=True)
class StoredUnit:
    id: int
    chunk_id: int
    start_line: int
    end_line: int
    hash: str  # of the text the embedding model reads (context + text)
    text: str
    context: str
    vector: bytes | None  # as vectors.pack_unit_vector packs it (float16 in older indexes); None until embedded
    reading: str = ""  # what the model reads instead of context and text (memfs.index.text.units)

    @property
    def keyword_text(self) -> str:
        return plain(f"{self.context}\n{self.text}" if self.context else self.text)

    @property
    def embedding_text(self) -> str:
        return self.reading or self.keyword_text

    @classmethod
    def from_rows(cls, rows: Iterable[Sequence[object]]) -> list[StoredUnit]:
        """Units from rows of their fields in order (the hash as text or as its 32 bytes), made
        without ``__init__``: a search reads ~900, and a frozen dataclass's ``__init__`` sets each
        field through ``object.__setattr__`` (2.5 us a unit; 1 us this way)."""
        make, names = object.__new__, _UNIT_FIELDS
        out = []
        for row in rows:
            unit = make(cls)
            fields = unit.__dict__
            fields.update(zip(names, row))
            digest = fields["hash"]
            if digest.__class__ is bytes:  # as schema 7 keeps it (see _UNITS_AS_STORED)
                fields["hash"] = digest.hex()
            out.append(unit)
        return out


_UNIT_FIELDS = tuple(field.name for field in dataclasses.fields(StoredUnit))


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
    unit's ``vector`` packed as the stores keep it, :func:`memfs.index.storage.vectors.pack_unit_vector`)."""

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


def file_record(row: Sequence[object]) -> FileRecord:
    """A FileRecord from a row of FILE_COLUMNS (``private`` as the store keeps a boolean)."""
    return FileRecord(*row[:7], bool(row[7]), *row[8:])  # type: ignore[arg-type]


def status_counts(files: Sequence[int], chunks: Sequence[int], units: Sequence[int],
                  owed: Iterable[Sequence[object]], cached: int, has_vectors: bool) -> dict[str, int]:
    """What ``counts()`` answers, from what each store counted its own way: ``files`` (all, with a
    problem), ``chunks`` (all, waiting, provisional), ``units`` (all, waiting), ``owed`` (the
    provisional files: path, whether JSONL, their lines) and ``cached`` (embedding cache entries)."""
    owed = list(owed)
    return {
        "files": int(files[0]),
        "skipped": int(files[1]),
        "chunks": int(chunks[0]),
        "units": int(units[0]),
        "pending": int(chunks[1]) + int(units[1]) if has_vectors else 0,
        "provisional_chunks": int(chunks[2]),
        "provisional_lines": sum(int(r[2]) for r in owed),  # type: ignore[call-overload]
        "provisional_jsonl_lines": sum(int(r[2]) for r in owed if r[1]),  # type: ignore[call-overload]
        "cached_embeddings": int(cached),
    }
