"""The CLI's side of the warm process: where daemons announce themselves, how a command is
framed, and asking one.  Standard library only: a command that a daemon answers must not pay for
numpy, pydantic or the model.

Every daemon (a mount, or ``memfs serve``) listens on ``STATE/run/<key>.sock`` and describes
itself in ``STATE/run/<key>.json`` (workspace, agent, mountpoint, pid), where STATE is the
user's trusted state directory and ``<key>`` is derived from the workspace and the agent.  The
folder is the user's own (0700) and so is each socket (0600); the daemon also checks each
client's uid (SO_PEERCRED), and the client checks the daemon's, so neither trusts a socket
planted by another user.

A request is one JSON line: the command, its arguments, and how the command line was given
(options, current folder, the environment variables that choose the config).  The daemon settles
the configuration exactly as the CLI would and answers only when that is its own workspace,
agent and settings; otherwise it says ``elsewhere`` and the CLI answers in its own process.  The
answer is what the command prints (stdout, stderr, an error), so output is byte-identical either
way.
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

from memfs.unixsock import check_peer, folder_path
from memfs.userdirs import trusted_state_dir

# Not typing, dataclasses nor hashlib at import: together they were a third of what a command that
# a daemon answers spends before it asks (mypy takes this name as typing.TYPE_CHECKING).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

PROTOCOL = 1
# The environment that decides a command's configuration (nothing else is sent): every MEMFS_*
# variable and these, which the daemon must share with the client to answer it (its own home
# folder, config folder and local time zone are what settling a configuration reads).
AMBIENT_ENV = ("HOME", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "TZ")
CONNECT_TIMEOUT_S = 0.5
# How long a daemon may take to say it has taken a request (it settles the configuration first):
# one that is stopped or stuck is given up on, and the command answers in its own process.
TAKE_TIMEOUT_S = 5.0
# A search that embeds a long query on a busy machine, an `index` that embeds a whole workspace:
# the client waits as long as the same work would take in its own process.
ANSWER_TIMEOUT_S = 3600.0
MAX_LINE = 64 * 1024 * 1024
READ_ONLY = ("search", "get", "status", "context")
# What a daemon answers (what needs the index): the commands a CLI starts a daemon for.
COMMANDS = ("search", "get", "status", "context", "sync", "index", "append", "history", "restore", "hook")
LOST = ("the daemon stopped while it was answering; what it was doing may be done already: check "
        "(memfs status, memfs search) before you repeat it")
# What the client answers in its own process when the daemon answering it stops mid-way (a mount
# unmounted while `memfs index` waited on its backlog): asking again is harmless.  `index` does only
# what is left (what the daemon embedded stays), so it goes on here; the others keep LOST.
REPEATABLE = (*READ_ONLY, "index")
# Repeatable commands that are not read-only, whose daemon stopped while answering them in this
# process: answered here from then on, no daemon asked or started for them (the fast path hands
# the command to click in the same process, which must not ask again).
_STOPPED: set[str] = set()


def stopped_mid_answer(command: str) -> bool:
    """Whether the daemon answering ``command`` stopped mid-way in this process (it is answered
    here now)."""
    return command in _STOPPED


def _code_stamp() -> str:
    """Which memfs this is: where it is installed and this file's size and time.  An upgrade
    rewrites every file, so a daemon still running the old code is told apart from the new."""
    try:
        st = os.stat(__file__)
    except OSError:
        return os.path.dirname(__file__)
    return f"{os.path.dirname(__file__)}:{st.st_size}:{st.st_mtime_ns}"


CODE = _code_stamp()


def run_dir(env: dict[str, str] | None = None) -> Path:
    return trusted_state_dir(env) / "run"


def daemon_key(workspace: str, agent: str, main: bool = True) -> str:
    import hashlib

    return hashlib.sha256(f"{workspace}\0{agent}{'' if main else chr(0) + 'shared'}".encode()).hexdigest()[:16]


class Answer:
    """What a command prints: ``stdout`` and ``stderr`` as they are written, then ``error`` (the
    CLI prints ``Error: ...`` and exits 1, or 2 with ``usage``)."""

    def __init__(self, stdout: str = "", stderr: str = "", error: str | None = None, usage: bool = False) -> None:
        self.stdout = stdout
        self.stderr = stderr
        self.error = error
        self.usage = usage

    def as_dict(self) -> dict[str, Any]:
        return {"stdout": self.stdout, "stderr": self.stderr, "error": self.error, "usage": self.usage}

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Answer) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return f"Answer({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"


class Invocation:
    """How a command was asked for: the global options, the current folder, the environment."""

    def __init__(self, workspace: str | None = None, agent: str | None = None, mode: str | None = None,
                 config_file: str | None = None, overrides: list[str] | None = None, cwd: str = "",
                 env: dict[str, str] | None = None) -> None:
        self.workspace = workspace
        self.agent = agent
        self.mode = mode
        self.config_file = config_file
        self.overrides = [] if overrides is None else overrides
        self.cwd = cwd
        self.env = {} if env is None else env

    @classmethod
    def here(cls, opts: dict[str, Any]) -> Invocation:
        return cls(workspace=str(opts["workspace"]) if opts.get("workspace") else None, agent=opts.get("agent"),
                   mode=opts.get("mode"), config_file=str(opts["config_file"]) if opts.get("config_file") else None,
                   overrides=list(opts.get("overrides") or ()), cwd=_cwd(),
                   env={k: v for k, v in os.environ.items() if k.startswith("MEMFS_") or k in AMBIENT_ENV})

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Invocation) and self.as_dict() == other.as_dict()

    def __repr__(self) -> str:
        return f"Invocation({', '.join(f'{k}={v!r}' for k, v in self.as_dict().items())})"


def _cwd() -> str:
    try:
        return os.getcwd()
    except OSError:  # the current folder was deleted: only an absolute --workspace means anything now
        return os.environ.get("PWD") or "/"


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message, ensure_ascii=False).encode() + b"\n")


class Connection:
    """One client connection to one daemon (several requests may go over it)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")

    def _line(self, timeout: float) -> dict[str, Any] | None:
        self.sock.settimeout(timeout)
        try:
            line = self.reader.readline(MAX_LINE)
        except OSError:
            return None
        if not line.endswith(b"\n"):
            return None
        try:
            reply = json.loads(line)
        except ValueError:
            return None
        return reply if isinstance(reply, dict) else None

    def ask(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The daemon's reply, or None when it went away or did not take the request in time."""
        try:
            send(self.sock, message)
        except OSError:
            return None
        reply = self._line(TAKE_TIMEOUT_S)
        if reply is not None and reply.get("status") == "working":
            reply = self._line(ANSWER_TIMEOUT_S) or {"status": "lost"}
        return reply

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


def _connect(folder: Path, key: str) -> Connection | None:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.settimeout(CONNECT_TIMEOUT_S)
        with folder_path(folder, f"{key}.sock") as path:
            sock.connect(path)
        if not check_peer(sock):
            sock.close()
            return None
        return Connection(sock)
    except OSError:
        sock.close()
        return None


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip("/") + "/")


