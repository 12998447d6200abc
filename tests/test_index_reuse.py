"""Issue #45: the index is the embedding cache of the vectors it holds, and keeps them small.

- The cache file keeps only what the index lacks, yet a text indexed again (a copy, a file
  removed and written back, an edit, a rebuild) is not embedded again.
- Chunk vectors are packed (``dims + 4`` bytes, as units') in a plain table.
- An index of schema 7 (float32 chunk vectors in sqlite-vec, every vector in the cache as well)
  keeps working as it is, also when written, and is converted only by ``memfs index --rebuild``,
  from its own vectors: nothing is embedded again.
- The write-ahead log does not keep the size of the largest write.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import begin_schema_7

from memfs.config import Config
from memfs.index.embedding.providers import LocalProvider
from memfs.index.storage.sqlite.layout import JOURNAL_LIMIT
from memfs.index.storage.sqlite.unitrows import HASH_SQL
from memfs.memory import Memory

DATA = Path(__file__).resolve().parent / "data"
QUESTIONS = ["When did Caroline go to the LGBTQ support group?", "What did Melanie paint recently?",
             "Where does Caroline want to move?"]


@pytest.fixture(scope="module")
def provider() -> LocalProvider:
    return LocalProvider()  # in this process, so it counts what it reads


@pytest.fixture
def workspace_with_both(workspace: Path) -> Path:
    """A daily log and the same conversation as a ClawGPT sync file, and MEMORY.md."""
    (workspace / "memory").mkdir(exist_ok=True)
    shutil.copy(DATA / "locomo-2023-05-08.md", workspace / "memory" / "2023-05-08.md")
    (workspace / "clawgpt-memory").mkdir(exist_ok=True)
    shutil.copy(DATA / "locomo-2023-05-08.jsonl", workspace / "clawgpt-memory" / "2023-05-08.jsonl")
    (workspace / "MEMORY.md").write_text("# Memory\n\n## People\n\n- Caroline is a counsellor.\n- Melanie paints.\n")
    return workspace


def _held(memory: Memory) -> set[str]:
    """The hashes of every chunk and unit vector the index holds."""
    conn = memory.store.conn
    return ({str(r[0]) for r in conn.execute("SELECT hash FROM chunks WHERE embedded = 1")}
            | {str(r[0]) for r in conn.execute(f"SELECT {HASH_SQL} FROM units u WHERE u.vector IS NOT NULL")})


def _cached(memory: Memory) -> set[str]:
    """The hashes the cache file keeps (either table)."""
    conn = memory.store.conn
    found: set[str] = set()
    for table in ("vector_cache", "embedding_cache"):
        if conn.execute("SELECT 1 FROM cache.sqlite_master WHERE name = ?", (table,)).fetchone():
            found |= {r[0].hex() if isinstance(r[0], bytes) else str(r[0])
                      for r in conn.execute(f"SELECT hash FROM cache.{table}")}
    return found


@contextlib.contextmanager
def _sqlite_memory(cfg: Config, provider: LocalProvider) -> Iterator[Memory]:
    """A Memory over ``cfg`` with this module's provider, closed after; the test skipped on an
    index that is not SQLite."""
    memory = Memory(cfg, provider=provider)
    try:
        if memory.store.backend != "sqlite":
            pytest.skip("the SQLite index")
        yield memory
    finally:
        memory.close()


def _results(memory: Memory) -> list[list[tuple[str, int, float]]]:
    return [[(r.path, r.start_line, r.score) for r in memory.search(q, min_score=0).results[:5]] for q in QUESTIONS]


def test_a_text_indexed_again_is_not_embedded_again_though_the_cache_keeps_only_what_the_index_lacks(
        workspace_with_both: Path, make_config, provider: LocalProvider) -> None:
    ws = workspace_with_both
    with _sqlite_memory(make_config(ws), provider) as memory:
        memory.index()
        assert memory.pending == 0
        held = _held(memory)
        assert len(held) > 50
        # The cache keeps none of the vectors the index holds (it kept them all, as float32).
        assert not _cached(memory) & held
        assert len(_cached(memory)) < len(held) / 10
        read = provider.pieces_read

        # A copy: its every vector is found in the index's own rows.
        shutil.copy(ws / "memory" / "2023-05-08.md", ws / "memory" / "2023-05-09.md")
        memory.index()
        assert memory.pending == 0 and provider.pieces_read == read

        # Removed (its rows go, their vectors to the cache), then written back (an editor saving
        # through a temporary name): found in the cache.
        day = ws / "clawgpt-memory" / "2023-05-08.jsonl"
        kept = day.read_bytes()
        day.unlink()
        memory.index()
        day.write_bytes(kept)
        memory.index()
        assert memory.pending == 0 and provider.pieces_read == read

        # An edit in the middle: only the passages it changed wait.
        log = ws / "memory" / "2023-05-08.md"
        lines = log.read_text().split("\n")
        middle = next(i for i in range(len(lines) // 2, len(lines)) if lines[i].strip() and not lines[i].startswith("#"))
        lines[middle] = "I went to the dentist and then bought a red kite."
        log.write_text("\n".join(lines))
        outcome = memory.file_changed("memory/2023-05-08.md")
        assert 0 < outcome.pending <= 6, outcome
        memory.embed_pending()

        # Rebuilt with the same settings: every vector from the index it replaces.
        before = _results(memory)
        read = provider.pieces_read  # (a search reads its query)
        memory.rebuild()
        assert memory.pending == 0 and provider.pieces_read == read
        assert _results(memory) == before
        assert not _cached(memory) & _held(memory)


def test_the_index_gives_one_vector_for_each_text_asked_in_either_hash_form_under_its_own_model(
        workspace_with_both: Path, make_config, provider: LocalProvider) -> None:
    """held_vectors, which a close asks for every passage of the file: one vector per text, the
    first row holding it (a line many files repeat is held by a unit in each), found whether the
    unit's hash is packed or hex (an older index), and only among the rows of files its model
    name reads (a chat's line and the same line in a daily log are read differently)."""
    ws = workspace_with_both
    for day in range(9, 14):  # the same day's log five times more: each of its lines in six files
        shutil.copy(ws / "memory" / "2023-05-08.md", ws / "memory" / f"2023-05-{day:02d}.md")
    with _sqlite_memory(make_config(ws), provider) as memory:
        memory.index()
        assert memory.pending == 0
        store, conn = memory.store, memory.store.conn
        built, models = store._models()
        by_kind = {kind: model for model, kinds in models.items() for kind in kinds}
        rows = conn.execute(
            f"SELECT {HASH_SQL}, u.vector, f.kind, u.id FROM units u JOIN chunks c ON c.id = u.chunk_id "
            "JOIN files f ON f.path = c.path WHERE u.vector IS NOT NULL ORDER BY u.id").fetchall()
        log_rows = [r for r in rows if r[2] == "daily_log"]
        chat_rows = [r for r in rows if r[2] == "sync"]
        repeated = [h for h in dict.fromkeys(r[0] for r in log_rows) if sum(r[0] == h for r in log_rows) >= 6]
        assert len(repeated) >= 10
        chunk_hash, chunk_vector = conn.execute(
            "SELECT c.hash, v.vector FROM chunks c JOIN chunk_vectors v ON v.id = c.id ORDER BY c.id").fetchone()
        unknown = "0" * 64
        asked = [*repeated, chunk_hash, unknown, repeated[0]]
        found = store.held_vectors(built, by_kind["daily_log"], asked)
        assert set(found) == {*repeated, chunk_hash}
        assert found[chunk_hash] == bytes(chunk_vector)
        first = {}
        for digest, vector, _, _ in log_rows:
            first.setdefault(digest, bytes(vector))
        assert all(found[h] == first[h] for h in repeated)

        # Under the chats' model name: a chat's own vector of a line, never the daily log's.
        shared = [r[0] for r in chat_rows if r[0] in first]
        chats = store.held_vectors(built, by_kind["sync"], [r[0] for r in chat_rows])
        assert chats and all(chats[h] == bytes(v) for h, v, _, _ in chat_rows if h in chats)
        assert all(chats[h] != first[h] for h in shared if h in chats)
        assert not store.held_vectors(built, by_kind["sync"], [h for h in repeated if h not in {r[0] for r in chat_rows}])

        # A unit whose hash an older index stored as hex text is found too.
        digest, vector, _, _ = log_rows[0]
        conn.execute("UPDATE units SET hash = ? WHERE hash = ?", (digest, bytes.fromhex(digest)))
        assert store.held_vectors(built, by_kind["daily_log"], [digest]) == {digest: bytes(vector)}


def test_chunk_vectors_are_packed_in_a_plain_table(workspace_with_both: Path, make_memory) -> None:
    memory = make_memory(workspace_with_both)
    if memory.store.backend != "sqlite":
        pytest.skip("the SQLite index")
    memory.index()
    conn = memory.store.conn
    dims = memory.provider.dims
    assert memory.store.get_meta("schema") == "8"
    assert conn.execute("SELECT 1 FROM sqlite_master WHERE name LIKE 'chunks_vec%'").fetchone() is None
    sizes = {int(r[0]) for r in conn.execute("SELECT length(vector) FROM chunk_vectors")}
    assert sizes == {dims + 4}
    assert conn.execute("SELECT count(*) FROM chunk_vectors").fetchone()[0] == \
        conn.execute("SELECT count(*) FROM chunks WHERE embedded = 1").fetchone()[0] > 5
    top = memory.search(QUESTIONS[0]).results[0]
    assert "LGBTQ support group" in top.snippet and top.vector_score > 0.5


def test_an_index_of_schema_7_keeps_working_and_is_converted_at_rebuild(
        workspace_with_both: Path, make_config, provider: LocalProvider) -> None:
    ws = workspace_with_both
    cfg = make_config(ws)
    if cfg.index.backend != "sqlite":
        pytest.skip("an index of schema 7 is a SQLite file")
    index = begin_schema_7(cfg)
    memory = Memory(cfg, provider=provider)
    try:
        memory.index()
        assert memory.store.get_meta("schema") == "7" and not memory.store.packed
        held = _held(memory)
        assert held <= _cached(memory)  # as schema 7 keeps it: every vector in the cache too
        before = _results(memory)
    finally:
        memory.close()

    # Opened again (as a mount would), and written: it keeps its layout.
    memory = Memory(make_config(ws), provider=provider)
    try:
        conn = memory.store.conn
        assert memory.store.get_meta("schema") == "7"
        assert _results(memory) == before
        (ws / "memory" / "2023-05-10.md").write_text("## 09:00 - Caroline\n\nI adopted a grey kitten named Ash.\n")
        memory.index()
        assert memory.pending == 0
        assert conn.execute("SELECT count(*) FROM chunks_vec").fetchone()[0] == \
            conn.execute("SELECT count(*) FROM chunks WHERE embedded = 1").fetchone()[0]
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunk_vectors'").fetchone() is None
        assert _held(memory) <= _cached(memory)
        kitten = memory.search("the grey kitten Caroline adopted").results[0]
        assert kitten.path == "memory/2023-05-10.md"
        before = _results(memory)
        cached_before = len(_cached(memory))
        read = provider.pieces_read  # after the searches (a search reads its query)

        # `memfs index --rebuild`: schema 8, every vector from the old index, nothing embedded.
        memory.rebuild()
        conn = memory.store.conn
        assert memory.store.get_meta("schema") == "8" and memory.store.packed
        assert memory.pending == 0 and provider.pieces_read == read
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name LIKE 'chunks_vec%'").fetchone() is None
        after = _results(memory)
        for old, new in zip(before, after):
            assert [(p, line) for p, line, _ in old[:3]] == [(p, line) for p, line, _ in new[:3]]
            assert all(abs(a[2] - b[2]) < 0.005 for a, b in zip(old, new))
        assert memory.search("the grey kitten Caroline adopted").results[0].path == "memory/2023-05-10.md"
        # The old cache's entries of what the new index holds are gone from it.
        assert not _cached(memory) & _held(memory)
        assert len(_cached(memory)) < cached_before / 5
        assert index.exists()
    finally:
        memory.close()


def _big_day(lines: int) -> str:
    words = ["harbour", "lantern", "copper", "meadow", "violin", "glacier", "orchid", "tundra", "saffron", "quartz"]
    return "# 2024-03-01\n\n" + "\n".join(
        f"- Note {i}: the {words[i % 10]} and the {words[(i // 10) % 10]} met the {words[(i // 100) % 10]} "
        f"at {i % 24:02d}:{i % 60:02d}, reference {i * 7919 % 100003}." for i in range(lines)) + "\n"


def test_the_write_ahead_log_does_not_keep_the_size_of_a_big_write(workspace: Path, make_memory) -> None:
    """A 30 MB import left 52 MB of WAL beside the index for as long as the mount ran.  A reader
    in the middle of a read (a search, another process) keeps SQLite's own checkpoints from
    reaching the end of the log while a big write goes on; once it has, the write's end folds
    the log in and empties it (journal_size_limit bounds it between such writes)."""
    import apsw

    memory = make_memory(workspace, embedding__provider="none")
    if memory.store.backend != "sqlite":
        pytest.skip("SQLite's write-ahead log")
    conn = memory.store.conn
    assert conn.execute("PRAGMA main.journal_size_limit").fetchone()[0] == JOURNAL_LIMIT
    assert conn.execute("PRAGMA cache.journal_size_limit").fetchone()[0] == JOURNAL_LIMIT
    (workspace / "memory").mkdir(exist_ok=True)
    (workspace / "memory" / "2024-03-01.md").write_text(_big_day(40_000))
    wal = Path(f"{memory.store.path}-wal")
    reader = apsw.Connection(str(memory.store.path))
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM files").fetchone()  # a read transaction, held
    grew: list[int] = []
    original = memory.engine.indexer.reconcile

    def reconcile(*args, **kwargs):
        out = original(*args, **kwargs)
        grew.append(wal.stat().st_size)  # as the write left it
        reader.execute("COMMIT")  # the read ends
        return out

    memory.engine.indexer.reconcile = reconcile
    try:
        memory.index()
    finally:
        reader.close()
    assert grew and grew[0] > 2 * JOURNAL_LIMIT, grew  # the write was big, and its log could not be folded in
    assert wal.stat().st_size <= JOURNAL_LIMIT
    assert memory.search("glacier lantern").results


def test_an_index_whose_backlog_is_embedded_keeps_a_small_write_ahead_log(workspace_with_both: Path,
                                                                           make_memory) -> None:
    """A workspace of 0.28 MB of text left a WAL of 4 MB (journal_size_limit) beside its index
    once embedded, for as long as the mount ran: the embedder empties it when the backlog is done."""
    from memfs.services.lifecycle import IDLE_WAL

    memory = make_memory(workspace_with_both)
    if memory.store.backend != "sqlite":
        pytest.skip("SQLite's write-ahead log")
    memory.reconcile()
    wal = Path(f"{memory.store.path}-wal")
    while memory.pending:
        memory.embed_pending()
    assert memory.search(QUESTIONS[1]).results
    assert not wal.exists() or wal.stat().st_size <= IDLE_WAL, wal.stat().st_size
