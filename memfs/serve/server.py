"""The daemon's side of the socket: announce the daemon, accept the user's own clients, settle
each request's configuration as the CLI would, and answer it with :mod:`memfs.commands` when it is
this daemon's workspace, agent and settings (``elsewhere`` otherwise: the CLI then answers in its
own process, so a client never gets an answer computed with other settings)."""

from __future__ import annotations

import json
import logging
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from memfs import commands
from memfs.config import Config
from memfs.invocation import InvocationError, answer_settings, resolve
from memfs.memory import Memory
from memfs.serve.wire import MAX_LINE, PROTOCOL, Invocation, check_peer, daemon_key, folder_path, run_dir
from memfs.state import make_private_dir

log = logging.getLogger(__name__)

COMMANDS = ("search", "get", "status", "context", "sync", "index", "append")


@dataclass
class Announcement:
    """Where a daemon listens and what it tells clients about itself."""

    folder: Path
    key: str

    @property
    def record(self) -> Path:
        return self.folder / f"{self.key}.json"

    def withdraw(self) -> None:
        for name in (f"{self.key}.sock", f"{self.key}.json"):
            try:
                (self.folder / name).unlink()
            except FileNotFoundError:
                pass


class SocketServer:
    """Answers the CLI for one Memory (one workspace and agent)."""

    def __init__(self, memory: Memory, mountpoint: Path | None = None) -> None:
        self.memory = memory
        self.cfg: Config = memory.cfg
        self.mountpoint = mountpoint
        self.announcement = Announcement(run_dir(), daemon_key(str(self.cfg.workspace), self.cfg.agent))

    def _listen(self) -> socket.socket:
        folder = self.announcement.folder
        make_private_dir(folder)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        with folder_path(folder, f"{self.announcement.key}.sock") as path:
            try:
                os.unlink(path)  # left by a daemon that was killed; a live one would still hold the record
            except FileNotFoundError:
                pass
            old = os.umask(0o177)
            try:
                sock.bind(path)
            finally:
                os.umask(old)
        sock.listen(16)
        info = {"pid": os.getpid(), "workspace": str(self.cfg.workspace), "agent": self.cfg.agent,
                "mountpoint": str(self.mountpoint) if self.mountpoint else None, "mode": self.cfg.mode}
        temp = self.announcement.record.with_suffix(".tmp")
        temp.write_text(json.dumps(info))
        os.chmod(temp, 0o600)
        os.replace(temp, self.announcement.record)
        return sock

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        raw = self._listen()
        listener = trio.SocketListener(trio.socket.from_stdlib_socket(raw))
        log.info("answering commands on %s", self.announcement.folder / f"{self.announcement.key}.sock")
        task_status.started()
        try:
            await trio.serve_listeners(self._connection, [listener])
        finally:
            self.announcement.withdraw()

    async def _connection(self, stream: trio.SocketStream) -> None:
        async with stream:
            if not check_peer(stream.socket):  # type: ignore[arg-type]
                log.warning("refused a connection from another user")
                return
            buffer = b""
            while True:
                try:
                    data = await stream.receive_some(1 << 16)
                except trio.BrokenResourceError:
                    return
                if not data:
                    return
                buffer += data
                if len(buffer) > MAX_LINE:
                    return
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    reply = await trio.to_thread.run_sync(self.handle, line)
                    try:
                        await stream.send_all(json.dumps(reply, ensure_ascii=False).encode() + b"\n")
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        return

    def handle(self, line: bytes) -> dict[str, Any]:
        """One request: ``elsewhere`` unless it is ours, else the command's answer."""
        try:
            request = json.loads(line)
            if request.get("v") != PROTOCOL or request.get("command") not in COMMANDS:
                return {"status": "elsewhere", "why": "unknown request"}
            invocation = Invocation(**request["invocation"])
            args = request.get("args") or {}
        except (ValueError, TypeError, KeyError, AttributeError):
            return {"status": "elsewhere", "why": "malformed request"}
        try:
            cfg = resolve(invocation)
        except InvocationError:
            return {"status": "elsewhere", "why": "the client's settings do not load here"}
        if answer_settings(cfg) != answer_settings(self.memory.cfg):  # privacy may have changed live
            return {"status": "elsewhere", "why": "another workspace, agent or settings"}
        try:
            answer = commands.run(self.memory, cfg, request["command"], args, invocation.cwd)
        except Exception as exc:  # the client answers it itself, and says what went wrong
            log.warning("%s for a client failed: %s", request["command"], exc)
            return {"status": "elsewhere", "why": str(exc)}
        return {"status": "ok", "answer": answer.as_dict(), "pid": os.getpid()}

