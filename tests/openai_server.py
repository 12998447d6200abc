"""A small OpenAI-compatible embeddings server on 127.0.0.1 for tests: real HTTP, real JSON.

Vectors are hashed bags of words (64 dims), so texts sharing words are similar.  ``fail_next``
makes the next requests answer with a given HTTP status (429 or 5xx) to exercise retries, either
a bare status (Retry-After: 0, so the client's own backoff decides) or ``(status, retry_after)``
(``None``: no Retry-After header).  ``delay_s`` makes each answer take that long, as a GPU server's
does; ``peak`` is the most requests it has had in flight at once.  ``models``, when given, are the
only model names it knows (any other is a 404, as vLLM and Ollama answer).
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMS = 64


def bag_of_words(text: str) -> list[float]:
    vector = [0.0] * DIMS
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % DIMS] += 1.0 if digest[1] % 2 else -1.0
    return vector


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the listen backlog: a burst of connections is accepted, not refused


class EmbeddingServer:
    def __init__(self, api_key: str = "sk-test", delay_s: float = 0.0, models: set[str] | None = None) -> None:
        self.api_key = api_key
        self.delay_s = delay_s
        self.models = models
        self.requests: list[dict] = []
        self.arrivals: list[float] = []  # time.monotonic() of each authorised request
        self.fail_next: list[int | tuple[int, str | None]] = []
        self.in_flight = 0
        self.peak = 0
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # keep-alive, as real servers do
            disable_nagle_algorithm = True  # or headers and body, written apart, wait ~40 ms for an ACK

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/v1/embeddings":
                    return self._reply(404, {"error": {"message": f"no route {self.path}"}})
                if self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    return self._reply(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
                payload = json.loads(body)
                if server.models is not None and payload["model"] not in server.models:
                    return self._reply(404, {"object": "error", "message": f"The model `{payload['model']}` "
                                             "does not exist.", "type": "NotFoundError", "code": 404})
                with server._lock:
                    server.requests.append(payload)
                    server.arrivals.append(time.monotonic())
                    failure = server.fail_next.pop(0) if server.fail_next else None
                    server.in_flight += 1
                    server.peak = max(server.peak, server.in_flight)
                try:
                    if server.delay_s:
                        time.sleep(server.delay_s)
                    if failure is not None:
                        status, retry_after = failure if isinstance(failure, tuple) else (failure, "0")
                        return self._reply(status, {"error": {"message": f"injected {status}"}}, retry_after)
                    inputs = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
                    data = [{"object": "embedding", "index": i, "embedding": bag_of_words(t)}
                            for i, t in enumerate(inputs)]
                    self._reply(200, {"object": "list", "data": data, "model": payload["model"],
                                      "usage": {"prompt_tokens": 1, "total_tokens": 1}})
                finally:
                    with server._lock:
                        server.in_flight -= 1

            def _reply(self, status: int, obj: dict, retry_after: str | None = None) -> None:
                raw = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = _Server(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def reset_counts(self) -> None:
        with self._lock:
            self.requests.clear()
            self.arrivals.clear()
            self.peak = self.in_flight

    def __enter__(self) -> EmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
