"""The daemon's side of the socket: announce the daemon, accept the user's own clients, settle
each request's configuration as the CLI would, and answer it with :mod:`memfs.commands` when it is
this daemon's workspace, agent and settings (``elsewhere`` otherwise: the CLI then answers in its
own process, so a client never gets an answer computed with other settings)."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import signal
import socket
import threading
import time
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from memfs import commands
from memfs.config import Config
from memfs.invocation import InvocationError, answer_settings, resolve
from memfs.memory import Memory
from memfs.serve.ondemand import started_on_demand
from memfs.serve.wire import (
    AMBIENT_ENV,
    CODE,
    COMMANDS,
    MAX_LINE,
    PROTOCOL,
    Answer,
    Invocation,
    check_peer,
    daemon_key,
    run_dir,
)
from memfs.state import make_private_dir
from memfs.unixsock import bind_private, write_record
from memfs.userdirs import private_opener

log = logging.getLogger(__name__)

ON_DEMAND = "on-demand"
TAKES_OVER = ("mount", "serve")  # daemons started by hand, which a daemon started on demand gives way to
# Settings that decide how the index is built: a running mount or daemon keeps its own until
# it starts again, and still answers a command whose settings differ only in these.
BUILDS_THE_INDEX = ("embedding.", "chunking.")
TAKE_OVER_S = 15.0  # how long one waits for the daemon it stopped (it finishes the request it is answering)


def _try_lock(lock: typing.IO[str]) -> bool:
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False


def holder_of(lock: typing.IO[str]) -> dict[str, Any]:
    """What the daemon that holds a key's lock wrote in it (pid, kind); {} when unknown."""
    try:
        lock.seek(0)
        holder = json.loads(lock.read() or "{}")
    except (OSError, ValueError):
        return {}
    return holder if isinstance(holder, dict) else {}


@dataclass
class Announcement:
    """Where a daemon listens and what it tells clients about itself."""

    folder: Path
    key: str

    @property
    def record(self) -> Path:
        return self.folder / f"{self.key}.json"

    def withdraw(self) -> None:
        """Remove the socket and the record, while this daemon still holds the key's lock (so
        it never removes those of a daemon that started after it)."""
        for name in (f"{self.key}.sock", f"{self.key}.json"):
            try:
                (self.folder / name).unlink()
            except FileNotFoundError:
                pass


