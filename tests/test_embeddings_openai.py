"""The ``openai`` provider against a real HTTP server on 127.0.0.1 (tests/openai_server.py):
requests in flight at once, retries, the errors a user can act on, and the warm process keeping
the server busy."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import numpy as np
import pytest
import trio
from conftest import write
from mounts import memfs_cli
from openai_server import DIMS, EmbeddingServer, bag_of_words

from memfs import commands
from memfs.config import EmbeddingConfig
from memfs.embedder import BackgroundEmbedder
from memfs.index.embedding.providers import EmbeddingError, OpenAIProvider

KEY_ENV = "MEMFS_TEST_KEY"
DELAY_S = 0.05


def provider(server: EmbeddingServer, **settings: object) -> OpenAIProvider:
    settings = {"model": "test-embed", "dimensions": DIMS, "max_retries": 0, **settings}
    return OpenAIProvider(EmbeddingConfig(provider="openai", base_url=server.base_url, api_key_env=KEY_ENV,
                                          **settings))


def expected(texts: list[str]) -> np.ndarray:
    rows = np.asarray([bag_of_words(t) for t in texts], dtype=np.float32)
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


@pytest.fixture(autouse=True)
def key(monkeypatch) -> None:
    monkeypatch.setenv(KEY_ENV, "sk-test")


def test_concurrent_requests_keep_order_bounded_and_faster() -> None:
    texts = [f"note {i} about topic{i % 7} and word{i}" for i in range(64)]  # 16 requests of 4
    with EmbeddingServer(delay_s=DELAY_S) as server:
        timings: dict[int, list[float]] = {1: [], 4: []}
        for concurrency in timings:
            client = provider(server, batch_size=4, concurrency=concurrency)
            for _ in range(3):
                server.reset_counts()
                started = time.perf_counter()
                vectors = client.embed(texts)
                timings[concurrency].append(time.perf_counter() - started)
                assert len(server.requests) == 16
                assert server.peak == concurrency  # never more in flight than configured
                assert np.allclose(vectors, expected(texts), atol=1e-6)  # each row is its own text's
        one, four = (statistics.median(timings[c]) for c in (1, 4))
        assert one >= 16 * DELAY_S
        assert one / four >= 3, timings


def test_first_failure_cancels_what_has_not_started() -> None:
    with EmbeddingServer(delay_s=DELAY_S) as server:
        client = provider(server, batch_size=1, concurrency=2)
        server.fail_next = [400]  # not retried
        with pytest.raises(EmbeddingError, match="HTTP 400"):
            client.embed([f"text {i}" for i in range(16)])
        time.sleep(3 * DELAY_S)  # what was under way has finished
        assert len(server.requests) <= 4  # not all 16


def test_429_waits_as_retry_after_says() -> None:
    with EmbeddingServer() as server:
        client = provider(server, max_retries=2)
        server.fail_next = [(429, "1")]
        vectors = client.embed(["alpha beta"])
        assert np.allclose(vectors, expected(["alpha beta"]), atol=1e-6)
        gap = server.arrivals[1] - server.arrivals[0]
        assert 0.95 <= gap < 3  # the client's own first backoff would be at most 0.5 s


def test_503_is_retried_with_growing_backoff() -> None:
    with EmbeddingServer() as server:
        client = provider(server, max_retries=2)
        server.fail_next = [(503, None), (503, None)]
        vectors = client.embed(["alpha beta"])
        assert np.allclose(vectors, expected(["alpha beta"]), atol=1e-6)
        first, second = np.diff(server.arrivals)
        assert 0.3 <= first < second < 3  # 0.5 s then 1 s, less up to a quarter of jitter
        server.fail_next = [(503, None)] * 3
        with pytest.raises(EmbeddingError, match="HTTP 503 after 2 retries"):
            client.embed(["alpha beta"])


def test_401_names_the_variable_to_set(monkeypatch) -> None:
    with EmbeddingServer(api_key="other") as server:
        with pytest.raises(EmbeddingError, match=rf"refused the API key.*set \${KEY_ENV} to a key it accepts"):
            provider(server).embed(["x"])
        monkeypatch.delenv(KEY_ENV)
        with pytest.raises(EmbeddingError, match=rf"refused the API key.*\${KEY_ENV} is not set"):
            provider(server).embed(["x"])


def test_404_names_the_model_and_the_url_requested() -> None:
    with EmbeddingServer(models={"known-model"}) as server:
        with pytest.raises(EmbeddingError) as wrong_model:
            provider(server, model="no-such-model").embed(["x"])
        message = str(wrong_model.value)
        assert "'no-such-model'" in message and f"POST {server.base_url}/embeddings" in message
        assert "does not exist" in message and "/v1" not in message.split("answered")[1]
        root = server.base_url.removesuffix("/v1")
        bare = OpenAIProvider(EmbeddingConfig(provider="openai", base_url=root, api_key_env=KEY_ENV,
                                              model="known-model", dimensions=DIMS, max_retries=0))
        with pytest.raises(EmbeddingError, match=rf"POST {root}/embeddings answered HTTP 404.*try {root}/v1"):
            bare.embed(["x"])


def test_cli_says_what_is_wrong_without_a_traceback(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "memory" / "2024-01-01.md", "- Our deploy target is the Frankfurt region.\n")
    with EmbeddingServer(api_key="other") as server:
        # As before the change: indexing builds the keyword index and warns, a search warns and
        # answers from keywords; now the warning says what to fix.
        for command, base_url, says in (
            (["index"], server.base_url, f"set ${KEY_ENV} to a key it accepts"),
            (["search", "Frankfurt"], server.base_url.removesuffix("/v1"), "usually ends in /v1"),
        ):
            settings = ["--workspace", str(ws), "--set", "embedding.provider=openai", "--set",
                        f"embedding.base_url={base_url}", "--set", f"embedding.api_key_env={KEY_ENV}",
                        "--set", "embedding.dimensions=64", "--set", "embedding.max_retries=0"]
            env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), KEY_ENV: "sk-test"}
            out = memfs_cli(*command, *settings, env=env)
            assert out.returncode == 0 and "Traceback" not in out.stderr, out.stderr
            assert says in out.stderr + out.stdout
        assert "Frankfurt region" in out.stdout


def _many_chunks(workspace: Path, count: int) -> None:
    write(workspace / "memory" / "2024-01-01.md",
          "".join(f"## Day part {i}\n\nWe talked about subject{i} with person{i} at length today.\n\n"
                  for i in range(count)))


def openai_memory(make_memory, workspace: Path, server: EmbeddingServer, batch_size: int, concurrency: int):
    """A Memory that embeds through ``server``, with many small chunks to embed."""
    memory = make_memory(workspace, embedding__provider="openai", embedding__base_url=server.base_url,
                         embedding__api_key_env=KEY_ENV, embedding__model="test-embed", embedding__dimensions=DIMS,
                         embedding__batch_size=batch_size, embedding__concurrency=concurrency,
                         chunking__tokens=16, chunking__overlap=0)
    _many_chunks(workspace, 40)
    return memory


def test_background_embedder_keeps_the_server_busy(workspace: Path, make_memory) -> None:
    with EmbeddingServer(delay_s=DELAY_S) as server:
        memory = openai_memory(make_memory, workspace, server, batch_size=4, concurrency=4)
        memory.reconcile()
        assert memory.pending >= 32
        embedder = BackgroundEmbedder(memory)

        async def embed_all() -> None:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(embedder.run)
                embedder.kick()
                with trio.fail_after(60):
                    while memory.pending:
                        await trio.sleep(0.02)
                nursery.cancel_scope.cancel()

        trio.run(embed_all)
        assert server.peak == 4 and not memory.provider_error


def test_memfs_index_keeps_the_server_busy(workspace: Path, make_memory) -> None:
    with EmbeddingServer(delay_s=DELAY_S) as server:
        memory = openai_memory(make_memory, workspace, server, batch_size=16, concurrency=3)
        commands.index(memory, memory.cfg, {})
        assert memory.pending == 0 and server.peak == 3
        hits = memory.search("subject7 person7").results
        assert hits and hits[0].vector_score > 0


def test_a_server_answering_lists_of_floats_is_read_too() -> None:
    texts = [f"passage {i} on topic{i % 5}" for i in range(10)]
    with EmbeddingServer(answer_base64=False) as server:
        vectors = provider(server, batch_size=3, concurrency=2).embed(texts)
        assert np.allclose(vectors, expected(texts), atol=1e-6)


def test_other_vectors_than_the_index_in_use_holds_mean_keyword_answers_not_a_traceback(
        workspace: Path, make_memory) -> None:
    # A daemon built the index with the local model and still uses it; a command with the openai
    # provider (other dims) must neither write its vectors into it nor crash.
    write(workspace / "memory" / "2026-11-20.md", "# Nov 20\n\n- The plumber fixed the kitchen sink.\n")
    holder = make_memory(workspace)
    holder.reconcile()
    with EmbeddingServer() as server:
        other = make_memory(workspace, embedding__provider="openai", embedding__base_url=server.base_url,
                            embedding__api_key_env=KEY_ENV, embedding__model="test-embed",
                            embedding__dimensions=DIMS)
        write(workspace / "memory" / "2026-11-21.md", "# Nov 21\n\n- Bought tulip bulbs for the garden.\n")
        other.reconcile()  # indexes the new day by keyword; embeds nothing of its own
        other.embed_pending()
        response = other.search("tulip bulbs")
        assert response.results and response.results[0].path == "memory/2026-11-21.md"
        assert any("memfs index --rebuild" in w for w in response.warnings), response.warnings
        assert not server.requests
    holder.embed_pending()  # the index's own model embeds the new day, as the daemon would
    hits = holder.search("flowers for the garden", min_score=0).results
    assert any(h.path == "memory/2026-11-21.md" and h.vector_score > 0 for h in hits)


def test_a_server_found_down_is_not_asked_again_at_once() -> None:
    with EmbeddingServer() as server:
        client = provider(server)
        client.embed(["up"])
        server.fail_next = [(503, None)]
        with pytest.raises(EmbeddingError, match="HTTP 503"):
            client.embed(["overloaded"])
        asked = len(server.requests)
        with pytest.raises(EmbeddingError, match="not asked again"):
            client.embed(["meanwhile"])  # a search now answers by keyword without waiting on retries
        assert len(server.requests) == asked
