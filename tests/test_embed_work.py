"""The embedding model reads each text about once (real LoCoMo files, the real local model): word
pieces read per word piece indexed at most 1.25 with late chunking (a chunk read once, a unit's
vector pooled over its span in it, recomputed here from the ONNX session's own output states),
which is the default for JSONL chats (`embedding.late_chunking = "chats"`) and, with "auto",
for daily logs too, and reading each text once (a chunk's vector made from its units'), which is
how the default reads Markdown, "auto" MEMORY.md's facts, and embedding.read_once everything;
everything with embedding.late_chunking off is read whole."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
from conftest import begin_schema_7

from memfs.index.embedding import readings
from memfs.index.embedding.providers import LocalProvider
from memfs.index.embedding.workratio import indexed_texts, pieces
from memfs.index.storage.vectors import unpack_unit_vector
from memfs.index.text.units import plain
from memfs.memory import Memory
from memfs.render.status import render_status

DATA = Path(__file__).resolve().parent / "data"
MAX_RATIO = 1.25  # issue #20: at most a quarter more than the text itself


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider()  # in this process, so it counts what it reads


@pytest.fixture
def counted(make_config, provider: LocalProvider) -> Iterator[Callable[..., Memory]]:
    """Memory that embeds with ``provider`` (read_once on unless told otherwise)."""
    opened: list[Memory] = []

    def build(workspace: Path, **settings: str) -> Memory:
        opened.append(Memory(make_config(workspace, **(settings or {"embedding__read_once": "true"})),
                             provider=provider))
        return opened[-1]

    yield build
    for memory in opened:
        memory.close()


def _copy(workspace: Path, source: str, rel: str) -> Path:
    (workspace / "MEMORY.md").unlink()
    target = workspace / rel
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / source, target)
    return target


FILES = [("locomo-2023-05-08.md", "memory/2023-05-08.md"),
         ("locomo-2023-05-08.jsonl", "clawgpt-memory/2023-05-08.jsonl")]


AUTO = {"embedding__late_chunking": "auto"}
READ_ONCE_WAYS = [({}, *FILES[0]), (AUTO, *FILES[0]), ({}, *FILES[1]), ({"embedding__late_chunking": "all"}, *FILES[0]),
                  ({"embedding__read_once": "true"}, *FILES[0]), ({"embedding__read_once": "true"}, *FILES[1])]


@pytest.mark.parametrize(("settings", "source", "rel"), READ_ONCE_WAYS,
                         ids=["md_default", "md_auto", "jsonl_default", "md_late_all", "md_read_once", "jsonl_read_once"])
def test_the_model_reads_each_text_about_once(workspace: Path, make_config, provider: LocalProvider,
                                              source: str, rel: str, settings: dict[str, str]) -> None:
    target = _copy(workspace, source, rel)
    memory = Memory(make_config(workspace, **settings), provider=provider)
    try:
        before = provider.pieces_read
        memory.indexer.reconcile()
        assert memory.embed_pending() > 0 and memory.pending == 0
        read = provider.pieces_read - before
    finally:
        memory.close()
    indexed = pieces(provider.tokenizer, indexed_texts(rel, target.read_text()))
    assert indexed > 400
    assert read / indexed <= MAX_RATIO, f"{rel}: {read} pieces read for {indexed} indexed ({read / indexed:.2f})"


def _states(provider: LocalProvider, text: str) -> tuple[np.ndarray, np.ndarray]:
    """The model's output state of each word piece of ``text`` and its character offsets, from
    the ONNX session itself: the text's pieces cut into equal windows of at most 254 pieces that
    do not overlap, each read with [CLS] and [SEP]."""
    encoding = provider.tokenizer.encode(text, add_special_tokens=False)
    ids = encoding.ids
    count = -(-len(ids) // 254)
    states = []
    for part in range(count):
        window = [101, *ids[round(part * len(ids) / count) : round((part + 1) * len(ids) / count)], 102]
        feeds = {"input_ids": np.array([window], dtype=np.int64),
                 "attention_mask": np.ones((1, len(window)), dtype=np.int64)}
        if "token_type_ids" in {i.name for i in provider.session.get_inputs()}:
            feeds["token_type_ids"] = np.zeros((1, len(window)), dtype=np.int64)
        states.append(provider.session.run(None, feeds)[0][0, 1:-1])
    return np.concatenate(states), np.array(encoding.offsets)


def _line_span(text: str, line: str, before: int | None = None) -> tuple[int, int]:
    start = text.rfind(line, 0, before) if before is not None else text.find(line)
    assert start >= 0 and (start == 0 or text[start - 1] == "\n"), line
    return start, start + len(line)


@pytest.mark.parametrize(("settings", "source", "rel"), [(AUTO, *FILES[0]), ({}, *FILES[1])],
                         ids=["md_auto", "jsonl_default"])
def test_a_units_vector_is_pooled_over_its_span_in_its_chunk(workspace: Path, make_config, provider: LocalProvider,
                                                             settings: dict[str, str], source: str, rel: str) -> None:
    """Read late (a chat's messages by default, a daily log's turns with "auto"), a unit's vector is the mean of the model's output
    states over its lines (and its chat title's or headings' line) in its chunk, read once; not
    the unit read on its own."""
    _copy(workspace, source, rel)
    memory = Memory(make_config(workspace, **settings), provider=provider)
    try:
        memory.index()
        ids = [int(r[0]) for r in memory.store.conn.execute("SELECT id FROM chunks WHERE path = ?", (rel,))]
        chunks = memory.store.chunks_by_id(ids)
        checked = titled = 0
        for chunk_id, chunk in chunks.items():
            text = plain(chunk.text)
            states, offsets = _states(provider, text)
            for unit in memory.store.units_of([chunk_id]):
                if unit.reading and unit.reading != plain(unit.text):
                    continue  # a key alone is read on its own
                lines = plain(unit.text).split("\n")
                spans = [_line_span(text, line) for line in lines]
                if unit.context and not unit.reading:
                    spans.insert(0, _line_span(text, plain(unit.context), before=spans[0][0]))
                    titled += 1
                inside = np.zeros(len(offsets), dtype=bool)
                for start, end in spans:
                    inside |= (offsets[:, 0] < end) & (offsets[:, 1] > start)
                expected = states[inside].mean(axis=0)
                expected /= np.linalg.norm(expected)
                stored = unpack_unit_vector(unit.vector, provider.dims)
                assert stored is not None
                assert float(stored @ expected) / float(np.linalg.norm(stored)) > 0.999, unit.text
                alone = provider.embed([unit.embedding_text])[0]
                assert float(alone @ expected) < 0.99  # not what reading it on its own gives
                checked += 1
        assert checked > 10
        if source.endswith(".jsonl"):
            assert titled > 5  # messages pooled with their chat's title
    finally:
        memory.close()


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


@pytest.mark.parametrize(("settings", "windows"), [({"embedding__late_chunking": "false"}, "any"), ({}, "one")],
                         ids=["late_chunking_off", "default"])
def test_a_chunk_vector_is_its_whole_reading(workspace: Path, make_config, provider: LocalProvider,
                                             settings: dict[str, str], windows: str) -> None:
    """With late chunking off a chunk's vector is the model's reading of it, and so it is by
    default for a chunk that fits one window of the model (a longer one is read in windows that
    do not overlap)."""
    _copy(workspace, *FILES[1])
    memory = Memory(make_config(workspace, **settings), provider=provider)
    try:
        memory.index()
        chunks = memory.store.chunks_by_id([int(r[0]) for r in memory.store.conn.execute(
            "SELECT id FROM chunks WHERE path = ?", (FILES[1][1],))])
        assert len(chunks) >= 2
        for chunk_id, chunk in chunks.items():
            if windows == "one":
                assert len(provider.tokenizer.encode(plain(chunk.text)).ids) <= 256
            whole = provider.embed([plain(chunk.text)])[0]
            assert memory.store.vector_similarity(whole, [chunk_id])[chunk_id] > 0.999
    finally:
        memory.close()


FACTS = """# Long-term Memory

