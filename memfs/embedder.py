"""Background embedding for a warm process (a mount, ``memfs serve``): whenever writes leave
passages without a vector, embed them in a worker thread, a few at a time, never on the event
loop.  Stopping does not wait for the work: what is still pending stays recorded in the index and
the next start embeds it."""

from __future__ import annotations

import logging

import trio

from memfs.memory import Memory

log = logging.getLogger(__name__)

# Passages per call to the local model: a call takes at least one chunk with all its units (see
# Indexer.embed_pending), a few tenths of a second of work, so a stop never waits long for the
# call in progress, and a note just written goes ahead of a backlog within a second (each call
# takes what is first in the queue then).  Small calls cost no throughput: the model cuts each
# call into runs by length (embeddings._batches), and the work around a call is ~2% of it.  A
# remote server gets enough for all its requests in flight at once
# (EmbeddingConfig.texts_per_call).
BATCH = 2
RETRY_S = 30.0


class BackgroundEmbedder:
    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.batch = memory.cfg.embedding.texts_per_call(BATCH)
        self._wakeup = trio.Event()
        # Whether it is embedding now, and whether its last round stopped with passages left
        # (a failing provider): a daemon that stops when idle waits for the one, not the other.
        self.working = False
        self.stalled = False

    def kick(self) -> None:
        self._wakeup.set()

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
        while self.memory.pending:
            try:
                # Abandoned on cancel: the thread finishes its batch (Memory.close waits for
                # it) while the process goes on unmounting.
                embedded = await trio.to_thread.run_sync(self.memory.embed_pending, self.batch,
                                                         abandon_on_cancel=True)
            except Exception as exc:  # a locked index, say: retried at the next write, never fatal
                log.warning("embedding postponed: %s", exc)
                self.stalled = True
                break
            if not embedded:
                self.stalled = True
                break  # provider failing, or stopping: the chunks stay keyword-only for now
