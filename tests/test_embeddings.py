from __future__ import annotations

import socket
from pathlib import Path

import numpy as np
import pytest
from conftest import write
from openai_server import DIMS, EmbeddingServer

from memfs.config import EmbeddingConfig
from memfs.index.embedding.choice import make_provider
from memfs.index.embedding.providers import EmbeddingError, LocalProvider, OpenAIProvider


def test_local_model_is_normalised_and_meaningful() -> None:
    provider = make_provider(EmbeddingConfig())
    vectors = provider.embed(["The cat sat on the mat", "A kitten rested on the rug", "Quarterly revenue grew"])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1, atol=1e-4)
    assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2] + 0.3


def test_local_model_reads_past_256_word_pieces() -> None:
    provider = make_provider(EmbeddingConfig())
    head = "We planned the garden and talked about tomatoes. " * 40
    a = provider.embed([head + "The database migration to PostgreSQL failed twice."])[0]
    b = provider.embed([head + "Grandma's birthday cake had lemon frosting."])[0]
    assert float(a @ b) < 0.999  # the tail past the first window changes the vector


def test_local_model_by_path_is_checked(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingError, match="does not exist"):
        LocalProvider(model_path=str(tmp_path / "missing.onnx"))


def test_openai_round_trip_batches_and_retries(workspace: Path, make_memory, monkeypatch) -> None:
    monkeypatch.setenv("MEMFS_TEST_KEY", "sk-test")
    with EmbeddingServer() as server:
        cfg = EmbeddingConfig(provider="openai", base_url=server.base_url, api_key_env="MEMFS_TEST_KEY",
                              model="test-embed", batch_size=2, max_retries=3)
        provider = OpenAIProvider(cfg)
        assert provider.dims == DIMS  # probed from the server
        server.fail_next = [429, 503]
        vectors = provider.embed(["alpha beta", "alpha beta gamma", "delta"])
        assert vectors.shape == (3, DIMS)
        assert vectors[0] @ vectors[1] > vectors[0] @ vectors[2]
        batches = [len(r["input"]) for r in server.requests if r["input"] != ["dimension probe"]]
        assert sorted(batches[-2:]) == [1, 2]  # batched by batch_size, after two retried failures

        write(workspace / "MEMORY.md", "- Our deploy target is the Frankfurt region.\n")
        memory = make_memory(workspace, embedding__provider="openai", embedding__base_url=server.base_url,
                             embedding__api_key_env="MEMFS_TEST_KEY", embedding__model="test-embed",
                             embedding__dimensions=DIMS)
        memory.index()
        response = memory.search("Frankfurt deploy region")
        assert response.results and response.results[0].vector_score > 0 and not response.warnings


def test_openai_errors_name_the_cause(monkeypatch) -> None:
    monkeypatch.delenv("MEMFS_NO_SUCH_KEY", raising=False)
    with pytest.raises(EmbeddingError, match="MEMFS_NO_SUCH_KEY"):
        OpenAIProvider(EmbeddingConfig(provider="openai", api_key_env="MEMFS_NO_SUCH_KEY"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("MEMFS_TEST_KEY", "sk-test")
    provider = OpenAIProvider(EmbeddingConfig(provider="openai", base_url=f"http://127.0.0.1:{port}/v1",
                                              api_key_env="MEMFS_TEST_KEY", max_retries=0, dimensions=8))
    with pytest.raises(EmbeddingError, match="cannot reach"):
        provider.embed(["x"])
    with EmbeddingServer(api_key="other") as server:
        provider = OpenAIProvider(EmbeddingConfig(provider="openai", base_url=server.base_url,
                                                  api_key_env="MEMFS_TEST_KEY", dimensions=8, max_retries=0))
        with pytest.raises(EmbeddingError, match="refused the API key"):
            provider.embed(["x"])
