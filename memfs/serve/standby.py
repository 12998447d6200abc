"""The MCP server's own warm process.

An MCP client often starts ``memfs mcp`` and nothing else: no mount, no ``memfs serve``.  Then
nothing would see the edits made beside it, and its answers would go stale.  So while no daemon
serves its workspace and agent, the MCP server is that daemon, in a thread of its own: it
reconciles at start, watches, embeds in the background and answers the CLI on the socket, exactly
as ``memfs serve`` does (:class:`memfs.serve.daemon.ServeDaemon`), until the server stops.

Whether a daemon serves is the socket's lock (one holder per workspace, agent and mode; see
:meth:`memfs.serve.server.SocketServer.open`).  While a mount or ``memfs serve`` holds it, the
index is theirs to keep current: the standby waits, and takes over if that daemon stops.
"""

from __future__ import annotations

import logging
import threading

from memfs.memory import Memory
from memfs.serve.daemon import ServeDaemon
from memfs.serve.server import SocketServer

log = logging.getLogger(__name__)

# How often a waiting standby looks whether the daemon it deferred to is gone.
POLL_S = 2.0
# How long stopping waits for the thread (a reconciliation in progress is not interrupted: the
# process ends and the next start reconciles again).
STOP_WAIT_S = 10.0


class Standby:
    def __init__(self, memory: Memory) -> None:
        self.memory = memory
        self.serving = threading.Event()  # this process is the workspace's daemon now
        self._stopped = threading.Event()
        self._guard = threading.Lock()
        self._daemon: ServeDaemon | None = None
        self._thread = threading.Thread(target=self._run, name="memfs-standby", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _run(self) -> None:
        deferred = False
        while not self._stopped.is_set():
            socket = SocketServer(self.memory, kind="mcp")
            socket.open(quiet=deferred)
            if socket.second:
                if not deferred:
                    log.info("a daemon serves %s (agent %s): the tools ask it, and it keeps the index current",
                             self.memory.cfg.workspace, self.memory.cfg.agent)
                deferred = True
                self._stopped.wait(POLL_S)
                continue
            with self._guard:
                if self._stopped.is_set():
                    socket.close()
                    return
                self._daemon = ServeDaemon(self.memory.cfg, self.memory, socket)
            self.serving.set()
            log.info("no daemon serves %s (agent %s): this MCP server keeps its index current",
                     self.memory.cfg.workspace, self.memory.cfg.agent)
            try:
                self._daemon.serve(signals=False)
            except Exception:
                log.exception("keeping the index current stopped; the tools still answer from the index")
            finally:
                self.serving.clear()
            return

    def stop(self) -> None:
        """Stop watching and serving (the Memory stays open: its owner closes it)."""
        with self._guard:
            self._stopped.set()
            daemon = self._daemon
        if daemon is not None:
            self.memory.stop()
            daemon.halt_from_thread()
        if self._thread.is_alive():
            self._thread.join(STOP_WAIT_S)