class SocketServer:
    """Answers the CLI for one Memory (one workspace and agent)."""

    def __init__(self, memory: Memory, mountpoint: Path | None = None, kind: str = "serve",
                 idle_s: float | None = None) -> None:
        """``kind``: what this daemon is, as ``memfs status`` names it (``mount``, ``serve``,
        ``on-demand`` or ``mcp``); ``idle_s``: after how long without a request it stops (None:
        never), for the same listing."""
        self.memory = memory
        self.cfg: Config = memory.cfg
        self.mountpoint = mountpoint
        self.kind = kind
        self.idle_s = idle_s
        # Keyed by the mode too: a main mount and a shared mount of one workspace each answer
        # their own callers.
        self.announcement = Announcement(run_dir(), daemon_key(str(self.cfg.workspace), self.cfg.agent,
                                                                  self.cfg.mode == "main"))
        self._sock: socket.socket | None = None
        self._lock: typing.IO[str] | None = None
        self.second = False  # another daemon answers for this workspace and agent
        # For stopping when idle: clients connected now, and when the last request came or left.
        self.connections = 0
        self.last_request = time.monotonic()
        self.outdated = False  # a client of another memfs asked: a daemon started on demand stops

    def claim(self, quiet: bool = False) -> bool:
        """Take the key's lock (one daemon per workspace, agent and mode answers commands; it
        holds ``<key>.lock`` for its life and the kernel releases it however the daemon ends);
        False, and ``second``, when another daemon holds it.  A mount or a ``memfs serve`` started
        by hand takes the key from a daemon that was only started on demand: it stops it and
        waits for it to let go."""
        if self._lock is not None:
            return True
        if self.second:
            return False
        folder = self.announcement.folder
        make_private_dir(folder)
        lock = open(folder / f"{self.announcement.key}.lock", "a+", opener=private_opener)
        taken = _try_lock(lock)
        if not taken and self.kind in TAKES_OVER:
            holder = holder_of(lock)
            pid = holder.get("pid")
            if holder.get("kind") == ON_DEMAND and isinstance(pid, int) and started_on_demand(pid):
                log.info("taking over from the daemon started on demand (pid %s)", pid)
                try:
                    os.kill(pid, signal.SIGTERM)
                except OSError:
                    pass
                deadline = time.monotonic() + TAKE_OVER_S
                while not (taken := _try_lock(lock)) and time.monotonic() < deadline:
                    time.sleep(0.05)
        if not taken:
            lock.close()
            self.second = True
            if not quiet:
                log.info("another daemon answers commands for %s (agent %s)%s", self.cfg.workspace,
                         self.cfg.agent, ": this one answers them when it stops" if self.kind in TAKES_OVER else "")
            return False
        self._hold(lock)
        return True

    def _hold(self, lock: typing.IO[str]) -> None:
        """Keep the key's lock, just taken, saying who holds it (read by holder_of)."""
        lock.seek(0)
        lock.truncate()
        lock.write(json.dumps({"pid": os.getpid(), "kind": self.kind}))
        lock.flush()
        self._lock = lock
        self.second = False

    def open(self, quiet: bool = False) -> None:
        """Listen and announce now (connections wait in the backlog until ``run``): a mount
        opens its socket before it appears, so a command run the moment ``memfs mount`` returns
        already finds its daemon.  A second daemon for the key (the same workspace mounted twice,
        or mounted and served) leaves the first its socket (see ``claim``), and takes it when the
        first stops (see ``run``)."""
        if self._sock is not None or not self.claim(quiet):
            return
        self._sock = self._listen()

    def close(self) -> None:
        """Withdraw the announcement (when it is ours) and release the key."""
        if self._lock is not None:
            self.announcement.withdraw()
            self._lock.close()
            self._lock = None
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def _listen(self) -> socket.socket:
        folder = self.announcement.folder
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bind_private(sock, folder, f"{self.announcement.key}.sock")
        sock.listen(16)
        info = {"pid": os.getpid(), "workspace": str(self.cfg.workspace), "agent": self.cfg.agent,
                "mountpoint": str(self.mountpoint) if self.mountpoint else None, "mode": self.cfg.mode,
                "kind": self.kind, "idle_s": self.idle_s, "started": time.time()}
        write_record(self.announcement.record, info)
        return sock

    async def run(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Answer commands until cancelled.  A mount or ``memfs serve`` started by hand that
        found the key taken (the same workspace mounted twice, or mounted and served) waits for
        it, and answers from the moment the daemon that held it stops: otherwise the next
        command, finding no socket, would start a daemon on demand beside it, which embeds too."""
        self.open()
        try:
            if self._sock is None and self.second and self.kind in TAKES_OVER:
                task_status.started()  # the caller goes on: the mount serves its files meanwhile
                task_status = trio.TASK_STATUS_IGNORED
                if not await self._wait_for_the_key():
                    return
                try:
                    self._sock = self._listen()
                except OSError as exc:  # the mount goes on; commands answer in their own process
                    log.warning("cannot answer commands for %s: %s", self.cfg.workspace, exc)
                    return
                log.info("the daemon that answered commands for %s (agent %s) stopped: this %s answers them now",
                         self.cfg.workspace, self.cfg.agent, self.kind)
            raw, self._sock = self._sock, None
            if raw is None:  # the second daemon for this workspace and agent: nothing to answer
                task_status.started()
                return
            listener = trio.SocketListener(trio.socket.from_stdlib_socket(raw))
            log.info("answering commands on %s", self.announcement.folder / f"{self.announcement.key}.sock")
            task_status.started()
            await trio.serve_listeners(self._connection, [listener])
        finally:
            self.close()

    async def _wait_for_the_key(self) -> bool:
        """Block (in a worker thread) until the key's lock is free, then hold it; False when it
        cannot be waited for.  The kernel wakes the waiter the moment the holder lets go (it
        withdraws its socket and record first), so no command falls between the two.  Cancelled
        (the mount stops), the thread is abandoned: should it get the lock after all, it lets it
        go at once rather than keep it until this process ends."""
        try:
            lock = open(self.announcement.folder / f"{self.announcement.key}.lock", "a+", opener=private_opener)
        except OSError as exc:
            log.warning("cannot wait to answer commands for %s: %s", self.cfg.workspace, exc)
            return False
        handoff = threading.Lock()
        state = {"abandoned": False, "locked": False}

        def wait() -> OSError | None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX)
            except OSError as exc:
                lock.close()
                return exc
            with handoff:
                if state["abandoned"]:
                    lock.close()
                else:
                    state["locked"] = True
            return None

        try:
            # A limiter of its own: the wait may last the mount's life, and must not hold one of
            # the tokens the file operations' threads share.
            failed = await trio.to_thread.run_sync(wait, abandon_on_cancel=True, limiter=trio.CapacityLimiter(1))
        except BaseException:
            with handoff:
                state["abandoned"] = True
                if state["locked"]:
                    lock.close()
            raise
        if failed is None:
            try:
                self._hold(lock)
                return True
            except OSError as exc:
                lock.close()
                failed = exc
        log.warning("cannot wait to answer commands for %s: %s", self.cfg.workspace, failed)
        return False

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        try:
            await self._serve_connection(stream)
        finally:
            self.connections -= 1
            self.last_request = time.monotonic()

    async def _serve_connection(self, stream: trio.SocketStream) -> None:
        async with stream:
            if not check_peer(stream.socket):  # type: ignore[arg-type]
                log.warning("refused a connection from another user")
                return
            buffer = bytearray()
            searched = 0  # the buffer holds no newline before this offset
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
                while (end := buffer.find(b"\n", searched)) >= 0:
                    line = bytes(buffer[:end])
                    del buffer[: end + 1]
                    searched = 0
                    self.last_request = time.monotonic()
                    if not await self._reply(stream, line):
                        return
                searched = len(buffer)

    async def _reply(self, stream: trio.SocketStream, line: bytes) -> bool:
        """Answer one request line; False when the client went away."""
        try:
            decision = await trio.to_thread.run_sync(self.settle, line)
            if isinstance(decision, dict):
                await stream.send_all(json.dumps(decision).encode() + b"\n")
                return True
            # Taken: the client waits for the answer as long as it takes, but no longer than a
            # moment for this (a stopped daemon never says it, and the client answers itself).
            await stream.send_all(b'{"status": "working"}\n')
            reply = await trio.to_thread.run_sync(self.answer, *decision)
            try:
                line = json.dumps(reply, ensure_ascii=False).encode()
            except UnicodeEncodeError:  # bytes that are not UTF-8, carried as escapes
                line = json.dumps(reply).encode()
            await stream.send_all(line + b"\n")
            return True
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return False

    def settle(self, line: bytes) -> tuple[Config, Invocation, str, dict[str, Any], str] | dict[str, Any]:
        """Whether a request is this daemon's to answer: its configuration settled as the CLI
        would settle it, equal to the daemon's own.  Returns what to run, or the reply saying
        ``elsewhere`` (the client then answers in its own process); never raises."""
        try:
            request = json.loads(line)
            if request.get("v") != PROTOCOL or request.get("command") not in COMMANDS:
                return {"status": "elsewhere", "why": "unknown request"}
            invocation = Invocation(**request["invocation"])
            args = request.get("args") or {}
            if not (isinstance(args, dict) and isinstance(invocation.env, dict) and isinstance(invocation.cwd, str)
                    and isinstance(invocation.overrides, list)):
                return {"status": "elsewhere", "why": "malformed request"}
        except (ValueError, TypeError, KeyError, AttributeError):
            return {"status": "elsewhere", "why": "malformed request"}
        if request.get("code") != CODE:
            # Another memfs (an upgrade, another virtualenv) must not get this code's answers.
            # A daemon a command started gives way, so the next command starts the new code.
            if self.kind == ON_DEMAND and not self.outdated:
                self.outdated = True
                log.info("a command of another memfs installation asked: stopping for it")
            return {"status": "elsewhere", "why": "another memfs installation"}
        # What a configuration depends on beyond what it is given: the home folder, the user's
        # config folder, the local time zone.  The daemon's own must be the client's.
        if any(invocation.env.get(name) != os.environ.get(name) for name in AMBIENT_ENV):
            return {"status": "elsewhere", "why": "another environment (HOME, XDG_*, TZ)"}
        warned = _Warnings()
        logging.getLogger("memfs").addHandler(warned)
        # What settling the client's settings logs is the client's (it says it itself), not for
        # this daemon's log: one command with a stray MEMFS_ variable wrote its warning into the
        # log of every daemon it asked (a newcomer walk found it in seven).
        own_log = [h for h in logging.getLogger().handlers if h is not warned]
        for handler in own_log:
            handler.addFilter(warned.not_mine)
        try:
            cfg = resolve(invocation)
        except InvocationError:
            return {"status": "elsewhere", "why": "the client's settings do not load here"}
        except Exception as exc:  # a symlink loop, an unreadable folder: the client says so itself
            return {"status": "elsewhere", "why": f"settling the client's settings failed: {exc}"}
        finally:
            logging.getLogger("memfs").removeHandler(warned)
            for handler in own_log:
                handler.removeFilter(warned.not_mine)
        if warned.seen:  # the client prints those warnings itself, in its own process
            return {"status": "elsewhere", "why": "the settings come with warnings"}
        if cfg.mode == "main" and self.cfg.mode != "main":
            # A shared mount's daemon serves shared readers only, whatever a caller asks.
            return {"status": "elsewhere", "why": "a shared-mode daemon does not answer the main mode"}
        mine, theirs = answer_settings(self.memory.cfg), answer_settings(cfg)  # privacy may have changed live
        differ = sorted(key for key in mine.keys() | theirs.keys() if mine.get(key) != theirs.get(key))
        note = ""
        if differ:
            if self.kind == ON_DEMAND or not all(key.startswith(BUILDS_THE_INDEX) for key in differ):
                return {"status": "elsewhere", "why": "another workspace, agent or settings"}
            # Settings that decide how the index is built, changed under a running mount: the
            # index is the one it builds, so it answers (as the client's own process would
            # answer from this index), and says when the change takes effect.
            cfg = cfg.model_copy(update={"embedding": self.memory.cfg.embedding, "chunking": self.memory.cfg.chunking})
            again = "mounted" if self.kind == "mount" else "started"
            one = len(differ) == 1
            note = (f"memfs: {', '.join(differ)} {'differs' if one else 'differ'} from the settings the running "
                    f"{self.kind} indexes with; {'it takes' if one else 'they take'} effect on its index when it is "
                    f"{again} again (a --set on one command does not change it)\n")
        return cfg, invocation, str(request["command"]), args, note

    def answer(self, cfg: Config, invocation: Invocation, command: str, args: dict[str, Any],
               note: str = "") -> dict[str, Any]:
        """The command's answer.  Once a command runs it is answered here, error or not: running
        it again in the client could append or store twice."""
        try:
            answer = commands.run(self.memory, cfg, command, args, invocation.cwd)
        except Exception as exc:
            log.warning("%s for a client failed: %s", command, exc)
            answer = Answer(error=f"{command} failed: {exc}")
        answer.stderr = note + answer.stderr
        return {"status": "ok", "answer": answer.as_dict(), "pid": os.getpid()}


class _Warnings(logging.Handler):
    """Notes whether settling a request logged a warning, in the thread that settles it."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.thread = threading.get_ident()
        self.seen = False

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.seen = True

    def not_mine(self, record: logging.LogRecord) -> bool:
        """A filter for the daemon's own log: nothing this thread logs while it settles a client's
        settings (other threads' lines pass)."""
        return record.thread != self.thread
