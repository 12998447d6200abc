"""Keeping the store in step with the workspace files.

Indexing a file has two phases.  ``index_file`` reads, chunks and stores the text with its FTS5
entries in one transaction (fast, so a keyword search sees a write at once) and takes vectors of
unchanged chunks from the embedding cache.  ``embed_pending`` computes the missing vectors later,
off any latency-critical path.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import errno
import functools
import hashlib
import logging
import os
import re
import stat
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memfs.lazy import lazy_module

np = lazy_module("numpy")

from memfs import longpath
from memfs.cleantext import clean_text, describe
from memfs.config import SHARED_MODE, Config
from memfs.index.embedding import late as latechunks
from memfs.index.embedding import readings
from memfs.index.embedding.backlog import RATE_KEY_ALL, RateMeter
from memfs.index.embedding.fingerprint import cache_model, index_reading, text_hash, unit_key
from memfs.index.embedding.late import read_as
from memfs.index.embedding.providers import INPUT_TOKENS, Provider
from memfs.index.embedding.turns import EmbedTurns
from memfs.index.storage.records import PROVISIONAL_HASH, FileRecord, StoredChunk, StoredUnit
from memfs.index.storage.sqlite.store import Store
from memfs.index.storage.vectors import as_float32
from memfs.index.text import chunking, secrets
from memfs.index.text.keywords import fts_body
from memfs.index.text.messages import parse_jsonl, parse_transcript, session_header, transcript_runtime
from memfs.index.text.units import plain
from memfs.privacy import Privacy, open_resolved, opened_at, resolve_within
from memfs.workspace import (
    LONG_TERM_NAMES,
    FileKind,
    classify,
    daily_date,
    is_memory,
    iter_memory_files,
    name_is_text,
    shown,
    timezone,
    today,
)

log = logging.getLogger(__name__)

Progress = Callable[[int, int], None]
# What the embedding queue takes before older history: today and yesterday, the days the context
# bundle reads.
RECENT_DAYS = 2


@dataclass(frozen=True)
class Outcome:
    path: str
    action: str  # indexed | unchanged | skipped | removed | missing
    chunks: int = 0
    pending: int = 0
    reason: str = ""
    provisional: bool = False  # keyword rows only: Indexer.complete makes the exact chunks


class Indexer:
    def __init__(self, cfg: Config, store: Store, provider: Callable[[], Provider | None],
                 identity: Callable[[], tuple[str, str, int]], turns: EmbedTurns | None = None) -> None:
        """``provider`` gives the embedding provider when it is first needed: loading the model
        costs a quarter of a second, and only embedding needs it.  ``identity`` is (provider,
        model, dims) as the configuration says, which keys the embedding cache: indexing a file
        (a `memfs sync`, a write) looks vectors up and chunks without loading the model.
        ``turns``: the index's embedding turns, shared with the other processes using it (see
        :mod:`memfs.index.embedding.turns`); None: this process is the index's only user."""
        self.cfg = cfg
        self.turns = turns
        self.store = store
        self.provider_source = provider
        self.identity_source = identity
        self.privacy = Privacy(cfg.privacy.private_paths, SHARED_MODE)
        self.meter: RateMeter | None = None  # batches without private text (what shared readers are told)
        self.meter_all: RateMeter | None = None  # every batch (what the main mode is told)

    @property
    def provider(self) -> Provider | None:
        return self.provider_source()

    @property
    def embeds(self) -> bool:
        return self.provider is not None and self.provider.dims > 0

    def reading(self) -> str:
        """How this index reads its passages (:func:`index_reading`): as it was built."""
        return index_reading(self.store.fingerprint, self.cfg, self.identity_source()[0])

    def _read(self, rel: str, previous: FileRecord | None) -> _Read:
        """The file's text (or None, with the reason in the record).  Symlinks are resolved
        inside the workspace only (never through a path outside it), the result opened without
        following links and checked to be what was resolved, so a link swapped in meanwhile
        cannot slip another file's text in under this name.  A file with more than one name goes
        to the private part of the index (it may be a private file's other name).  A JSONL file
        that only grew since ``previous`` is read from its last chunk on."""
        kind = classify(rel, self.cfg.index.extra_paths)
        workspace = self.cfg.workspace
        resolved = resolve_within(workspace, rel)
        if resolved is None:
            st = longpath.lstat(workspace / rel)
            reason = "skipped: a symlink that leads out of the workspace"
            return _Read(None, FileRecord(rel, kind.value, f"skip:{reason}:{st.st_mtime_ns}", st.st_mtime, st.st_size,
                                          0, reason, self.privacy.is_private(rel)))
        fd = open_resolved(workspace, resolved, os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOFOLLOW)
        try:
            st = os.fstat(fd)
            private = self.privacy.is_private(rel) or (stat.S_ISREG(st.st_mode) and st.st_nlink > 1)

            def refused(reason: str) -> _Read:
                marker = f"skip:{reason}:{st.st_mtime_ns}:{st.st_size}"
                return _Read(None, FileRecord(rel, kind.value, marker, st.st_mtime, st.st_size, 0, reason, private))

            if not stat.S_ISREG(st.st_mode):
                return refused("skipped: not a regular file")
            if not opened_at(workspace, fd, resolved):
                raise FileNotFoundError(rel)  # changed while it was opened: the next change indexes it
            refusal = self._link_refusal(rel, resolved)
            if refusal:
                return refused(refusal)
            limit = int(self.cfg.index.max_file_mb * 1024 * 1024)
            if not kind.is_jsonl and st.st_size > limit:
                # Transcripts and sync files grow for ever and are read incrementally; a Markdown
                # file that size is most likely not notes.
                return refused(f"skipped: {st.st_size / 1048576:.1f} MB is larger than index.max_file_mb "
                               f"({self.cfg.index.max_file_mb:g} MB)")
            identity = _identity(fd, st.st_size) if kind.is_jsonl else ""
            if kind.is_jsonl and previous is not None and previous.hash == identity and previous.private == private:
                return _Read("", previous, unchanged=True)
            grew = (kind.is_jsonl and previous is not None and not previous.error and st.st_size > previous.size
                    and previous.private == private and previous.tail_hash == _tail_hash(fd, previous.size)
                    and not (kind is FileKind.SESSION and transcript_runtime(_head(fd))))
            # A runtime's own session file (Claude Code, Codex, Gemini CLI) is read whole, never
            # from its last chunk: its readers merge records across lines (a response split over
            # several, a message repeated as an event) that an append's lines alone cannot.
            append = grew and previous is not None and previous.resume_offset > 0
            start = previous.resume_offset if append and previous else 0
            data = _read_from(fd, start)
            if identity.startswith("size:"):
                tail = identity.rpartition(":")[2]  # the same hash: its last bytes are not read twice
            else:
                tail = _tail_hash(fd, st.st_size) if kind.is_jsonl else ""
            # An append to a transcript is read from its last chunk on: its session header (the
            # first line, which titles every message) is read apart.
            header = session_header(_first_line(fd)) if append and kind is FileKind.SESSION else ("", "")
        finally:
            os.close(fd)
        text, bad = clean_text(data)
        warning = describe(bad) if bad else ""
        if append and previous and previous.warning and not warning:
            warning = previous.warning
        digest = identity or hashlib.sha256(data).hexdigest()
        record = FileRecord(rel, kind.value, digest, st.st_mtime, st.st_size, 0, "", private, warning, tail)
        first_line = previous.resume_line if append and previous else 1
        # A transcript that grew is read again from its last chunk (or whole, when it has one):
        # the lines up to the old end were judged (a bad one logged) when they were read before.
        # The line the old end falls in is new (it was cut short then).
        new_from = first_line + data[:previous.size - start].count(b"\n") if grew and previous else first_line
        return _Read(text, record, first_line, append, start, data, header=header, new_from=new_from)

    def chunk_text(self, rel: str, text: str, first_line: int = 1,
                   header: tuple[str, str] = ("", ""), new_from: int = 1,
                   skipped: list[tuple[int, str]] | None = None) -> list[chunking.Chunk]:
        """``new_from``: the first line not read before (a bad line is logged once, when it is
        first read, not again at each append to its file).  ``skipped`` gets the new lines of a
        JSONL file left out for what reading them would cost (see :func:`parse_jsonl`)."""
        kind = classify(rel, self.cfg.index.extra_paths)
        size, overlap = self.cfg.chunking.tokens, self.cfg.chunking.overlap
        if kind.is_jsonl:
            limit = min(size, INPUT_TOKENS.get(self.cfg.embedding.provider, size))
            bad: list[int] = []
            costly: list[tuple[int, str]] = []
            runtime = transcript_runtime(text[:HEADER_CHARS]) if kind is FileKind.SESSION and first_line == 1 else None
            if runtime:
                messages = parse_transcript(text, runtime)
            else:
                # A line is bounded as a Markdown file is: JSONL files are exempt as a whole (they
                # grow for ever), not a single line of one.
                messages = parse_jsonl(text, session=kind is FileKind.SESSION, bad_lines=bad, first_line=first_line,
                                       header=header, skipped=costly,
                                       max_line_bytes=int(self.cfg.index.max_file_mb * 1024 * 1024))
            if skipped is not None:
                skipped.extend(entry for entry in costly if entry[0] >= new_from)
            bad = [line for line in bad if line >= new_from]
            if bad:
                shown = ", ".join(map(str, bad[:10])) + (f" and {len(bad) - 10} more" if len(bad) > 10 else "")
                log.warning("%s: line%s %s %s not valid JSON and %s not indexed", rel, "s" if len(bad) > 1 else "",
                            shown, "are" if len(bad) > 1 else "is", "are" if len(bad) > 1 else "is")
            # Read late (each chunk once, its messages pooled in it), overlapping chunks would read
            # the carried messages again, and every chunk its chat's title: chunks of a chat do
            # not overlap then (a message keeps its context: its title and its chunk).
            late = read_as(self.reading(), kind) == "late"
            carried = 0 if late else min(overlap, limit // 4)
            return chunking.chunk_messages(messages, limit, carried)
        # A key pasted into a note is masked in what the index keeps (and so in every snippet);
        # the lines stay where they are, so citations still point at the file's own lines.
        return chunking.chunk_markdown(secrets.mask(text), size, overlap, headings_alone=kind is not FileKind.LONG_TERM)

    def _link_refusal(self, rel: str, resolved: str) -> str:
        """Why a memory path that leads elsewhere through a symlink is not indexed under ``rel``
        ('' if it is): the text would show up under a second name, or carry a private file's
        text under a name that is not private."""
        if resolved == rel:
            return ""
        if classify(resolved, self.cfg.index.extra_paths) is not FileKind.OTHER:
            return f"skipped: a symlink to {resolved}, which is indexed under its own name"
        if self.privacy.is_private(resolved) and not self.privacy.is_private(rel):
            return f"skipped: a symlink to {resolved}, which is private"
        return ""

    def index_file(self, rel: str, force: bool = False, defer_over: int | None = None) -> Outcome:
        """Index ``rel`` as it is now.  ``defer_over``: when at least this many bytes are to be
        (re)chunked, store provisional chunks (keyword rows only, see
        :mod:`memfs.index.bigwrites`) and mark the file so; :meth:`complete` makes the exact ones."""
        full = self.cfg.workspace / rel
        kind = classify(rel, self.cfg.index.extra_paths)
        if kind is FileKind.OTHER:
            return Outcome(rel, "skipped", reason="not a memory file")
        if not name_is_text(rel):
            return self._unreadable(rel, kind, "skipped: its name is not valid UTF-8 (rename it to index it)")
        previous = None if force else self.store.file(rel)
        try:
            if not _is_regular(full):
                removed = self.store.remove_file(rel)
                return Outcome(rel, "removed" if removed else "missing")
            read = self._read(rel, previous)
        except FileNotFoundError:
            removed = self.store.remove_file(rel)
            return Outcome(rel, "removed" if removed else "missing")
        except OSError as exc:
            return self._unreadable(rel, kind, f"skipped: cannot read: {exc.strerror or exc}")
        text, record = read.text, read.record
        if read.unchanged or (previous is not None and previous.hash == record.hash
                              and previous.error == record.error and previous.private == record.private):
            assert previous is not None
            if previous.error:
                return Outcome(rel, "skipped", reason=previous.error)  # still, for the same reason
            return Outcome(rel, "unchanged", chunks=previous.chunks)
        if text is None:
            log.warning("%s: %s", rel, record.error)
            self.store.replace_file(record, [], [], [], {})
            return Outcome(rel, "skipped", reason=record.error)
        if record.warning and (previous is None or previous.warning != record.warning):
            log.warning("%s: %s; the rest is indexed", rel, record.warning)
        if defer_over is not None and len(read.data) >= defer_over:
            return self._provisional(rel, text, read)
        skipped: list[tuple[int, str]] = []
        chunks = self.chunk_text(rel, text, read.first_line, read.header, read.new_from, skipped)
        if skipped:
            # Recorded with the file (status lists it), as bytes that are not text are.
            said = _skipped_lines(skipped)
            log.warning("%s: %s; the rest is indexed", rel, said)
            warning = "; ".join(w for w in (record.warning, said) if w)  # an append's after the file's own
            record = dataclasses.replace(record, warning=warning if len(warning) <= 1000 else warning[:999] + "…")
        if kind is FileKind.SESSION and not chunks and not read.append and text.strip() and not record.warning:
            # Said, not silent: a session file of a format memfs does not read indexes as nothing.
            record = dataclasses.replace(record, warning=NO_MESSAGES)
            if previous is None or previous.warning != NO_MESSAGES:
                log.warning("%s: %s", rel, NO_MESSAGES)
        if classify(rel, self.cfg.index.extra_paths).is_jsonl:
            record = read.resumable(record, chunks)
        hashes = [text_hash(plain(c.text)) for c in chunks]  # what the model reads, and the cache key
        name, model, _ = self.identity_source()
        mode = self.reading()
        keyed = self._keyed_by_chunk(kind, mode)
        unit_hashes = [[unit_key(u.embedding_text, hashes[i], keyed) for u in c.units] for i, c in enumerate(chunks)]
        cached = {}
        model = cache_model(mode, model, kind)
        if name != "none":
            wanted = hashes + [h for per_chunk in unit_hashes for h in per_chunk]
            cached = self.store.cached_vectors(name, model, wanted)
        bodies = [fts_body(c.text) for c in chunks]
        pending = self.store.replace_file(record, chunks, hashes, bodies, cached, unit_hashes,
                                          [chunk_days(rel, c) for c in chunks],
                                          from_line=read.first_line if read.append else None)
        return Outcome(rel, "indexed", chunks=len(chunks), pending=pending, reason=record.warning)

    def _keyed_by_chunk(self, kind: FileKind, mode: str) -> bool:
        """Whether a unit's vector is filed under its chunk's text as well as its own: a unit of
        Markdown read late has the vector of its span in its chunk's reading, and a Markdown
        line (a timed heading, "- done", a line in two overlapping chunks) recurs in other
        chunks, where it reads otherwise; filed under its text alone, whichever context embedded
        it first would give every later one its vector (and answers would depend on what was
        indexed before).  A chat message keeps the key of its text alone: it is one message (by
        id) in one chunk, chats' chunks do not overlap when read late, and so an index built
        when chats alone were read late keeps its vectors."""
        return not kind.is_jsonl and read_as(mode, kind) == "late"

    def _provisional(self, rel: str, text: str, read: _Read) -> Outcome:
        """Keyword rows for a big write, stored in one transaction: the file's lines cut by their
        length (no tokenizer, no JSON parsing, no units), marked as owing their exact chunks.
        The mark (the file's hash, prefixed) is in the same transaction, so a stop before
        :meth:`complete` leaves a hash no file has, and the next reconcile indexes it exactly.
        A key pasted into Markdown is masked here as in its exact chunks (lines stay lines)."""
        if not classify(rel, self.cfg.index.extra_paths).is_jsonl:
            text = secrets.mask(text)
        chunks = chunking.provisional(text, self.cfg.chunking.tokens, read.first_line)
        record = dataclasses.replace(read.record, hash=PROVISIONAL_HASH + read.record.hash, resume_line=0,
                                     resume_offset=0)
        self.store.replace_file(record, chunks, [""] * len(chunks), [fts_body(c.text) for c in chunks], {},
                                days=_days_of(rel, chunks),
                                from_line=read.first_line if read.append else None, provisional=True)
        return Outcome(rel, "indexed", chunks=len(chunks), reason=record.warning, provisional=True)

    def provisional_written(self, rel: str, data: bytes, st: os.stat_result) -> Outcome | None:
        """Keyword rows (as :meth:`_provisional` stores them) for a sync day file this process has
        just created holding exactly ``data`` (``st``: its stat after the write), taken from those
        bytes instead of reading the file again.  A sync batch writes hundreds of day files, and
        reading each back (resolving its path, hashing it twice, looking for links) cost more than
        its keyword rows.  None when the short way does not apply (not a sync file, a name that
        is not text, not a regular file): the caller indexes it the usual way.  The caller has
        made sure the day file's folder is a folder, not a link; privacy is judged as
        :meth:`_read` judges it (a path made private, or a file with a second name).  A file
        changed since it was written is read as usual (None)."""
        kind = classify(rel, self.cfg.index.extra_paths)
        if kind is not FileKind.SYNC or not name_is_text(rel) or not stat.S_ISREG(st.st_mode):
            return None
        try:
            now = os.lstat(self.cfg.workspace / rel)
        except OSError:
            return None
        if (now.st_ino, now.st_size, now.st_mtime_ns, now.st_ctime_ns) != (st.st_ino, st.st_size, st.st_mtime_ns,
                                                                           st.st_ctime_ns):
            return None  # changed since it was written (beside us): read as it is now
        private = self.privacy.is_private(rel) or st.st_nlink > 1
        text, bad = clean_text(data)
        warning = describe(bad) if bad else ""
        if warning:
            log.warning("%s: %s; the rest is indexed", rel, warning)
        tail = _tail_hash_of(data)
        record = FileRecord(rel, kind.value, _identity_of(data, tail), st.st_mtime, st.st_size, 0, "", private,
                            warning, tail)
        return self._provisional(rel, text, _Read(text, record, data=data))

    def complete(self, rel: str) -> Outcome | None:
        """The exact chunks (and units, and embedding queue entries) of a file stored with
        provisional ones; None when it has none any more (indexed again since, or removed)."""
        record = self.store.file(rel)
        if record is None or not record.hash.startswith(PROVISIONAL_HASH):
            return None
        return self.index_file(rel, force=True)

    def _unreadable(self, rel: str, kind: FileKind, reason: str) -> Outcome:
        """A memory file that cannot be read: recorded with the reason (status lists it, under
        its name as :func:`shown` writes it), logged when the reason is new."""
        name = shown(rel)
        previous = self.store.file(name)
        if previous is None or previous.error != reason:
            log.warning("not indexed: %s: %s", name, reason)
            try:
                st = longpath.lstat(self.cfg.workspace / rel)
                mtime, size = st.st_mtime, st.st_size
            except OSError:
                mtime, size = 0.0, 0
            private = self.privacy.is_private(name)
            self.store.replace_file(FileRecord(name, kind.value, f"skip:{reason}", mtime, size, 0, reason, private),
                                    [], [], [], {})
        return Outcome(name, "skipped", reason=reason)

    def remove(self, rel: str) -> bool:
        return self.store.remove_file(rel)

    def rename(self, old: str, new: str) -> Outcome:
        """A file moved: keep its chunks if the new path is still memory, else drop them."""
        new_kind = classify(new, self.cfg.index.extra_paths)
        old_kind = classify(old, self.cfg.index.extra_paths)
        if new_kind is FileKind.OTHER:
            self.store.remove_file(old)
            return Outcome(new, "removed")
        if old_kind is not FileKind.OTHER and old_kind.is_jsonl == new_kind.is_jsonl:
            if self.store.rename_file(old, new, new_kind.value, self.privacy.is_private(new)):
                return self.index_file(new)  # no-op by hash unless the content changed too
        self.store.remove_file(old)
        return self.index_file(new)

    def embed_pending(self, batch: int = 256, limit: int | None = None, progress: Progress | None = None,
                      stop: threading.Event | None = None) -> int:
        """Embed what has no vector yet, the right things first: MEMORY.md, then what is dated in
        the last RECENT_DAYS (the latest day first), then everything else, the last written first
        (a note written now goes before a 30 MB transcript copied in a minute ago).

        A chunk is embedded with its units, from one call to the model that reads each text once
        (:mod:`memfs.index.embedding.readings`): the chunk's vector is made from its units', so it costs
        no reading of its own.  A call takes whole chunks with their units until it holds ``batch``
        passages (chunks and units; the last chunk whole, so a few more); then units left without
        a vector while their chunk has one (a chunk found in the cache).  ``limit`` bounds the
        passages of the whole run the same way.  Returns how many passages got their vectors; ``stop`` ends it
        between calls."""
        if not self.embeds:
            return 0
        if self.meter is None or self.meter.store is not self.store:
            self.meter = RateMeter(self.store)
            self.meter_all = RateMeter(self.store, RATE_KEY_ALL)
        done = 0
        budget = float("inf") if limit is None else float(limit)
        total = self.store.pending_count() if progress else 0  # a count of a large backlog costs
        size = self.cfg.embedding.texts_per_call(batch)  # a remote server: enough for all its requests in flight
        for tier in self._tiers():
            for units_only in (False, True):
                while budget >= 1 and not (stop is not None and stop.is_set()):
                    take = int(min(size, budget))
                    with self.turns.turn(stop) if self.turns else contextlib.nullcontext(True) as mine:
                        if not mine:
                            break  # stopping while another process had the turn
                        began = time.monotonic()
                        if units_only:
                            chunks: list[StoredChunk] = []
                            units = self.store.pending_units(take, **tier)
                        else:
                            # A chunk is at least two passages (itself and a unit) most of the time.
                            chunks, units = self._whole(self.store.pending_chunks(take // 2 + 1, **tier), take)
                        if not chunks and not units:
                            break
                        embedded = self._embed(chunks, units)
                    if not embedded:
                        # Nothing of what was chosen got a vector (rows replaced meanwhile by another
                        # process's write): choosing again would choose them again, forever.
                        log.debug("embedding: none of %d chosen passages got a vector", len(chunks) + len(units))
                        break
                    budget -= embedded
                    # The rate a shared reader is told must not move with private text: batches
                    # holding any are left out of it.
                    seconds = time.monotonic() - began
                    self.meter_all.batch(embedded, seconds)
                    if not self.store.any_private([c.id for c in chunks] or [u.chunk_id for u in units]):
                        self.meter.batch(embedded, seconds)
                    done += embedded
                    if progress:
                        progress(done, max(total, done))
        return done

    def _whole(self, chunks: list[StoredChunk], passages: int) -> tuple[list[StoredChunk], list[StoredUnit]]:
        """The first chunks whose passages (each chunk and its units without a vector) reach
        ``passages``, the last of them whole, with all their units.  The last chunk goes over
        rather than into a call of its own: a call of 64 passages was two to the model (3 chats'
        chunks of ~17 passages, then one), and the second was small."""
        units = self.store.units_of([c.id for c in chunks])
        waiting: dict[int, int] = {}
        for unit in units:
            waiting[unit.chunk_id] = waiting.get(unit.chunk_id, 0) + (unit.vector is None)
        kept: list[StoredChunk] = []
        count = 0
        for chunk in chunks:
            if count >= passages:
                break
            count += 1 + waiting.get(chunk.id, 0)
            kept.append(chunk)
        ids = {c.id for c in kept}
        return kept, [u for u in units if u.chunk_id in ids]

    def _embed(self, chunks: list[StoredChunk], units: list[StoredUnit]) -> int:
        """Vectors for the chunks and for those of the units that have none, from one call to
        the model for the readings not in the cache; how many got one."""
        assert self.provider is not None
        name, base, _ = self.identity_source()
        wanted = [u for u in units if u.vector is None]
        of_chunk: dict[int, list[StoredUnit]] = {}
        for unit in units:
            of_chunk.setdefault(unit.chunk_id, []).append(unit)
        spans_of = getattr(self.provider, "embed_spans", None)
        mode = self.reading()
        # Each file's chunks are read as its kind is (read_as); a provider without output states
        # reads whole what would be read late.  A unit whose chunk has its vector already (a
        # units-only call) is read as its chunk's file is, so that file's path is looked up.
        paths = {c.id: c.path for c in chunks}
        if missing := {u.chunk_id for u in wanted} - paths.keys():
            paths.update((i, c.path) for i, c in self.store.chunks_by_id(missing).items())
        ways: dict[tuple[str, str], tuple[list[StoredChunk], list[StoredUnit]]] = {}  # (cache model, how read)

        def way(path: str) -> tuple[list[StoredChunk], list[StoredUnit]]:
            kind = classify(path, self.cfg.index.extra_paths)
            how, model = read_as(mode, kind), cache_model(mode, base, kind)
            if how == "late" and spans_of is None:
                how, model = "whole", base
            return ways.setdefault((model, how), ([], []))

        for chunk in chunks:
            way(chunk.path)[0].append(chunk)
        for unit in wanted:
            if unit.chunk_id in paths:  # else its file was indexed again meanwhile: the unit is gone
                way(paths[unit.chunk_id])[1].append(unit)
        done = 0
        for (model, how), (group, group_units) in ways.items():
            if how == "late":
                done += self._embed_late(name, model, group, group_units, of_chunk, spans_of)
            else:
                done += self._embed_read(name, model, how == "once", group, group_units, of_chunk)
        return done

    def _embed_read(self, name: str, model: str, once: bool, chunks: list[StoredChunk], wanted: list[StoredUnit],
                    of_chunk: dict[int, list[StoredUnit]]) -> int:
        """Vectors of chunks and units read whole (each passage and its chunk read on its own)
        or, ``once``, made from readings each read once (:mod:`memfs.index.embedding.readings`)."""
        assert self.provider is not None
        if once:
            parts = {u.id: readings.unit_readings(u) for u in wanted}
            chunk_parts = {c.id: readings.chunk_readings(of_chunk.get(c.id, [])) or [plain(c.text)] for c in chunks}
        else:
            parts = {u.id: [u.embedding_text] for u in wanted}
            chunk_parts = {c.id: [plain(c.text)] for c in chunks}
        texts = list(dict.fromkeys([t for p in parts.values() for t in p] + [t for p in chunk_parts.values() for t in p]))
        hashes = {t: text_hash(t) for t in texts}
        cached = self.store.cached_vectors(name, model, hashes.values())
        dims = self.provider.dims  # a cached vector comes as the store keeps it (packed, or float32)
        vectors = {t: as_float32(cached[hashes[t]], dims) for t in texts if hashes[t] in cached}
        fresh = [t for t in texts if t not in vectors]
        if fresh:
            vectors.update(zip(fresh, self.provider.embed(fresh)))
        unit_items = [(u, readings.mean(parts[u.id], vectors)) for u in wanted]
        chunk_items = [(c, readings.mean(chunk_parts[c.id], vectors)) for c in chunks]
        stored_chunks = [(c, v) for c, v in chunk_items if v is not None]
        stored_units = [(u, v) for u, v in unit_items if v is not None]
        self.store.store_embedded(name, model, [(hashes[t], vectors[t]) for t in fresh], stored_chunks, stored_units)
        return len(stored_chunks) + len(stored_units)

    def _embed_late(self, name: str, model: str, chunks: list[StoredChunk], wanted: list[StoredUnit],
                    of_chunk: dict[int, list[StoredUnit]], spans_of: Callable[..., Any]) -> int:
        """Late chunking (:mod:`memfs.index.embedding.late`): each chunk read once, its vector the
        whole reading, its units' vectors pooled over their spans in it; a unit without a span
        (a key alone, a unit whose chunk has a vector already) read on its own, from the cache if
        it is there."""
        texts = [plain(c.text) for c in chunks]
        spans: list[list[list[tuple[int, int]]]] = []
        owner: dict[int, tuple[int, int]] = {}  # unit id -> (text, span set)
        ids = {u.id for u in wanted}
        for index, chunk in enumerate(chunks):
            sets: list[list[tuple[int, int]]] = []
            for unit_id, span in latechunks.unit_spans(texts[index], of_chunk.get(chunk.id, [])).items():
                if span is not None and unit_id in ids:
                    owner[unit_id] = (index, len(sets))
                    sets.append(span)
            spans.append(sets)
        alone = [u for u in wanted if u.id not in owner]
        cached = self.store.cached_vectors(name, model, [u.hash for u in alone])
        solo = list(dict.fromkeys(u.embedding_text for u in alone if u.hash not in cached))
        whole, pooled = spans_of(texts + solo, spans + [[] for _ in solo])
        first = [0]
        for sets in spans:
            first.append(first[-1] + len(sets))
        read = dict(zip(solo, whole[len(texts):]))
        units: list[tuple[StoredUnit, np.ndarray]] = []
        for unit in wanted:
            if unit.id in owner:
                index, number = owner[unit.id]
                vector = pooled[first[index] + number]
                if not vector.any():  # no word piece in its span: read on its own next time
                    continue
            elif unit.hash in cached:
                vector = as_float32(cached[unit.hash], self.provider.dims)
            else:
                vector = read[unit.embedding_text]
            units.append((unit, vector))
        self.store.store_embedded(name, model, (), list(zip(chunks, whole[: len(texts)])), units)
        return len(chunks) + len(units)

    def _tiers(self) -> tuple[dict[str, Any], ...]:
        """The embedding queue's parts, first to last (see Store.pending_chunks)."""
        first_recent = today(timezone(self.cfg.bundle.timezone)) - dt.timedelta(days=RECENT_DAYS - 1)
        # Then the files written lately, by when they were written: a big write's exact chunks
        # come from the completion worker after files written later, and took their place
        # by chunk id (150 logs copied after an import waited behind it: a newcomer walk).
        written = time.time() - RECENT_DAYS * 86400
        return ({"paths": LONG_TERM_NAMES}, {"since": first_recent.isoformat()}, {"written_since": written}, {})

    def reconcile(self, progress: Progress | None = None,
                  hold: Callable[[str], AbstractContextManager[object]] | None = None) -> list[Outcome]:
        """Bring the index in line with the files: new, changed (by hash) and deleted files.
        ``hold``: the lock of one path, taken around its indexing, when writes are indexed at the
        same time (a catch-up under a running mount): a write listed after this began, or
        indexed while it ran, is never removed, nor overwritten with what this read before it."""
        held = hold or (lambda rel: contextlib.nullcontext())
        on_disk = iter_memory_files(self.cfg)
        outcomes = []
        for number, rel in enumerate(on_disk, start=1):
            with held(rel):
                outcomes.append(self.index_file(rel))
            if progress:
                progress(number, len(on_disk))
        present = {shown(rel) for rel in on_disk}
        for record in self.store.files():
            if record.path in present:
                continue
            with held(record.path):
                if hold is not None and self._arrived(record.path):
                    continue  # written since the listing, and indexed by its writer
                self.store.remove_file(record.path)
            outcomes.append(Outcome(record.path, "removed"))
        self.store.set_meta("reconciled_at", str(time.time()))
        return outcomes

    def _arrived(self, rel: str) -> bool:
        """Whether a path the listing did not hold is a memory file now."""
        try:
            return is_memory(rel, self.cfg.index.extra_paths) and _is_regular(self.cfg.workspace / rel)
        except OSError:
            return False


_MESSAGE_DAY = re.compile(r"^\[(\d{4}-\d{2}-\d{2}) ")
FULL_HASH_BYTES = 1 << 20  # JSONL files up to this size are identified by their whole hash
TAIL_BYTES = 1 << 16  # larger ones by their size and the hash of their last bytes


def _is_regular(path: Path) -> bool:
    """Whether ``path`` (followed, any length) is a regular file; False when it is not there,
    OSError when it cannot be looked at."""
    try:
        return stat.S_ISREG(longpath.stat_of(path).st_mode)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP):
            return False
        raise


def _read_from(fd: int, start: int) -> bytes:
    blocks = []
    offset = start
    while block := os.pread(fd, 1 << 20, offset):
        blocks.append(block)
        offset += len(block)
    return b"".join(blocks)


HEADER_BYTES = 1 << 16  # a transcript's session header is read from at most this many first bytes


NO_MESSAGES = ("no messages read: not a session transcript memfs knows (Claude Code, Codex CLI, Gemini CLI, "
               "OpenClaw, or memfs import's)")
HEADER_CHARS = 4096  # what tells a runtime's session file from OpenClaw's JSONL (its first records)


def _head(fd: int) -> str:
    return os.pread(fd, HEADER_CHARS, 0).decode("utf-8", "replace")


def _first_line(fd: int) -> str:
    return os.pread(fd, HEADER_BYTES, 0).split(b"\n", 1)[0].decode("utf-8", "replace")


def _tail_hash(fd: int, size: int) -> str:
    begin = max(0, size - TAIL_BYTES)
    return hashlib.sha256(os.pread(fd, size - begin, begin)).hexdigest()


def _tail_hash_of(data: bytes) -> str:
    """:func:`_tail_hash` of a file holding exactly ``data``."""
    return hashlib.sha256(data[-TAIL_BYTES:]).hexdigest()


def _identity(fd: int, size: int) -> str:
    """What tells a JSONL file's content apart without reading all of a large one."""
    if size <= FULL_HASH_BYTES:
        return hashlib.sha256(_read_from(fd, 0)).hexdigest()
    return f"size:{size}:tail:{_tail_hash(fd, size)}"


def _identity_of(data: bytes, tail: str) -> str:
    """:func:`_identity` of a file holding exactly ``data``, whose :func:`_tail_hash_of` is
    ``tail`` (a file no longer than the tail hashed: the two are one hash, made once)."""
    if len(data) > FULL_HASH_BYTES:
        return f"size:{len(data)}:tail:{tail}"
    return tail if len(data) <= TAIL_BYTES else hashlib.sha256(data).hexdigest()


def _skipped_lines(skipped: list[tuple[int, str]]) -> str:
    """What a file's warning says of the lines left out: the first with its reason, and how many more."""
    number, reason = skipped[0]
    more = len(skipped) - 1
    return f"line {number} skipped ({reason})" + (f" and {more} more line{'s' if more > 1 else ''}" if more else "")


@dataclass
class _Read:
    text: str | None  # None: not indexed (the reason is in record.error)
    record: FileRecord
    first_line: int = 1  # the line ``text`` starts at
    append: bool = False  # only the chunks from first_line on are replaced
    start: int = 0  # the byte offset ``text`` starts at
    data: bytes = b""
    unchanged: bool = False
    header: tuple[str, str] = ("", "")  # a transcript's session (id, title), when text starts after it
    new_from: int = 1  # the first line not read before (lines before it were judged then)

    def resumable(self, record: FileRecord, chunks: list[chunking.Chunk]) -> FileRecord:
        """The record, with where the next append re-chunks from: the start of the last chunk."""
        if not chunks:
            return dataclasses.replace(record, resume_line=self.first_line, resume_offset=self.start)
        line = chunks[-1].start_line
        offset = self.start
        lines = self.data.split(b"\n")
        for length in lines[: max(0, line - self.first_line)]:
            offset += len(length) + 1
        return dataclasses.replace(record, resume_line=line, resume_offset=offset)


@functools.lru_cache(maxsize=1024)
def _file_days(rel: str) -> tuple[str | None, str | None] | None:
    """A file's own date for all its chunks, or None when each chunk is dated by its messages."""
    kind = classify(rel)
    if kind is FileKind.DAILY_LOG or kind is FileKind.SYNC:
        # A sync day file holds the messages of its day in sync.timezone (that is how they are
        # routed): its name dates them as the user counts days, where a timestamp is UTC.
        day = daily_date(rel)
        if day or kind is FileKind.DAILY_LOG:
            return (day.isoformat(), day.isoformat()) if day else (None, None)
    return None


def _days_of(rel: str, chunks: list[chunking.Chunk]) -> list[tuple[str | None, str | None]]:
    """:func:`chunk_days` of each chunk (a file dated by its name: looked up once)."""
    days = _file_days(rel)
    return [days] * len(chunks) if days is not None else [chunk_days(rel, c) for c in chunks]


def chunk_days(rel: str, chunk: chunking.Chunk) -> tuple[str | None, str | None]:
    """The first and last date a chunk speaks of: a daily log's date, or its messages' dates;
    (None, None) for undated text (MEMORY.md, notes)."""
    days = _file_days(rel)
    if days is not None:
        return days
    dates = [m.group(1) for u in chunk.units if (m := _MESSAGE_DAY.match(u.text))]
    return (min(dates), max(dates)) if dates else (None, None)


def replace_index_file(new: Path, target: Path) -> None:
    """Atomically put a freshly built index file in place of the old one."""
    for suffix in ("-wal", "-shm"):
        stale = Path(str(target) + suffix)
        if stale.exists():
            stale.unlink()
    os.replace(new, target)
