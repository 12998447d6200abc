"""Background embedding for a warm process (a mount, ``memfs serve``): whenever writes leave
passages without a vector, embed them in a worker thread, a call of about a quarter second at a
time (CallSize), never on the event loop.  Stopping does not wait for the work: what is still
pending stays recorded in the index and the next start embeds it."""

from __future__ import annotations

import logging
import time

import trio

from memfs.bursts import Bursts
from memfs.memory import Memory

log = logging.getLogger(__name__)

# Passages per call to the local model: as many as take about CALL_S at the rate the last call
# showed (CallSize), from BATCH (the first call after a quiet spell: often one note) up to
# MAX_BATCH.  A call takes what is first in the queue when it starts, so a note just written waits
# for at most the call in progress and its own: about half a second, inside the second issue #20
# allows; a stop waits for the call in progress.  Calls of 2 passages (the size before) spent a
# tenth of the time around the model (the service's round trip, the queue's queries, the store's
# transaction): 0.86 of the raw model's throughput on a quiet machine (0.79-0.95 run by run);
# sized so, 0.96 (0.90-1.06), and `memfs index`'s calls of INDEX_BATCH 0.93 (bench_index.py
# --work).  MAX_BATCH bounds a call whose rate was measured on short passages.  A remote server
# gets enough for all its requests in flight at once (EmbeddingConfig.texts_per_call).
BATCH = 2
MAX_BATCH = 64
CALL_S = 0.25
RETRY_S = 30.0
# While closes come in a burst (a notes folder copied in) the model waits for the pause after it
# (memfs.bursts): a note written alone is embedded at once; meanwhile the burst's notes are found
# by keyword (and a search embeds the freshest itself when few wait: services/searching.py).


class CallSize:
    """The passages of the next call to the model, from the last call's rate."""

    def __init__(self, floor: int) -> None:
        self.floor = floor
        self.passages = floor

    def measured(self, passages: int, seconds: float) -> None:
        """The last call stored ``passages`` in ``seconds`` (nothing stored: no rate, no change)."""
        if passages > 0 and seconds > 0:
            self.passages = max(self.floor, min(MAX_BATCH, int(passages / seconds * CALL_S)))

    def reset(self) -> None:
        """After a quiet spell the first call is small again: it is most often a note just written."""
        self.passages = self.floor


class BackgroundEmbedder:
    def __init__(self, memory: Memory, bursts: Bursts | None = None) -> None:
        self.memory = memory
        self.bursts = bursts or Bursts()
        self.size = CallSize(memory.cfg.embedding.texts_per_call(BATCH))
        self._wakeup = trio.Event()
        # Whether it is embedding now, and whether its last round stopped with passages left
        # (a failing provider): a daemon that stops when idle waits for the one, not the other.
        self.working = False
        self.stalled = False

    def kick(self) -> None:
        self._wakeup.set()

    def closed(self, pending: bool) -> None:
        """A memory file was written and closed (``pending``: it left passages to embed).  A note
        written alone gets a call of its own few passages next (it is first in the queue), not
        a full call of the backlog's: found by meaning within the call in progress and its own."""
        if not self.bursts.closed() and pending:
            self.size.reset()
        if pending:
            self.kick()

    async def run(self) -> None:
        while True:
            if self.stalled:
                # A failing provider (a stopped embedding service, a server that is down) is
                # tried again after a while: its passages get their vectors once it is back,
                # without waiting for the next write.
                with trio.move_on_after(RETRY_S):
                    await self._wakeup.wait()
            else:
                await self._wakeup.wait()
            self._wakeup = trio.Event()
            self.working, self.stalled = True, False
            try:
                await self._embed_all()
            finally:
                self.working = False

    async def _embed_all(self) -> None:
        self.size.reset()
        while self.memory.has_pending:
            await self.bursts.pause()
            try:
                # Abandoned on cancel: the thread finishes its batch (Memory.close waits for
                # it) while the process goes on unmounting.
                began = time.monotonic()
                embedded = await trio.to_thread.run_sync(self.memory.embed_pending, self.size.passages,
                                                         abandon_on_cancel=True)
                self.size.measured(embedded, time.monotonic() - began)
            except Exception as exc:  # a locked index, say: retried at the next write, never fatal
                log.warning("embedding postponed: %s", exc)
                self.stalled = True
                break
            if not embedded:
                self.stalled = True
                break  # provider failing, or stopping: the chunks stay keyword-only for now