## User Preferences

- Prefers tea, no sugar.
- The user is allergic to penicillin.
- Works remotely from Lisbon.

## People

- Wife: Priya Raman
- Manager: Tom Okafor
"""


def test_memory_md_facts_are_read_alone_under_auto(workspace: Path, make_config, provider: LocalProvider) -> None:
    """MEMORY.md's facts are not pooled with their neighbours under "auto" (a fact's meaning is its
    own): a fact read without its heading has the vector of its text read alone, one under its
    heading the piece-weighted mean of the two read alone, and the chunk the mean of its parts;
    no text is read twice."""
    (workspace / "MEMORY.md").write_text(FACTS)
    memory = Memory(make_config(workspace, **AUTO), provider=provider)
    try:
        before = provider.pieces_read
        memory.index()
        assert memory.pending == 0
        read = provider.pieces_read - before
        ids = [int(r[0]) for r in memory.store.conn.execute("SELECT id FROM chunks WHERE path = 'MEMORY.md'")]
        units = memory.store.units_of(ids)
        twins = 0
        for unit in units:
            stored = unpack_unit_vector(unit.vector, provider.dims)
            assert stored is not None
            parts = readings.unit_readings(unit)
            expected = readings.mean(parts, dict(zip(parts, provider.embed(parts))))
            assert float(stored @ expected) / float(np.linalg.norm(stored)) > 0.995, unit.text
            twins += unit.reading == plain(unit.text)
        assert twins >= 5  # each list item also read without its heading
        parts = readings.chunk_readings(units)
        expected = readings.mean(parts, dict(zip(parts, provider.embed(parts))))
        assert memory.store.vector_similarity(expected, ids)[ids[0]] > 0.999
        # Each text once: the facts, their headings, nothing else (a short fact's [CLS] and [SEP]
        # are most of what is read beyond it: 61 pieces for 39 of text here; read whole, 2.5 times
        # as many).
        texts = set(parts) | {t for unit in units for t in readings.unit_readings(unit)}
        assert read == sum(len(e.ids) for e in provider.tokenizer.encode_batch(sorted(texts)))
    finally:
        memory.close()


def test_an_index_that_reads_markdown_whole_keeps_it_until_rebuilt(workspace: Path, make_config,
                                                                   provider: LocalProvider,
                                                                   caplog: pytest.LogCaptureFixture) -> None:
    """An index built when the default read Markdown whole (its reading "late-chats": every index
    before Markdown was read once) is not rebuilt by the new default at the next open, which would
    read all its Markdown again before the mount answers: it keeps reading Markdown whole (a new
    daily log too) until `memfs index --rebuild`, which takes its chats' vectors from the cache and
    reads only its Markdown again, each text about once."""
    md = _copy(workspace, *FILES[0])
    chat = workspace / FILES[1][1]
    chat.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(DATA / FILES[1][0], chat)
    cfg = make_config(workspace)
    begin_schema_7(cfg)  # as memfs made indexes then
    before = Memory(cfg, provider=provider)
    try:
        before.index()
        assert before.pending == 0
        # What the version before left: no vector of Markdown read once, its reading's old name.
        before.store.conn.execute("DELETE FROM cache.embedding_cache WHERE model LIKE '%+once'")
        fingerprint = dict(before.store.fingerprint or {})
        before.store.set_fingerprint({**fingerprint, "readings": "late-chats"}, provider.dims)
    finally:
        before.close()
    read = provider.pieces_read
    memory = Memory(make_config(workspace), provider=provider)
    try:
        memory.index()
        assert memory.pending == 0 and memory.store.fingerprint.get("readings") == "late-chats"
        assert provider.pieces_read == read, "the index was read again at its opening"
        status = memory.status()
        assert status["reading"] == "chats read late, Markdown whole"
        assert "Markdown each text once" in str(status["reading_wanted"])
        assert "memfs index --rebuild" in render_status(status)
        text = md.read_text()
        log = workspace / "memory" / "2023-05-09.md"
        log.write_text(text.replace("2023-05-08", "2023-05-09").replace("Caroline", "Carla"))
        memory.index()
        indexed = pieces(provider.tokenizer, indexed_texts("memory/2023-05-09.md", log.read_text()))
        assert provider.pieces_read - read > 2 * indexed, "a new daily log was not read whole"
        read = provider.pieces_read
        memory.rebuild()
        assert memory.pending == 0 and memory.store.fingerprint.get("readings") == "late-chats-once"
        assert "rebuilt with these settings" in caplog.text and "Markdown each text once" in caplog.text
        assert "reading_wanted" not in memory.status() and "rebuild" not in render_status(memory.status())
        indexed = pieces(provider.tokenizer, indexed_texts(FILES[0][1], text) + indexed_texts(
            "memory/2023-05-09.md", log.read_text()))
        assert 0 < provider.pieces_read - read <= MAX_RATIO * indexed, "chats read again, or Markdown not read"
    finally:
        memory.close()


def test_a_move_from_late_chats_to_auto_does_not_read_chats_again(workspace: Path, make_config,
                                                                   provider: LocalProvider) -> None:
    """Late readings are cached by how a file is read, not by the setting that made it so: an index
    built under late_chunking = "chats" (the default) finds its chats' vectors when "auto" reads
    its daily logs late too, and reads only the Markdown."""
    _copy(workspace, *FILES[1])
    before = Memory(make_config(workspace, embedding__late_chunking="chats"), provider=provider)
    try:
        before.index()
        assert before.pending == 0
    finally:
        before.close()
    read = provider.pieces_read
    memory = Memory(make_config(workspace, **AUTO), provider=provider)  # rebuilds: its fingerprint changed
    try:
        memory.index()
        assert memory.pending == 0 and memory.store.fingerprint.get("readings") == "late-auto"
        assert provider.pieces_read == read, "chats read again"
    finally:
        memory.close()


def test_a_line_read_late_in_two_logs_has_each_logs_vector(workspace: Path, make_config,
                                                           provider: LocalProvider) -> None:
    """A Markdown unit read late is its span in its chunk's reading: the same line in two daily
    logs of other subjects gets two vectors, each pooled in its own log, and neither is taken
    from the cache for the other (filed under its text alone, the log indexed second got the
    first one's vector, and answers depended on what was indexed first)."""
    line = "## 10:00\nDone, and it went well."
    (workspace / "memory").mkdir(exist_ok=True)
    (workspace / "memory" / "2026-01-01.md").write_text(
        f"# 2026-01-01\n\n## 09:00\nBaked sourdough bread with rye flour for the family.\n{line}\n")
    memory = Memory(make_config(workspace, **AUTO), provider=provider)
    try:
        memory.index()
        assert memory.pending == 0
        (workspace / "memory" / "2026-01-02.md").write_text(
            f"# 2026-01-02\n\n## 09:00\nMigrated the payments database to PostgreSQL 16.\n{line}\n")
        memory.index()  # the first log's vectors are in the cache now
        assert memory.pending == 0
        units = {}
        for path, chunk_id in memory.store.conn.execute("SELECT path, id FROM chunks WHERE path LIKE 'memory/%'"):
            units.update({str(path): u for u in memory.store.units_of([int(chunk_id)]) if "went well" in u.text})
        assert len(units) == 2
        a, b = (unpack_unit_vector(units[p].vector, provider.dims) for p in sorted(units))
        assert a is not None and b is not None
        assert float(a @ b) / float(np.linalg.norm(a) * np.linalg.norm(b)) < 0.99
    finally:
        memory.close()
