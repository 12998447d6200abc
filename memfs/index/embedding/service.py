"""The per-user embedding service: one process that holds the local model and embeds for every
mount, daemon, MCP server and command of its user, so the model is loaded once however many
workspaces are mounted.

Embedding is a pure function of text, so the service serves any workspace and keeps nothing: no
text is stored or logged, only counts.  It listens on ``<runtime dir>/embed-<key>.sock`` (the
folder 0700, the socket 0600, each connection's uid checked), where ``<key>`` names the model,
the installation and the protocol; ``embed-<key>.lock`` (held for the service's life) makes it the
only one for its key, so two clients that start it at once start one.  It exits when no request
came for ``embedding.service_idle_s``; the next request starts it again (:mod:`embedclient`).

The wire: a request is one JSON line, ``{"v": 1, "op": "embed", "texts": [...]}``, ``{"v": 1,
"op": "spans", "texts": [...], "spans": [[[[start, end], ...], ...], ...]}`` (late chunking: the
texts' vectors, then one per span set, see ``LocalProvider.embed_spans``) or ``{"v": 1, "op":
"hello"}``; a reply is one JSON line (``{"rows": n, "dims": d}``, ``{"model": ..., "dims": ...,
"pid": ...}`` or ``{"error": ...}``), an embedding's followed by n x d little-endian float32.

Run as ``python -P -m memfs.index.embedding.service --key KEY ...`` by the client; ``--detach`` forks
so the client does not keep a child to reap.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from memfs.lazy import lazy_module
from memfs.unixsock import bind_private, check_peer, write_record

np = lazy_module("numpy")

log = logging.getLogger("memfs.embedservice")

PROTOCOL = 1
MAX_REQUEST = 64 * 1024 * 1024  # one request's JSON line
HEARTBEAT_S = 1.0
WORKING = b'{"status": "working"}\n'


def service_key(model_path: str, tokenizer_path: str) -> str:
    """Which service a client needs: the model files, this installation (another virtualenv may
    hold other code) and the code of the service itself (a changed service is a new one; the old
    one exits when idle)."""
    here = Path(__file__)
    try:
        stamp = here.stat()
        code = f"{stamp.st_size}:{stamp.st_mtime_ns}"
    except OSError:
        code = ""
    parts = [str(PROTOCOL), sys.prefix, code, model_path, tokenizer_path]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


class EmbeddingService:
    def __init__(self, folder: Path, key: str, model_path: str, tokenizer_path: str, idle_s: float) -> None:
        self.folder = folder
        self.key = key
        self.model_path = model_path
        self.tokenizer_path = tokenizer_path
        self.idle_s = idle_s
        self.provider = None
        self.loaded = threading.Event()
        self.load_error = ""
        self.busy = 0
        self.last_request = time.monotonic()
        self.state_lock = threading.Lock()
        self.embedded = 0

    @property
    def sock_name(self) -> str:
        return f"embed-{self.key}.sock"

    def serve(self) -> int:
        lock = os.fdopen(os.open(self.folder / f"embed-{self.key}.lock", os.O_WRONLY | os.O_CREAT, 0o600), "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("another embedding service serves key %s", self.key)
            return 0
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bind_private(listener, self.folder, self.sock_name)
        listener.listen(64)
        listener.settimeout(1.0)
        record = self.folder / f"embed-{self.key}.json"
        write_record(record, {"pid": os.getpid(), "key": self.key, "model_path": self.model_path,
                              "idle_s": self.idle_s, "started": time.time()})
        # Listening before the model is loaded: a client that connects now waits for its answer
        # instead of starting another service.
        threading.Thread(target=self._load, daemon=True).start()
        log.info("embedding service %s listening (pid %d, idle exit after %.0f s)", self.key, os.getpid(),
                 self.idle_s)
        try:
            while not self._idle():
                try:
                    conn, _ = listener.accept()
                except TimeoutError:
                    continue
                threading.Thread(target=self._connection, args=(conn,), daemon=True).start()
        finally:
            # Withdrawn while the lock is still ours, so a successor's socket is never removed.
            for name in (self.sock_name, record.name):
                try:
                    (self.folder / name).unlink()
                except FileNotFoundError:
                    pass
            listener.close()
            lock.close()
        log.info("embedding service %s exits after %.0f s idle (%d texts embedded)", self.key, self.idle_s,
                 self.embedded)
        return 0

    def _idle(self) -> bool:
        with self.state_lock:
            return self.busy == 0 and time.monotonic() - self.last_request > self.idle_s

    def _load(self) -> None:
        from memfs.index.embedding.providers import EmbeddingError, LocalProvider

        started = time.perf_counter()
        try:
            self.provider = LocalProvider(self.model_path, self.tokenizer_path)
            log.info("loaded the model in %.2f s", time.perf_counter() - started)
        except (EmbeddingError, OSError, RuntimeError) as exc:
            self.load_error = str(exc)
            log.error("cannot load the model: %s", exc)
        self.loaded.set()

    def _connection(self, conn: socket.socket) -> None:
        with conn:
            if not check_peer(conn):
                log.warning("refused a connection from another user")
                return
            reader = conn.makefile("rb")
            while True:
                try:
                    line = reader.readline(MAX_REQUEST)
                except OSError:
                    return
                if not line.endswith(b"\n"):
                    return  # the client went away (or sent more than a request may hold)
                with self.state_lock:
                    self.busy += 1
                beating = _Heartbeat(conn)
                try:
                    reply, payload = self._answer(line)
                    beating.stop()
                    conn.sendall(json.dumps(reply).encode() + b"\n" + payload)
                except OSError:
                    return
                finally:
                    beating.stop()
                    with self.state_lock:
                        self.busy -= 1
                        self.last_request = time.monotonic()

    def _answer(self, line: bytes) -> tuple[dict[str, object], bytes]:
        try:
            request = json.loads(line)
            texts = request.get("texts", []) if isinstance(request, dict) else None
        except ValueError:
            request, texts = None, None
        if not isinstance(request, dict) or request.get("v") != PROTOCOL or not isinstance(texts, list) \
                or not all(isinstance(t, str) for t in texts):
            return {"error": "malformed request"}, b""
        self.loaded.wait()
        if self.provider is None:
            return {"error": self.load_error or "the model is not loaded"}, b""
        if request.get("op") == "hello":
            return {"model": self.provider.model, "dims": self.provider.dims, "pid": os.getpid()}, b""
        try:
            if request.get("op") == "spans":
                spans = request.get("spans")
                if not _span_lists(spans, len(texts)):
                    return {"error": "malformed request"}, b""
                whole, pooled = self.provider.embed_spans(texts, spans)
                rows = np.concatenate([whole, pooled])
            else:
                rows = self.provider.embed(texts)
        except Exception as exc:  # noqa: BLE001 (the client gets the reason; the service goes on)
            log.warning("embedding %d texts failed: %s", len(texts), exc)
            return {"error": f"embedding failed: {exc}"}, b""
        self.embedded += len(texts)
        data = rows.astype("<f4", copy=False).tobytes()
        return {"rows": int(rows.shape[0]), "dims": int(rows.shape[1])}, data


def _span_lists(spans: object, texts: int) -> bool:
    """Whether ``spans`` is one list of span sets per text, each a list of [start, end] pairs."""
    return (isinstance(spans, list) and len(spans) == texts
            and all(isinstance(sets, list) and all(
                isinstance(ranges, list) and all(
                    isinstance(r, list) and len(r) == 2 and all(isinstance(x, int) for x in r) for r in ranges)
                for ranges in sets) for sets in spans))


class _Heartbeat:
    """While a request is worked on, a line every HEARTBEAT_S says so: a client tells a busy
    service (another client's batch ahead, the model loading) from a stuck one (stopped with
    SIGSTOP, hung), which says nothing, and gives up on that one in seconds, not minutes."""

    def __init__(self, conn: socket.socket) -> None:
        self.conn = conn
        self.lock = threading.Lock()
        self.done = False
        self.wakeup = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    def _run(self) -> None:
        while not self.wakeup.wait(HEARTBEAT_S):
            with self.lock:
                if self.done:
                    return
                try:
                    self.conn.sendall(WORKING)
                except OSError:
                    return

    def stop(self) -> None:
        """After this returns no heartbeat is sent: the reply may follow on the socket."""
        with self.lock:
            self.done = True
        self.wakeup.set()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="memfs-embedservice", description=__doc__.splitlines()[0])
    parser.add_argument("--folder", required=True)
    parser.add_argument("--key", required=True)
    parser.add_argument("--model-path", default="")
    parser.add_argument("--tokenizer-path", default="")
    parser.add_argument("--idle", type=float, default=900.0)
    parser.add_argument("--detach", action="store_true")
    args = parser.parse_args(argv)
    if args.detach and os.fork():
        os._exit(0)  # the client reaps this parent at once; the service lives on in the child
    logging.basicConfig(level=logging.INFO, format=f"%(asctime)s embed[{os.getpid()}] %(levelname)s %(message)s")
    service = EmbeddingService(Path(args.folder), args.key, args.model_path, args.tokenizer_path, args.idle)

    def stop(signum: int, _frame: object) -> None:
        log.info("%s: stopping", signal.Signals(signum).name)
        raise SystemExit(0)  # in the accept loop: its finally withdraws the socket and the record

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        code = service.serve()
    except SystemExit:
        code = 0
    logging.shutdown()
    # Past the model runtime's exit handlers: its worker threads abort the process ("terminate
    # called without an active exception") when torn down while idle.
    os._exit(code)


if __name__ == "__main__":
    sys.exit(main())
