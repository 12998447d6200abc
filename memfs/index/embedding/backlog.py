"""What is still waiting for its vectors, how fast it is being embedded, and when it should be done.

Whoever embeds (a mount's or a daemon's background embedder, ``memfs index``) measures its rate
batch by batch and records it in the index, so every process that reads the index (the CLI, the MCP
server, a second mount) can tell a reader how long the backlog will take without embedding
anything itself.  Reads never wait on a backlog: they answer from what has vectors and show the
one line :meth:`Backlog.line` writes.
"""

from __future__ import annotations

import json
import math
import time
from collections import deque
from dataclasses import dataclass
from typing import Protocol

RATE_KEY = "embed_rate"  # over batches without private text: what a shared reader may be told
# Over every batch: what the main mode is told.  Both are kept because the backlog of an import of
# session transcripts (private by default) is all private: the public rate alone never moved, and
# the main mode was told nothing was embedding while it was.
RATE_KEY_ALL = "embed_rate_all"
# A rate recorded longer ago than this means nobody is embedding now (a batch takes well under a
# second with the local model, a few seconds with a remote server's large calls).
ACTIVE_S = 30.0
# The rate is measured over the batches of this long.
WINDOW_S = 60.0
# How often the rate is written to the index at most (each write is a small transaction).
RECORD_EVERY_S = 1.0


# The passages (exact chunks and their units) a big write still being chunked will add to the
# backlog (memfs.index.bigwrites), estimated from the lines its provisional chunks hold: its exact
# chunks and units do not exist yet, and making them to count them is the 15 s of CPU deferring
# saves.  A JSONL line is a message: one unit, its twin read without the chat's title, its share of
# a chunk; a Markdown log's line (blank ones counted) a third of a passage.  Measured on real text
# (scripts/bigwrites.py from the LoCoMo dev set and from tests/data, tests/data's LoCoMo day):
# JSONL 2.48-2.54 passages a line, Markdown 0.32-0.37; taken a little above that.  Counted, a
# share of the backlog does not fall back when the exact chunks arrive (a newcomer saw 65%, then
# 2%); over-estimated, it rises a little then.
PASSAGES_PER_JSONL_LINE = 2.6
PASSAGES_PER_TEXT_LINE = 0.4


def still_to_chunk(lines: int, jsonl_lines: int) -> int:
    """The passages the provisional chunks of ``lines`` lines (``jsonl_lines`` of them in JSONL
    files) will become once chunked exactly: an estimate."""
    return math.ceil(jsonl_lines * PASSAGES_PER_JSONL_LINE + (lines - jsonl_lines) * PASSAGES_PER_TEXT_LINE)


class _Meta(Protocol):
    def get_meta(self, key: str) -> str | None: ...

    def set_meta(self, key: str, value: str) -> None: ...


def duration(seconds: float) -> str:
    """``about 40 s``, ``about 12 min``, ``about 2.1 h``."""
    if seconds < 60:
        return f"about {max(1, math.ceil(seconds))} s"
    if seconds < 3600:
        return f"about {math.ceil(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


@dataclass(frozen=True)
class Backlog:
    pending: int  # passages (chunks and their units) without a vector
    rate: float = 0.0  # passages per second last measured, 0: never measured
    measured_at: float = 0.0  # time.time() of the last measurement

    @property
    def active(self) -> bool:
        """Whether some process was embedding a moment ago."""
        return self.rate > 0 and time.time() - self.measured_at < ACTIVE_S

    @property
    def seconds_left(self) -> float | None:
        return self.pending / self.rate if self.pending and self.rate > 0 else None

    def line(self, chunking: bool = False) -> str:
        """One line for a reader: how many passages wait, and when they should be done.
        ``chunking``: files are still being chunked (a burst's, a big write's), which comes
        before their passages are embedded: no rate measured a moment ago is no sign then that
        nobody works on them."""
        if not self.pending:
            return ""
        what = (f"{self.pending} passage{'s' if self.pending != 1 else ''} still wait{'s' if self.pending == 1 else ''}"
                " for vectors (found by keyword only until then)")
        left = self.seconds_left
        if self.active and left is not None:
            done_at = time.strftime("%H:%M", time.localtime(time.time() + left))
            return f"{what}; at {self.rate:.1f}/s they should be done in {duration(left)} (around {done_at})"
        if left is not None and chunking:
            return (f"{what}; files are being chunked first (then embedded, at {self.rate:.1f}/s: "
                    f"{duration(left)})")
        if left is not None:
            return (f"{what}; no memfs process is embedding them now (a mount, `memfs serve` or `memfs index` "
                    f"does, at {self.rate:.1f}/s: {duration(left)})")
        return f"{what}; no embedding rate measured yet"

    def as_dict(self) -> dict[str, object]:
        """``embed_rate`` is None when nothing waits: a rate beside "pending: 0" is of batches
        this reader has nothing in (a shared reader's: the public ones of the last minute)."""
        left = self.seconds_left
        return {"pending": self.pending, "embed_rate": round(self.rate, 2) if self.pending else None,
                "embedding_now": self.active,
                "seconds_left": None if left is None else round(left, 1)}


def read(store: _Meta, pending: int, include_private: bool = False) -> Backlog:
    """The backlog of ``pending`` passages at the rate recorded in ``store`` (``include_private``:
    measured over every batch, for the main mode; else over batches without private text)."""
    raw = (include_private and store.get_meta(RATE_KEY_ALL)) or store.get_meta(RATE_KEY)
    if not raw:
        return Backlog(pending)
    try:
        recorded = json.loads(raw)
        return Backlog(pending, float(recorded["rate"]), float(recorded["at"]))
    except (ValueError, KeyError, TypeError):
        return Backlog(pending)


WARM_UP_S = 5.0  # seconds of embedding before a process's own rate replaces the one it started with


class RateMeter:
    """Measures the embedding rate of one embedding loop and records it in the index."""

    def __init__(self, store: _Meta, key: str = RATE_KEY) -> None:
        self.store = store
        self.key = key
        previous = read(store, 0, include_private=key == RATE_KEY_ALL)
        # A rate measured by an earlier run is a fair first guess (the same model, machine).
        self.rate = previous.rate
        self._batches: deque[tuple[float, int, float]] = deque()  # (when, passages, seconds)
        self._recorded = 0.0
        self._measured = 0.0  # seconds of embedding this meter has seen

    def batch(self, passages: int, seconds: float) -> None:
        """``passages`` were embedded (and stored) in ``seconds``."""
        if passages <= 0 or seconds <= 0:
            return
        self._measured += seconds
        now = time.monotonic()
        if self._measured > WARM_UP_S or self.rate <= 0:
            # A process's first calls load the model (or wake the service) and start small: at a
            # remount status said "52/s, about 30 min left" where the run went at 276/s.  The rate
            # an earlier run measured stands until this one has worked WARM_UP_S, and those first
            # calls never count (the earlier rate is recorded again meanwhile: something embeds).
            self._batches.append((now, passages, seconds))
            while self._batches and now - self._batches[0][0] > WINDOW_S:
                self._batches.popleft()
            # Over a window, not batch by batch: a batch of short units goes ten times faster than
            # one of whole chunks, and a backlog holds both.
            self.rate = sum(b[1] for b in self._batches) / sum(b[2] for b in self._batches)
        if now - self._recorded >= RECORD_EVERY_S:
            self._recorded = now
            self.store.set_meta(self.key, json.dumps({"rate": round(self.rate, 3), "at": round(time.time(), 1)}))
