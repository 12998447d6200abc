"""A small /rerank server on 127.0.0.1 for tests: real HTTP, real JSON, in the shapes cross-encoder
servers answer.  It scores each text by how many of the query's words it holds, but prefers
the texts that name ``favour`` (a word the test chooses) above everything, so a test can see its
order win over memfs's.  ``shape``: "cohere" (``{"results": [{"index", "relevance_score"}]}``, as
Jina, Cohere, vLLM and llama.cpp answer) or "tei" (``[{"index", "score"}]``); ``delay_s`` makes it
slow; ``requests`` keeps what it was asked."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class RerankServer:
    def __init__(self, favour: str = "", shape: str = "cohere", delay_s: float = 0.0, token: str = "") -> None:
        self.favour, self.shape, self.delay_s, self.token = favour.lower(), shape, delay_s, token
        self.requests: list[dict] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
                if self.path != "/rerank":
                    return self._reply(404, {"error": f"no route {self.path}"})
                if server.token and self.headers.get("Authorization") != f"Bearer {server.token}":
                    return self._reply(401, {"error": "bad token"})
                server.requests.append(body)
                if server.delay_s:
                    time.sleep(server.delay_s)
                words = set(re.findall(r"\w+", body["query"].lower()))
                texts = body.get("documents") or body.get("texts") or []
                scores = [len(words & set(re.findall(r"\w+", t.lower()))) / (len(words) or 1)
                          + (10.0 if server.favour and server.favour in t.lower() else 0.0) for t in texts]
                if server.shape == "tei":
                    return self._reply(200, [{"index": i, "score": s} for i, s in enumerate(scores)])
                ranked = sorted(range(len(scores)), key=lambda i: -scores[i])
                self._reply(200, {"results": [{"index": i, "relevance_score": scores[i]} for i in ranked]})

            def _reply(self, status: int, obj: object) -> None:
                raw = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> RerankServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
