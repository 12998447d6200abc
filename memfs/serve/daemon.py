"""``memfs serve``: the warm process without FUSE, for machines where FUSE is not allowed.

It brings the index up to date, then keeps it current (the watcher), embeds in the background
and answers the CLI on its socket, until SIGINT or SIGTERM.  A mount does the same beside its
FUSE loop (:mod:`memfs.fs.mount`).
"""

from __future__ import annotations

import logging
import signal

import trio

from memfs.config import Config
from memfs.embedder import BackgroundEmbedder
from memfs.memory import Memory
from memfs.serve.server import SocketServer
from memfs.watch import watch_workspace

log = logging.getLogger(__name__)


class ServeDaemon:
    def __init__(self, cfg: Config) -> None:
        self.cfg = cfg
        self.memory = Memory(cfg)
        self.embedder = BackgroundEmbedder(self.memory)
        self.socket = SocketServer(self.memory)
        self.stop = trio.Event()

    async def _signals(self, cancel: trio.CancelScope) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as received:
            async for signum in received:
                log.info("signal %s: stopping", signal.Signals(signum).name)
                self.stop.set()
                self.memory.stop()
                cancel.cancel()
                return

    async def _main(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._signals, nursery.cancel_scope)
            nursery.start_soon(self.embedder.run)
            if self.cfg.mount.watch:
                nursery.start_soon(watch_workspace, self.memory, self.embedder.kick, self.stop)
            await nursery.start(self.socket.run)
            self.embedder.kick()  # what reconciliation left pending
            log.info("serving %s (agent %s, %s mode)", self.cfg.workspace, self.cfg.agent, self.cfg.mode)

    def run(self) -> int:
        """Serve until a signal; returns how many passages were left waiting for an embedding."""
        outcomes = self.memory.reconcile()
        changed = [o for o in outcomes if o.action in ("indexed", "removed")]
        log.info("reconciled %d memory files (%d changed since the last run)", len(outcomes), len(changed))
        try:
            trio.run(self._main)
        finally:
            self.memory.stop()
            self.socket.close()
            self.memory.settle()
            left = self.memory.pending
            self.memory.close()
        if left:
            log.info("left %d passages waiting for an embedding: the next start embeds them", left)
        log.info("stopped serving %s", self.cfg.workspace)
        return left
