"""The embedding model reads each text about once (real LoCoMo files, the real local model): word
pieces read per word piece indexed at most 1.25 with embedding.read_once, and a chunk's vector made from
its units'; by default each passage read whole."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest

from memfs.index import readings
from memfs.index.embeddings import LocalProvider
from memfs.index.embedwork import indexed_texts, pieces
from memfs.index.units import plain
from memfs.memory import Memory

DATA = Path(__file__).resolve().parent / "data"
MAX_RATIO = 1.25  # issue #20: at most a quarter more than the text itself


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider()  # in this process, so it counts what it reads


@pytest.fixture
def counted(make_config, provider: LocalProvider) -> Iterator[Callable[[Path], Memory]]:
    """Memory that embeds with ``provider``."""
    opened: list[Memory] = []

    def build(workspace: Path) -> Memory:
        opened.append(Memory(make_config(workspace, embedding__read_once="true"), provider=provider))
        return opened[-1]

    yield build
    for memory in opened:
        memory.close()


@pytest.mark.parametrize(("source", "rel"), [("locomo-2023-05-08.md", "memory/2023-05-08.md"),
                                             ("locomo-2023-05-08.jsonl", "clawgpt-memory/2023-05-08.jsonl")])
def test_the_model_reads_each_text_about_once(workspace: Path, counted, provider: LocalProvider,
                                              source: str, rel: str) -> None:
    (workspace / "MEMORY.md").unlink()
    target = workspace / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / source, target)
    memory = counted(workspace)
    before = provider.pieces_read
    memory.indexer.reconcile()
    assert memory.embed_pending() > 0 and memory.pending == 0
    read = provider.pieces_read - before
    indexed = pieces(provider.tokenizer, indexed_texts(rel, target.read_text()))
    assert indexed > 400
    assert read / indexed <= MAX_RATIO, f"{rel}: {read} pieces read for {indexed} indexed ({read / indexed:.2f})"


def test_a_chunk_vector_is_made_from_its_units(workspace: Path, counted, locomo_day,
                                               provider: LocalProvider) -> None:
    locomo_day(workspace)
    memory = counted(workspace)
    memory.index()
    chunks = memory.store.chunks_by_id(
        [int(r[0]) for r in memory.store.conn.execute("SELECT id FROM chunks WHERE path = 'memory/2023-05-08.md'")])
    assert len(chunks) == 2
    for chunk_id, chunk in chunks.items():
        parts = readings.chunk_readings(memory.store.units_of([chunk_id]))
        assert len(parts) > 5  # the turns of the day, each read once
        expected = readings.mean(parts, dict(zip(parts, provider.embed(parts))))
        similarity = memory.store.vector_similarity(expected, [chunk_id])[chunk_id]
        assert similarity > 0.999
        # ... which is not what reading the chunk whole gives
        assert float(provider.embed([chunk.text])[0] @ expected) < 0.99


def test_by_default_each_passage_is_read_whole(workspace: Path, make_config, locomo_day,
                                               provider: LocalProvider) -> None:
    """embedding.read_once is off by default: a chunk's vector is the model's reading of it."""
    locomo_day(workspace)
    memory = Memory(make_config(workspace), provider=provider)
    try:
        memory.index()
        chunks = memory.store.chunks_by_id([int(r[0]) for r in memory.store.conn.execute(
            "SELECT id FROM chunks WHERE path = 'memory/2023-05-08.md'")])
        for chunk_id, chunk in chunks.items():
            whole = provider.embed([plain(chunk.text)])[0]
            assert memory.store.vector_similarity(whole, [chunk_id])[chunk_id] > 0.999
    finally:
        memory.close()
