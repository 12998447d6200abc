"""A small OpenAI-compatible embeddings server on 127.0.0.1 for tests: real HTTP, real JSON.

Vectors are hashed bags of words (64 dims), so texts sharing words are similar.  ``fail_next``
makes the next requests answer with a given HTTP status (429 or 5xx) to exercise retries.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DIMS = 64


def bag_of_words(text: str) -> list[float]:
    vector = [0.0] * DIMS
    for word in re.findall(r"\w+", text.lower()):
        digest = hashlib.sha256(word.encode()).digest()
        vector[digest[0] % DIMS] += 1.0 if digest[1] % 2 else -1.0
    return vector


class EmbeddingServer:
    def __init__(self, api_key: str = "sk-test") -> None:
        self.api_key = api_key
        self.requests: list[dict] = []
        self.fail_next: list[int] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                if self.path != "/v1/embeddings":
                    return self._reply(404, {"error": {"message": "not found"}})
                if self.headers.get("Authorization") != f"Bearer {server.api_key}":
                    return self._reply(401, {"error": {"message": "bad key", "type": "invalid_request_error"}})
                payload = json.loads(body)
                server.requests.append(payload)
                if server.fail_next:
                    status = server.fail_next.pop(0)
                    return self._reply(status, {"error": {"message": f"injected {status}"}}, retry_after="0")
                inputs = payload["input"] if isinstance(payload["input"], list) else [payload["input"]]
                data = [{"object": "embedding", "index": i, "embedding": bag_of_words(t)} for i, t in enumerate(inputs)]
                self._reply(200, {"object": "list", "data": data, "model": payload["model"],
                                  "usage": {"prompt_tokens": 1, "total_tokens": 1}})

            def _reply(self, status: int, obj: dict, retry_after: str | None = None) -> None:
                raw = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                if retry_after is not None:
                    self.send_header("Retry-After", retry_after)
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"

    def __enter__(self) -> EmbeddingServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