def candidates(invocation: Invocation) -> list[str]:
    """Keys of the running daemons that may serve ``invocation``, likeliest first: those whose
    workspace or mountpoint holds the folder asked about, then the others (the daemon decides)."""
    folder = run_dir(invocation.env or None)
    try:
        names = [n for n in os.listdir(folder) if n.endswith(".json")]
    except OSError:
        return []
    start = invocation.workspace or invocation.env.get("MEMFS_WORKSPACE") or invocation.cwd
    start = os.path.realpath(os.path.join(invocation.cwd, os.path.expanduser(start)))
    agent = invocation.agent or invocation.env.get("MEMFS_AGENT")
    near, far = [], []
    for name in sorted(names):
        try:
            info = json.loads((folder / name).read_text())
        except (OSError, ValueError):
            continue
        if not isinstance(info, dict) or (agent and info.get("agent") != agent):
            continue
        holds = any(_inside(start, str(p)) for p in (info.get("workspace"), info.get("mountpoint")) if p)
        (near if holds else far).append(name[: -len(".json")])
    return near + far


class Client:
    """Finds the daemon that serves an invocation and asks it; ``None`` answers mean "answer it
    in this process" (no daemon, none of them serves this, or it went away, or ``ask`` is
    False: ``--no-daemon``)."""

    def __init__(self, invocation: Invocation, ask: bool = True) -> None:
        self.invocation = invocation
        self.ask = ask
        self.connection: Connection | None = None
        self.searched = False
        self.daemon_pid: int | None = None  # who answered, for `-v`

    def _request(self, command: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"v": PROTOCOL, "command": command, "args": args, "invocation": self.invocation.as_dict(),
                "code": CODE}

    def run(self, command: str, args: dict[str, Any]) -> Answer | None:
        if command in _STOPPED:
            return None
        answer = self._run(command, args)
        if answer is not None and answer.error == LOST and command in REPEATABLE:
            if command not in READ_ONLY:
                _STOPPED.add(command)
            return None  # asking again, here, is harmless
        return answer

    def _run(self, command: str, args: dict[str, Any]) -> Answer | None:
        if not self.ask or os.environ.get("MEMFS_NO_DAEMON"):
            return None
        if self.connection is None:
            if self.searched:
                return None
            self.searched = True
            folder = run_dir(self.invocation.env or None)
            for key in candidates(self.invocation):
                connection = _connect(folder, key)
                if connection is None:
                    continue
                reply = connection.ask(self._request(command, args))
                if reply is not None and reply.get("status") == "ok":
                    self.connection = connection
                    self.daemon_pid = reply.get("pid")
                    return _answer(reply)
                connection.close()
                if reply is not None and reply.get("status") == "lost":
                    return Answer(error=LOST)
            return None
        reply = self.connection.ask(self._request(command, args))
        if reply is None or reply.get("status") != "ok":
            self.close()
            return Answer(error=LOST) if reply is not None and reply.get("status") == "lost" else None
        return _answer(reply)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def _answer(reply: dict[str, Any]) -> Answer:
    body = reply.get("answer") or {}
    return Answer(stdout=str(body.get("stdout", "")), stderr=str(body.get("stderr", "")),
                  error=body.get("error"), usage=bool(body.get("usage")))
