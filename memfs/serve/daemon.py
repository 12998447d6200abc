"""``memfs serve``: the warm process without FUSE, for machines where FUSE is not allowed.

It brings the index up to date, then keeps it current (the watcher), embeds in the background
and answers the CLI on its socket, until SIGINT or SIGTERM (or, inside ``memfs mcp``, until the
MCP server stops it: :mod:`memfs.serve.standby`).  A mount does the same beside its FUSE loop
(:mod:`memfs.fs.mount`).
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
    def __init__(self, cfg: Config, memory: Memory | None = None, socket: SocketServer | None = None) -> None:
        """``memory`` and ``socket``: opened by the caller (the MCP server shares its Memory with
        its tools, and takes the socket's lock before deciding to serve)."""
        self.cfg = cfg
        self.memory = memory or Memory(cfg)
        self.embedder = BackgroundEmbedder(self.memory)
        self.socket = socket or SocketServer(self.memory)
        self.stop = trio.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._halted = False

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as received:
            async for signum in received:
                log.info("signal %s: stopping", signal.Signals(signum).name)
                self.memory.stop()
                self._halt()
                return

    def _halt(self) -> None:
        self._halted = True
        self.stop.set()
        if self._cancel is not None:
            self._cancel.cancel()

    def halt_from_thread(self) -> None:
        """Stop serving, from another thread (the MCP server's, when its client goes away)."""
        # Halted first, then the token: _main sets the token before it looks at _halted, so
        # either it sees _halted or this sees its token.
        self._halted = True
        token = self._token
        if token is None:
            return  # not running yet: serve() returns without starting
        try:
            token.run_sync_soon(self._halt)
        except trio.RunFinishedError:
            pass

    async def _main(self, signals: bool) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._cancel = nursery.cancel_scope
            if self._halted:
                nursery.cancel_scope.cancel()
                return
            if signals:
                nursery.start_soon(self._signals)
            nursery.start_soon(self.embedder.run)
            if self.cfg.mount.watch:
                nursery.start_soon(watch_workspace, self.memory, self.embedder.kick, self.stop)
            await nursery.start(self.socket.run)
            self.embedder.kick()  # what reconciliation left pending
            log.info("serving %s (agent %s, %s mode)", self.cfg.workspace, self.cfg.agent, self.cfg.mode)

    def serve(self, signals: bool = True) -> None:
        """Reconcile, then watch, embed and answer until halted (the socket is closed after)."""
        try:
            outcomes = self.memory.reconcile()
            changed = [o for o in outcomes if o.action in ("indexed", "removed")]
            log.info("reconciled %d memory files (%d changed since the last run)", len(outcomes), len(changed))
            if not self._halted:
                trio.run(self._main, signals)
        finally:
            self.socket.close()

    def run(self) -> int:
        """Serve until a signal; returns how many passages were left waiting for an embedding."""
        try:
            self.serve()
        finally:
            self.memory.stop()
            self.memory.settle()
            left = self.memory.pending
            self.memory.close()
        if left:
            log.info("left %d passages waiting for an embedding: the next start embeds them", left)
        log.info("stopped serving %s", self.cfg.workspace)
        return left
