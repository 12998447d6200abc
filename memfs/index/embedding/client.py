"""The ``local`` provider as every process but the service sees it: it asks the user's embedding
service (:mod:`memfs.index.embedding.service`) and starts it when none answers, so no mount, daemon or
command loads the model itself.

A request that fails because the service went away (killed, or exited idle between two
requests) is asked again of a fresh service: embedding is a pure function of text, so nothing is
lost and nothing is done twice that matters.  When no service can be had (the runtime folder is
not private), the model is loaded in this process, as with ``embedding.service = false``, and a
warning says why.  A service that cannot be started or is stuck (stopped with SIGSTOP) is an
:class:`EmbeddingError`: searches answer by keyword and say why, passages wait for their vectors;
a model copy loaded in every process instead would undo what the service is for.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import threading
import time

from memfs.config import EmbeddingConfig
from memfs.index.embedding.providers import INPUT_TOKENS, EmbeddingError, provider_identity
from memfs.index.embedding.service import service_key
from memfs.lazy import lazy_module
from memfs.unixsock import check_peer, folder_path
from memfs.userdirs import runtime_dir

np = lazy_module("numpy")

log = logging.getLogger(__name__)

# Texts per request.  The service takes the model a batch of 8 windows at a time, so another
# client's query waits for one batch, not for a whole request; a large request lets the model
# sort all its windows by length (less padding), as it does in-process.
REQUEST_TEXTS = 512
# A working service says so every second (its heartbeat); one silent this long is stopped or hung.
STALL_S = 5.0
REPLY_TIMEOUT_S = 900.0  # the longest one request may take, heartbeat or not
START_TIMEOUT_S = 15.0  # a new service listens within a second; its model loads while we wait
ATTEMPTS = 3
# After the service failed (stuck, or could not be started): calls fail at once for this long, so
# searches answer by keyword meanwhile instead of each waiting STALL_S again.
COOL_DOWN_S = 15.0
WORKING = {"status": "working"}


class ServiceGone(OSError):
    """The service closed the connection or could not be reached."""


class ServiceStuck(OSError):
    """The service took the request and then said nothing for STALL_S."""


class _Connection:
    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.reader = sock.makefile("rb")

    def ask(self, request: dict[str, object]) -> tuple[dict[str, object], bytes]:
        deadline = time.monotonic() + REPLY_TIMEOUT_S
        try:
            self.sock.settimeout(STALL_S)
            self.sock.sendall(json.dumps(request, ensure_ascii=False).encode() + b"\n")
            while True:
                self.sock.settimeout(max(0.01, min(STALL_S, deadline - time.monotonic())))
                line = self.reader.readline(1 << 20)
                if not line.endswith(b"\n"):
                    raise ServiceGone("the embedding service closed the connection")
                reply = json.loads(line)
                if reply != WORKING:
                    break
            size = int(reply.get("rows", 0)) * int(reply.get("dims", 0)) * 4 if "rows" in reply else 0
            data = self.reader.read(size) if size else b""
        except TimeoutError as exc:
            raise ServiceStuck(f"the embedding service has not answered for {STALL_S:g} s") from exc
        except (OSError, ValueError) as exc:
            raise ServiceGone(f"the embedding service went away: {exc}") from exc
        if len(data) != size:
            raise ServiceGone("the embedding service closed the connection mid-answer")
        return reply, data

    def close(self) -> None:
        self.reader.close()
        self.sock.close()


class ServiceProvider:
    """Embeds through the per-user service; same contract as :class:`LocalProvider`."""

    name = "local"

    def __init__(self, cfg: EmbeddingConfig) -> None:
        self.cfg = cfg
        _, self.model, self.dims = provider_identity(cfg)
        self.max_input_tokens = INPUT_TOKENS["local"]
        self.key = service_key(cfg.model_path, cfg.tokenizer_path)
        self._free: list[_Connection] = []  # one per thread in use: a query never waits on a batch
        self._lock = threading.Lock()
        self._down_until = 0.0
        self._down_why = ""
        self.folder = runtime_dir()  # RuntimeDirError (an OSError) when it is not private
        if not self.dims:  # another model file: its size is the service's to say
            reply, _ = self._ask({"v": 1, "op": "hello"})
            self.model, self.dims = str(reply["model"]), int(reply["dims"])

    # -- connections ---------------------------------------------------------------------------

    def _connect(self) -> _Connection | None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(1.0)
            with folder_path(self.folder, f"embed-{self.key}.sock") as path:
                sock.connect(path)
            if not check_peer(sock):
                log.warning("%s/embed-%s.sock is not this user's: not using it", self.folder, self.key)
                sock.close()
                return None
            return _Connection(sock)
        except OSError:
            sock.close()
            return None

    def _start(self) -> None:
        """Start the service (detached; it forks, so there is no child to reap) and wait until
        it listens.  Two clients starting it at once start one: the loser's exits at once."""
        log_path = self.folder / f"embed-{self.key}.log"
        try:
            if log_path.stat().st_size > 1 << 20:
                log_path.unlink()
        except FileNotFoundError:
            pass
        fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            command = [sys.executable, "-P", "-m", "memfs.index.embedding.service", "--detach",
                       "--folder", str(self.folder), "--key", self.key, "--idle", str(self.cfg.service_idle_s),
                       "--model-path", self.cfg.model_path, "--tokenizer-path", self.cfg.tokenizer_path]
            subprocess.run(command, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, cwd="/", close_fds=True,
                           start_new_session=True, check=False, timeout=START_TIMEOUT_S)
        finally:
            os.close(fd)
        log.info("started the embedding service %s (log %s)", self.key, log_path)

    def _take(self) -> _Connection:
        with self._lock:
            if self._free:
                return self._free.pop()
        connection = self._connect()
        if connection is not None:
            return connection
        self._start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            connection = self._connect()
            if connection is not None:
                return connection
            time.sleep(0.02)
        raise ServiceGone(f"the embedding service did not start within {START_TIMEOUT_S:.0f} s "
                          f"(see {self.folder}/embed-{self.key}.log)")

    def _ask(self, request: dict[str, object]) -> tuple[dict[str, object], bytes]:
        """The service's reply; a service that went away is started again (ATTEMPTS times), one
        that is stuck is not (it still holds its key: another could not start) and is not asked
        again for COOL_DOWN_S.  EmbeddingError when no reply can be had."""
        if time.monotonic() < self._down_until:
            raise EmbeddingError(self._down_why)
        why = ""
        for _ in range(ATTEMPTS):
            try:
                connection = self._take()
            except (ServiceGone, subprocess.SubprocessError) as exc:
                why = str(exc)
                continue
            try:
                reply, data = connection.ask(request)
            except ServiceStuck as exc:
                connection.close()
                why = f"{exc}{self._stuck_advice()}"
                break
            except ServiceGone as exc:
                connection.close()
                why = str(exc)
                continue
            with self._lock:
                self._free.append(connection)
            if "error" in reply:
                raise EmbeddingError(f"embedding service: {reply['error']}")
            return reply, data
        self._down_until = time.monotonic() + COOL_DOWN_S
        self._down_why = f"{why} (not asked again for {COOL_DOWN_S:g} s; searches use keywords meanwhile)"
        log.warning("%s", self._down_why)
        raise EmbeddingError(self._down_why)

    def _stuck_advice(self) -> str:
        try:
            pid = int(json.loads((self.folder / f"embed-{self.key}.json").read_text())["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            return ""
        return f" (pid {pid}: stopped? `kill -CONT {pid}` resumes it, `kill {pid}` lets a fresh one start)"

    # -- the provider ----------------------------------------------------------------------------

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.dims), dtype=np.float32)
        for begin in range(0, len(texts), REQUEST_TEXTS):
            part = texts[begin : begin + REQUEST_TEXTS]
            reply, data = self._ask({"v": 1, "op": "embed", "texts": part})
            rows = np.frombuffer(data, dtype="<f4").reshape(int(reply["rows"]), int(reply["dims"]))
            if rows.shape != (len(part), self.dims):
                raise EmbeddingError(f"the embedding service returned {rows.shape} for {len(part)} texts")
            out[begin : begin + len(part)] = rows
        return out

    def embed_spans(self, texts: list[str], spans: list[list[list[tuple[int, int]]]]) -> tuple[np.ndarray, np.ndarray]:
        """Late chunking through the service (``LocalProvider.embed_spans``)."""
        whole = np.zeros((len(texts), self.dims), dtype=np.float32)
        pooled: list[np.ndarray] = []
        for begin in range(0, len(texts), REQUEST_TEXTS):
            part, sets = texts[begin : begin + REQUEST_TEXTS], spans[begin : begin + REQUEST_TEXTS]
            wanted = len(part) + sum(len(s) for s in sets)
            reply, data = self._ask({"v": 1, "op": "spans", "texts": part,
                                     "spans": [[[list(r) for r in ranges] for ranges in s] for s in sets]})
            rows = np.frombuffer(data, dtype="<f4").reshape(int(reply["rows"]), int(reply["dims"]))
            if rows.shape != (wanted, self.dims):
                raise EmbeddingError(f"the embedding service returned {rows.shape} for {len(part)} texts "
                                     f"and {wanted - len(part)} spans")
            whole[begin : begin + len(part)] = rows[: len(part)]
            pooled.append(rows[len(part):])
        return whole, (np.concatenate(pooled) if pooled else np.zeros((0, self.dims), dtype=np.float32))

    def close(self) -> None:
        with self._lock:
            for connection in self._free:
                connection.close()
            self._free.clear()


def service_record(cfg: EmbeddingConfig) -> dict[str, object] | None:
    """The running service's record (pid, started) for ``memfs status``, None when none runs,
    or ``{"error": ...}`` when there can be none (every process then loads the model itself)."""
    try:
        folder = runtime_dir()
    except OSError as exc:
        return {"error": str(exc)}
    try:
        path = folder / f"embed-{service_key(cfg.model_path, cfg.tokenizer_path)}.json"
        record = json.loads(path.read_text())
        os.kill(int(record["pid"]), 0)
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return record if isinstance(record, dict) else None

