"""``memfs serve``: the warm process without FUSE, for machines where FUSE is not allowed.

It brings the index up to date, then keeps it current (the watcher), embeds in the background
and answers the CLI on its socket, until SIGINT or SIGTERM (or, inside ``memfs mcp``, until the
MCP server stops it: :mod:`memfs.serve.standby`; or, given an idle time, once nobody has asked it
anything for that long).  A mount does the same beside its FUSE loop (:mod:`memfs.fs.mount`).

Started on demand by a CLI command (:mod:`memfs.serve.ondemand`), it takes the workspace's key
before it reconciles, so of two commands started at once only one daemon serves, and it tells
the command through ``on_ready`` when its socket answers, or that another daemon has the key.
"""

from __future__ import annotations

import functools
import logging
import signal
import time
from collections.abc import Callable

import trio

from memfs.config import Config
from memfs.embedder import BackgroundEmbedder
from memfs.memory import Memory
from memfs.serve.listing import embedded_by
from memfs.serve.server import ON_DEMAND, SocketServer
from memfs.watch import watch_workspace

log = logging.getLogger(__name__)

IDLE_POLL_S = 5.0  # how often a daemon with an idle time looks whether it has been idle that long


class ServeDaemon:
    def __init__(self, cfg: Config, memory: Memory | None = None, socket: SocketServer | None = None,
                 idle_s: float | None = None, on_demand: bool = False,
                 on_ready: Callable[[str], None] | None = None) -> None:
        """``memory`` and ``socket``: opened by the caller (the MCP server shares its Memory with
        its tools, and takes the socket's lock before deciding to serve).  ``idle_s``: stop after
        that long without a request (None: never).  ``on_demand``: started by a command, which
        ``on_ready`` tells "ready" once the socket answers, or "taken" (another daemon has the key)."""
        self.cfg = cfg
        self.memory = memory or Memory(cfg)
        self.embedder = BackgroundEmbedder(self.memory)
        self.idle_s = idle_s
        self.on_demand = on_demand
        self.on_ready = on_ready or (lambda _: None)
        self.socket = socket or SocketServer(self.memory, kind=ON_DEMAND if on_demand else "serve", idle_s=idle_s)
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
            nursery.start_soon(functools.partial(trio.to_thread.run_sync, self.memory.warm, abandon_on_cancel=True))
            nursery.start_soon(self.embedder.run)
            if self.cfg.mount.watch:
                nursery.start_soon(watch_workspace, self.memory, self.embedder.kick, self.stop)
            await nursery.start(self.socket.run)
            self.embedder.kick()  # what reconciliation left pending
            if self.idle_s is not None:
                nursery.start_soon(self._idle, self.idle_s)
            log.info("serving %s (agent %s, %s mode)%s", self.cfg.workspace, self.cfg.agent, self.cfg.mode,
                     f"; stops after {self.idle_s:g} s without a request" if self.idle_s is not None else "")
            if not self.socket.second:
                self.on_ready("ready")

    async def _idle(self, idle_s: float) -> None:
        """Stop once no request came for ``idle_s`` seconds, no client is connected and nothing
        is left to embed (passages a failing provider cannot embed do not keep it up)."""
        poll = max(0.05, min(idle_s / 4, IDLE_POLL_S))
        while True:
            await trio.sleep(poll)
            if self.socket.outdated:  # the new code's commands start their own daemon
                log.info("another memfs installation's command asked: stopping so it can start its own")
                self.memory.stop()
                self._halt()
                return
            if self.socket.connections or time.monotonic() - self.socket.last_request < idle_s \
                    or self.embedder.working:
                continue
            pending = await trio.to_thread.run_sync(lambda: self.memory.pending)
            if pending and not self.embedder.stalled:
                self.embedder.kick()
                continue
            # Decided with no await after this check: no connection can be taken in between (one
            # still in the backlog is closed unread, and its command answers in its own process).
            if self.socket.connections or time.monotonic() - self.socket.last_request < idle_s:
                continue
            log.info("no request for %g s: stopping", idle_s)
            self.memory.stop()
            self._halt()
            return

    def serve(self, signals: bool = True) -> None:
        """Reconcile, then watch, embed and answer until halted (the socket is closed after)."""
        try:
            if self.on_demand and not self.socket.claim():
                self.on_ready("taken")
                return
            outcomes = self.memory.reconcile()
            changed = [o for o in outcomes if o.action in ("indexed", "removed")]
            log.info("reconciled %d memory files (%d changed since the last run)", len(outcomes), len(changed))
            if not self._halted:
                trio.run(self._main, signals)
        finally:
            self.socket.close()

    def embedded_by(self) -> str:
        """Who embeds the passages this daemon leaves waiting: another mount or daemon of the
        index still running, or the next start."""
        return embedded_by(self.cfg.state_dir, self.cfg.workspace, self.cfg.agent, "the next start embeds them")

    def run(self) -> int:
        """Serve until a signal; returns how many passages were left waiting for an embedding."""
        try:
            self.serve()
        finally:
            self.memory.stop()
            self.memory.settle()
            left = self.memory.pending_told()  # a shared daemon's message counts public passages
            self.memory.close()
        if self.on_demand and self.socket.second:
            log.info("another daemon serves %s (agent %s, %s mode): not starting", self.cfg.workspace,
                     self.cfg.agent, self.cfg.mode)
            return 0
        if left:
            log.info("left %d passages waiting for an embedding: %s", left, self.embedded_by())
        log.info("stopped serving %s", self.cfg.workspace)
        return left
