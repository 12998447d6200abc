"""Answering a command the way every front end does: by the daemon that serves the workspace and
agent when one is up (for the CLI, one it starts on demand when none is), else in this process
with a Memory opened once (and kept for the next command: ``search -`` and the MCP server ask
many).  Light at import, like :mod:`wire`."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from memfs.serve.wire import COMMANDS, Answer, Client, Invocation, stopped_mid_answer

if TYPE_CHECKING:
    from memfs.config import Config
    from memfs.memory import Memory

log = logging.getLogger("memfs")


class Answerer:
    def __init__(self, invocation: Invocation, open_local: Callable[[], tuple[Memory, Config]],
                 serving_here: Callable[[], bool] | None = None, ask: bool = True,
                 start_daemon: Callable[[], int | None] | None = None) -> None:
        """``open_local`` opens the Memory (and settles the configuration) for answering here;
        ``serving_here`` says whether this process is itself the workspace's daemon (the MCP
        server's standby), which then answers here rather than through its own socket.  ``ask``:
        False never asks a daemon (``--no-daemon``); ``start_daemon`` starts one when none
        answered (the pid of one that now serves, or None), tried once."""
        self.client = Client(invocation, ask)
        self.start_daemon = start_daemon
        self.open_local = open_local
        self.serving_here = serving_here
        self.memory: Memory | None = None
        self.cfg: Config | None = None
        # One question at a time: the MCP server runs tools in threads, and they share one
        # connection (whose answers come back in order) and one Memory.
        self._lock = threading.Lock()

    def __enter__(self) -> Answerer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.client.close()
        if self.memory is not None:
            self.memory.close()
            self.memory = None

    def local(self) -> tuple[Memory, Config]:
        if self.memory is None or self.cfg is None:
            self.memory, self.cfg = self.open_local()
        return self.memory, self.cfg

    def answer(self, command: str, args: dict[str, Any]) -> Answer:
        """The answer, and at INFO (``-v``) who gave it."""
        with self._lock:
            return self._answer(command, args)

    def remote(self, command: str, args: dict[str, Any]) -> Answer | None:
        """The answer of the daemon that serves this command, started now if it needs one and
        none runs; None: answer it in this process."""
        if self.memory is not None or (self.serving_here and self.serving_here()):
            return None
        answer = self.client.run(command, args)
        # Not for a command whose daemon stopped mid-way: it is answered here, at once (a daemon
        # started now would wait for the one stopping to let go of the workspace first).
        if answer is None and self.start_daemon is not None and command in COMMANDS and not stopped_mid_answer(command):
            start, self.start_daemon = self.start_daemon, None
            if start() is not None:
                self.client.searched = False  # look again: the daemon started is there now
                answer = self.client.run(command, args)
        if answer is not None:
            log.info("%s answered by the daemon with pid %s", command, self.client.daemon_pid)
        return answer

    def _answer(self, command: str, args: dict[str, Any]) -> Answer:
        answer = self.remote(command, args)
        if answer is not None:
            return answer
        from memfs import commands

        memory, cfg = self.local()
        answer = commands.run(memory, cfg, command, args, os.getcwd())
        if not self.client.ask or os.environ.get("MEMFS_NO_DAEMON"):
            why = "--no-daemon or MEMFS_NO_DAEMON: no daemon asked"
        elif self.serving_here and self.serving_here():
            why = "this process serves the workspace"
        else:
            why = "no daemon answered for this workspace and agent with these settings"
        log.info("%s answered in this process (%s)", command, why)
        return answer
