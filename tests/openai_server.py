"""A small OpenAI-compatible embeddings server on 127.0.0.1 for tests: real HTTP, real JSON.

Vectors are hashed bags of words (64 dims), so texts sharing words are similar; sent as lists of
floats, or as base64 float32 when the request asks (as the openai client does, and OpenAI, vLLM,
TEI and llama.cpp answer).  ``fail_next``
makes the next requests answer with a given HTTP status (429 or 5xx) to exercise retries, either
a bare status (Retry-After: 0, so the client's own backoff decides) or ``(status, retry_after)``
(``None``: no Retry-After header).  ``delay_s`` makes each answer take that long, as a GPU server's
does; ``peak`` is the most requests it has had in flight at once.  ``models``, when given, are the
only model names it knows (any other is a 404, as vLLM and Ollama answer).  ``GET /stats`` says
how many requests and what peak since it was last asked.

Run as a program (``python tests/openai_server.py --delay 0.05``) it prints its base URL and
serves until killed or until its standard input closes.
"""

from __future__ import annotations

import argparse
import base64
import functools
import hashlib
import json
import re
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMS = 64


@functools.lru_cache(maxsize=1 << 16)  # the server's time is its delay, not hashing a text again
def bag_of_words(text: str) -> tuple[float, ...]:
    vector = [0.0] * DIMS
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % DIMS] += 1.0 if digest[1] % 2 else -1.0
    return tuple(vector)


class _Server(ThreadingHTTPServer):
    request_queue_size = 128  # the listen backlog: a burst of connections is accepted, not refused


class EmbeddingServer:
    def __init__(self, api_key: str = "sk-test", delay_s: float = 0.0, models: set[str] | None = None,
                 answer_base64: bool = True) -> None:
        self.api_key = api_key
        self.answer_base64 = answer_base64  # False: lists of floats whatever is asked, as some servers answer
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

            def do_GET(self) -> None:  # noqa: N802
                if self.path != "/stats":
                    return self._reply(404, {"error": {"message": f"no route {self.path}"}})
                with server._lock:  # counted since the last look, for a client in another process
                    stats = {"requests": len(server.requests), "peak": server.peak}
                server.reset_counts()
                self._reply(200, stats)

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
                    vectors = [bag_of_words(t) for t in inputs]
                    if server.answer_base64 and payload.get("encoding_format") == "base64":  # as the client asks
                        vectors = [base64.b64encode(struct.pack(f"<{DIMS}f", *v)).decode() for v in vectors]
                    data = [{"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)]
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


def main() -> None:
    parser = argparse.ArgumentParser(description="an OpenAI-compatible embeddings server on 127.0.0.1")
    parser.add_argument("--delay", type=float, default=0.0, help="seconds each answer takes")
    parser.add_argument("--api-key", default="sk-test")
    args = parser.parse_args()
    with EmbeddingServer(api_key=args.api_key, delay_s=args.delay) as server:
        print(server.base_url, flush=True)
        sys.stdin.read()  # until the parent closes it (or is gone)


if __name__ == "__main__":
    main()
