#!/usr/bin/env python3
"""Throughput of the ``openai`` embedding provider against a remote server, by requests in flight.

    python scripts/bench_openai.py [--texts 1024,2048,10240] [--concurrency 1,2,4,8] [--rounds 3]
                                   [--delay 0.05] [--batch-size 64] [--load 0]

The server is tests/openai_server.py in its own process on 127.0.0.1, every answer taking --delay
seconds as a GPU server's does.  For each number of texts and each ``embedding.concurrency``,
the median of --rounds of ``OpenAIProvider.embed(texts)`` (the call the indexer and the warm
process make): texts/s, the ratio to one request in flight, and the peak the server saw.

The physical limit is measured in the same run: the same requests sent by N threads of raw
``http.client`` on kept-alive connections (no SDK, no parsing of the answer), beside the
theoretical N x batch-size / delay.  ``--load N`` runs N busy loops beside all of it.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "MEMFS_BENCH_KEY"
WORDS = ("deploy region frankfurt database migration garden tomatoes birthday lemon cake ferry hydra "
         "meeting budget quarter review travel booking allergy penicillin support group painting").split()


def busy() -> None:
    while True:
        pass


def corpus(count: int) -> list[str]:
    """Distinct passages of about 30 words, as chunks of notes."""
    return [" ".join(WORDS[(i * 7 + j * 3) % len(WORDS)] for j in range(28)) + f" note{i} day{i % 31}"
            for i in range(count)]


def stats(base_url: str) -> dict[str, int]:
    parts = urlsplit(base_url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    try:
        conn.request("GET", "/stats")
        return json.loads(conn.getresponse().read())
    finally:
        conn.close()


def raw_ceiling(base_url: str, threads: int, batches: list[list[str]]) -> float:
    """Requests per second that ``threads`` raw HTTP clients get for ``batches``."""
    parts = urlsplit(base_url)
    queue = list(reversed(batches))
    lock = threading.Lock()

    def worker() -> None:
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        headers = {"Authorization": "Bearer sk-test", "Content-Type": "application/json"}
        try:
            while True:
                with lock:
                    if not queue:
                        return
                    batch = queue.pop()
                conn.request("POST", parts.path + "/embeddings",
                             json.dumps({"model": "bench", "input": batch}), headers)
                response = conn.getresponse()
                response.read()
                assert response.status == 200, response.status
        finally:
            conn.close()

    started = time.perf_counter()
    pool = [threading.Thread(target=worker) for _ in range(threads)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    return len(batches) / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--texts", default="1024,2048,10240", help="numbers of texts, comma-separated")
    parser.add_argument("--concurrency", default="1,2,4,8", help="requests in flight, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--delay", type=float, default=0.05, help="seconds the server takes per request")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--load", type=int, default=0, help="busy loops running beside the benchmark")
    args = parser.parse_args()
    sizes = [int(n) for n in args.texts.split(",")]
    levels = [int(n) for n in args.concurrency.split(",")]

    sys.path.insert(0, str(ROOT))
    os.environ[KEY_ENV] = "sk-test"
    from memfs.config import EmbeddingConfig
    from memfs.index.embedding.providers import OpenAIProvider

    loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for loop in loops:
        loop.start()
    server = subprocess.Popen([sys.executable, str(ROOT / "tests" / "openai_server.py"), "--delay", str(args.delay)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        base_url = server.stdout.readline().strip()
        print(f"server {base_url}: {args.delay * 1000:.0f} ms per request, {args.batch_size} texts per request; "
              f"{args.load} busy loops beside on {os.cpu_count()} cores; medians of {args.rounds} rounds")
        probe = corpus(2048)  # the ceiling is taken on the requests of 2,048 texts
        probe_batches = [probe[i : i + args.batch_size] for i in range(0, len(probe), args.batch_size)]
        ceiling = {threads: statistics.median(raw_ceiling(base_url, threads, probe_batches)
                                              for _ in range(args.rounds)) * args.batch_size
                   for threads in levels}
        stats(base_url)
        print(f"\n{'texts':>6} {'in flight':>9} {'texts/s':>9} {'vs 1':>6} {'peak':>5} {'raw limit':>10} "
              f"{'theory':>8} {'of raw':>7}")
        for size in sizes:
            texts = corpus(size)
            base = 0.0
            for concurrency in levels:
                provider = OpenAIProvider(EmbeddingConfig(
                    provider="openai", base_url=base_url, api_key_env=KEY_ENV, model="bench", dimensions=64,
                    batch_size=args.batch_size, concurrency=concurrency, max_retries=0))
                provider.embed(texts[: args.batch_size * concurrency])  # connections opened, pool started
                stats(base_url)
                times = []
                for _ in range(args.rounds):
                    started = time.perf_counter()
                    vectors = provider.embed(texts)
                    times.append(time.perf_counter() - started)
                    assert vectors.shape == (size, 64)
                peak = stats(base_url)["peak"]
                rate = size / statistics.median(times)
                base = base or rate
                theory = concurrency * args.batch_size / args.delay
                print(f"{size:>6} {concurrency:>9} {rate:>9.0f} {rate / base:>5.2f}x {peak:>5} "
                      f"{ceiling[concurrency]:>10.0f} {theory:>8.0f} {rate / ceiling[concurrency]:>6.0%}")
    finally:
        if server.stdin:
            server.stdin.close()
        server.wait(timeout=10)
        for loop in loops:
            loop.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
