"""What the index keeps per chunk: the keyword index holds no second copy of the text, and an
index made with one (by an earlier memfs) keeps answering and following edits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from conftest import write

from memfs.index.embedding.fingerprint import text_hash
from memfs.index.text.keywords import FTS_TOKENIZER, fts_body

QUESTION = "When did Caroline go to the LGBTQ support group?"


def _tables(memory) -> set[str]:
    return {str(r[0]) for r in memory.store.conn.execute("SELECT name FROM sqlite_master")}


def _documents_with(memory, term: str) -> int:
    row = memory.store.conn.execute("SELECT doc FROM chunks_fts_vocab WHERE term = ?", (term,)).fetchone()
    return 0 if row is None else int(row[0])


def _edit_away_the_support_group(memory, day: Path) -> None:
    day.write_text(day.read_text().replace("support group", "book club").replace("LGBTQ", "reading"))
    memory.index()


def test_keyword_index_keeps_no_copy_of_the_text_and_follows_edits(workspace: Path, make_memory,
                                                                   locomo_day) -> None:
    day = locomo_day(workspace)
    memory = make_memory(workspace)
    memory.index()
    assert "chunks_fts_content" not in _tables(memory) and "private_fts_content" not in _tables(memory)
    top = memory.search(QUESTION).results[0]
    assert top.start_line <= 13 <= top.end_line and top.text_score > 0.5
    assert _documents_with(memory, "lgbtq") > 0
    _edit_away_the_support_group(memory, day)
    assert _documents_with(memory, "lgbtq") == 0  # the old rows' terms left the index with them
    assert all("LGBTQ" not in r.snippet for r in memory.search(QUESTION, min_score=0).results)


def test_an_index_with_a_content_fts_table_keeps_answering(workspace: Path, make_memory, locomo_day) -> None:
    day = locomo_day(workspace)
    memory = make_memory(workspace)
    memory.index()
    before = memory.search(QUESTION).results
    with memory.store.transaction() as conn:  # the keyword index as earlier versions made it
        conn.execute("DROP TABLE chunks_fts_vocab")
        conn.execute("DROP TABLE chunks_fts")
        conn.execute(f"CREATE VIRTUAL TABLE chunks_fts USING fts5(body, tokenize='{FTS_TOKENIZER}')")
        conn.execute("CREATE VIRTUAL TABLE chunks_fts_vocab USING fts5vocab(chunks_fts, row)")
        for chunk_id, text in conn.execute("SELECT id, text FROM chunks WHERE private = 0").fetchall():
            conn.execute("INSERT INTO chunks_fts(rowid, body) VALUES (?, ?)", (chunk_id, fts_body(text)))
    memory.close()
    memory = make_memory(workspace)
    assert "chunks_fts_content" in _tables(memory)
    assert memory.search(QUESTION).results == before
    _edit_away_the_support_group(memory, day)
    assert _documents_with(memory, "lgbtq") == 0


def test_files_with_problems_are_found_without_reading_every_file(workspace: Path, make_memory, locomo_day) -> None:
    # Every search reads the files with an error or a warning; an index made by an earlier
    # memfs (without the partial index) gets it when it is opened, and the answer is the same.
    locomo_day(workspace)
    (workspace / "memory" / "2023-05-09.md").write_bytes(b"# 2023-05-09\n\nbad \xff byte\n")
    memory = make_memory(workspace)
    memory.index()
    problems = memory.store.problem_files()
    assert "memory/2023-05-09.md" in problems
    with memory.store.transaction() as conn:
        conn.execute("DROP INDEX files_problems")
    memory.close()
    memory = make_memory(workspace)
    plan = memory.store.conn.execute("EXPLAIN QUERY PLAN SELECT path, error, warning FROM files "
                                     "WHERE error != '' OR warning != ''").fetchall()
    assert any("files_problems" in str(row[-1]) for row in plan)
    assert memory.store.problem_files() == problems


def test_files_being_chunked_are_found_without_reading_every_file(workspace: Path, make_memory, locomo_day) -> None:
    # Every search asks which files are still being chunked (a big write's provisional chunks);
    # it reads the partial index, not every file, and an index without it gets it when opened.
    from memfs.index.storage.records import PROVISIONAL_HASH, FileRecord

    locomo_day(workspace)
    memory = make_memory(workspace)
    memory.index()
    store = memory.store
    store.replace_file(FileRecord("memory/big.md", "daily_log", PROVISIONAL_HASH + "abc", 0.0, 0, 0, ""), [], [], [], {})
    asked: list[tuple[str, object]] = []

    def seen(cursor, sql: str, bindings) -> bool:
        asked.append((sql, bindings))
        return True

    store.conn.exec_trace = seen
    try:
        assert store.provisional_paths() == ["memory/big.md"]
        assert store.provisional_paths(include_private=False) == ["memory/big.md"]
        assert store.provisional_lines() == [("memory/big.md", 0, False)]  # what a search asks (no chunks here)
    finally:
        store.conn.exec_trace = None
    for sql, bindings in [(s, b) for s, b in asked if "FROM files" in s]:
        plan = store.conn.execute(f"EXPLAIN QUERY PLAN {sql}", bindings or ()).fetchall()
        assert any("files_provisional" in str(row[-1]) for row in plan), (sql, plan)
    with store.transaction() as conn:
        conn.execute("DROP INDEX files_provisional")
    memory.close()
    memory = make_memory(workspace)
    assert "files_provisional" in _tables(memory)
    assert memory.store.provisional_paths() == ["memory/big.md"]


def _with_every_kind_of_unit(workspace: Path, locomo_day) -> None:
    """A daily log (turns: a heading, a blank line, the turn), MEMORY.md (facts with their
    headings as context, and their twins) and a sync file (messages under their chat's title)."""
    locomo_day(workspace)
    (workspace / "MEMORY.md").write_text("# Memory\n\n## Health\n\n- The user is allergic to penicillin.\n"
                                         "- Blood type: O negative\n\n## People\n\nWife: Priya Raman\n")
    source = Path(__file__).resolve().parent / "data" / "locomo-2023-05-08.jsonl"
    (workspace / "clawgpt-memory").mkdir(exist_ok=True)
    (workspace / "clawgpt-memory" / "2023-05-08.jsonl").write_text(source.read_text())


def _units(memory) -> list:
    ids = [int(r[0]) for r in memory.store.conn.execute("SELECT id FROM chunks ORDER BY id")]
    return memory.store.units_of(ids)


def test_a_unit_keeps_no_copy_of_its_chunks_text(workspace: Path, make_memory, locomo_day) -> None:
    # A unit's text is its chunk's non-blank lines over its span: the row keeps the span, and its
    # hash as 32 bytes, and reads back exactly the text and hash the chunker and indexer gave it.
    _with_every_kind_of_unit(workspace, locomo_day)
    memory = make_memory(workspace)
    memory.index()
    kinds = {str(r[0]) for r in memory.store.conn.execute(
        "SELECT DISTINCT c.path FROM units u JOIN chunks c ON c.id = u.chunk_id")}
    assert kinds == {"memory/2023-05-08.md", "MEMORY.md", "clawgpt-memory/2023-05-08.jsonl"}
    copies, spans, hashes = memory.store.conn.execute(
        "SELECT sum(text != ''), sum(text_start IS NOT NULL), sum(length(hash) = 32) FROM units").fetchone()
    total = memory.store.counts()["units"]
    assert (copies, spans, hashes) == (0, total, total)
    for unit in _units(memory):
        assert unit.text.strip() and "\n\n" not in unit.text
        assert unit.hash == text_hash(unit.embedding_text)
    # A search has the chunks' texts already and cuts its units' texts from them: the same units.
    ids = [int(r[0]) for r in memory.store.conn.execute("SELECT id FROM chunks ORDER BY id")]
    texts = {chunk_id: chunk.text for chunk_id, chunk in memory.store.chunks_by_id(ids).items()}
    assert memory.store.units_of(ids, texts) == _units(memory)
    assert memory.store.pending_count() == 0  # every unit's vector found its row by its hash


def test_an_index_of_schema_6_is_migrated_when_opened_and_answers_the_same(
        workspace: Path, make_memory, make_memory_7, locomo_day) -> None:
    # An index made before units kept spans (their text copied, hashes in hex) is not rebuilt:
    # it gets the new columns when opened, its rows are read as they are, and rows written from
    # then on are compact.  (Schema 6 had schema 7's vector layout: sqlite-vec's float32 table.)
    _with_every_kind_of_unit(workspace, locomo_day)
    memory = make_memory_7(workspace)
    memory.index()
    before = memory.search(QUESTION).results
    units = _units(memory)
    with memory.store.transaction() as conn:  # the rows as schema 6 wrote them
        conn.executemany("UPDATE units SET text = ?, hash = ? WHERE id = ?", [(u.text, u.hash, u.id) for u in units])
        conn.execute("ALTER TABLE units DROP COLUMN text_start")
        conn.execute("ALTER TABLE units DROP COLUMN text_end")
        conn.execute("ALTER TABLE units DROP COLUMN text_gaps")
        conn.execute("UPDATE meta SET value = '6' WHERE key = 'schema'")
    chunk_ids = [int(r[0]) for r in memory.store.conn.execute("SELECT id FROM chunks ORDER BY id")]
    memory.close()
    # While a process of the earlier memfs uses it (its shared lock), it is not migrated: that
    # process would read a compact row's text as empty.  Opening says so, and changes nothing.
    import fcntl

    from memfs.memory import IndexBusy

    with open(str(memory.paths.index) + ".lock", "a") as earlier:
        fcntl.flock(earlier, fcntl.LOCK_SH)
        with pytest.raises(IndexBusy, match="made by an earlier memfs and is in use by its running mount"):
            make_memory(workspace)
    import apsw

    untouched = apsw.Connection(str(memory.paths.index))
    assert untouched.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()[0] == "6"
    untouched.close()
    memory = make_memory(workspace)
    assert memory.store.get_meta("schema") == "7" and not memory.store.outdated
    assert [int(r[0]) for r in memory.store.conn.execute("SELECT id FROM chunks ORDER BY id")] == chunk_ids
    assert _units(memory) == units
    assert memory.search(QUESTION).results == before
    _edit_away_the_support_group(memory, workspace / "memory" / "2023-05-08.md")
    copies = memory.store.conn.execute(
        "SELECT count(*) FROM units u JOIN chunks c ON c.id = u.chunk_id WHERE c.path = 'memory/2023-05-08.md' "
        "AND (u.text != '' OR length(u.hash) != 32)").fetchone()[0]
    assert copies == 0
    assert memory.store.pending_count() == 0


def test_counting_chunks_reads_no_chunk_rows(workspace: Path, make_memory, locomo_day) -> None:
    # Every search weighs terms by how many chunks there are; after any write that count was
    # made again by reading the whole chunks table (1.5 s at 100k chunks).  The keyword tables
    # keep it: the same numbers, public and private, through writes, removals and a batch.
    _with_every_kind_of_unit(workspace, locomo_day)
    (workspace / "MEMORY.md").write_text((workspace / "MEMORY.md").read_text() + "\nSecret: penicillin\n")
    memory = make_memory(workspace)
    memory.index()
    store = memory.store

    def counted() -> tuple[int, int]:
        row = store.conn.execute("SELECT count(*), coalesce(sum(private), 0) FROM chunks").fetchone()
        return int(row[0]), int(row[0]) - int(row[1])

    statements: list[str] = []
    store.conn.exec_trace = lambda cursor, sql, bindings: statements.append(sql) or True
    try:
        for change in (lambda: None, lambda: store.remove_file("clawgpt-memory/2023-05-08.jsonl"),
                       lambda: _edit_away_the_support_group(memory, workspace / "memory" / "2023-05-08.md")):
            change()
            statements.clear()
            assert (store.chunk_total(), store.chunk_total(False)) == counted()
            assert not [sql for sql in statements[:-1] if re.search(r"FROM chunks\b(?!_)", sql)]  # last: counted()
    finally:
        store.conn.exec_trace = None
    assert store.chunk_total() > store.chunk_total(False) > 0  # MEMORY.md's chunk is private


def test_the_embedding_cache_keeps_each_vector_in_its_page(workspace: Path, make_memory_7, locomo_day) -> None:
    """At SQLite's default 4 KB pages a cached vector (1.6 KB, a WITHOUT ROWID row) kept 1 KB in
    its page and the rest on an overflow page of its own: 4.8 KB an entry. A new cache's pages
    hold it whole; dbstat counts the overflow pages.  (The float32 table an index of schema 7
    writes every vector to.)"""
    locomo_day(workspace)
    memory = make_memory_7(workspace)
    if memory.store.backend != "sqlite":
        pytest.skip("SQLite's pages")
    memory.index()
    conn = memory.store.conn
    assert conn.execute("PRAGMA cache.page_size").fetchone()[0] >= 16_384
    entries = conn.execute("SELECT count(*) FROM cache.embedding_cache").fetchone()[0]
    assert entries > 20
    overflow = conn.execute("SELECT count(*) FROM dbstat('cache') WHERE name = 'embedding_cache' "
                            "AND pagetype = 'overflow'").fetchone()[0]
    used = conn.execute("SELECT sum(pgsize) FROM dbstat('cache') WHERE name = 'embedding_cache'").fetchone()[0]
    assert overflow == 0 and used / entries < 3_000, (overflow, used / entries)


def test_cache_entries_are_read_by_their_whole_key(workspace: Path, make_memory_7, locomo_day) -> None:
    """Moving an index carries its cache entries by provider, model names and hashes: by provider
    and hash alone each call of 500 hashes read every entry the provider had."""
    locomo_day(workspace)
    memory = make_memory_7(workspace)
    if memory.store.backend != "sqlite":
        pytest.skip("SQLite's query plan")
    memory.index()
    conn = memory.store.conn
    provider, model, digest = conn.execute("SELECT provider, model, hash FROM cache.embedding_cache LIMIT 1").fetchone()
    found = memory.store.cache_entries(provider, [model, "another-model"], [digest, "0" * 64])
    assert [(e.model, e.hash) for e in found] == [(model, digest)]
    assert memory.store.cache_entries(provider, ["another-model"], [digest]) == []
    assert memory.store.cache_entries(provider, [], [digest]) == []
    asked: list[tuple[str, tuple]] = []

    def tracer(_cursor, sql: str, bindings) -> bool:
        asked.append((sql, tuple(bindings or ())))
        return True

    conn.set_exec_trace(tracer)
    try:
        memory.store.cache_entries(provider, [model, "another-model", "a-third"], [digest, "0" * 64, "1" * 64])
    finally:
        conn.set_exec_trace(None)
    [(sql, bindings)] = [a for a in asked if "embedding_cache" in a[0]]
    plan = " ".join(str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", bindings))
    assert "SEARCH" in plan and "model=? AND hash=?" in plan, plan


def test_status_counts_the_embedding_cache_through_its_own_index(workspace: Path, make_memory_7) -> None:
    """Counting the embedding cache read every cached vector (~50 ms at 200k entries): a mount
    whose status was read twice a second during an import lost an eighth of a core and held the
    store's lock the embedder waited on. A cache made before gets the index at its next opening;
    the count stays exact.  (The float32 table of an index of schema 7.)"""
    memory = make_memory_7(workspace)
    if memory.store.backend != "sqlite":
        pytest.skip("SQLite's query plan")
    write(workspace / "memory" / "2023-01-10.md", "# 2023-01-10\n\n- The ferry timetable.\n")
    memory.file_changed("memory/2023-01-10.md")
    memory.embed_pending()
    memory.store.conn.execute("DROP INDEX cache.embedding_cache_counted")  # as a cache made before it had none
    memory.close()
    memory = make_memory_7(workspace)
    conn = memory.store.conn
    plan = " ".join(str(r[-1]) for r in conn.execute("EXPLAIN QUERY PLAN SELECT count(*) FROM cache.embedding_cache"))
    assert "COVERING INDEX embedding_cache_counted" in plan, plan
    rows = conn.execute("SELECT count(*) FROM cache.embedding_cache NOT INDEXED").fetchone()[0]
    assert rows > 0 and memory.store.counts()["cached_embeddings"] == rows


def test_a_cache_made_before_keeps_its_pages_and_its_vectors(tmp_path: Path) -> None:
    """A cache of 4 KB pages (made by an earlier memfs) cannot take new pages in WAL mode: it
    keeps them, and its vectors, and gets the index status counts it by."""
    import apsw

    from memfs.index.storage.sqlite.store import Store

    cache = tmp_path / "main.embcache.sqlite"
    old = apsw.Connection(str(cache))
    old.execute("PRAGMA page_size=4096")
    old.execute("PRAGMA journal_mode=WAL")
    old.execute("CREATE TABLE embedding_cache(provider TEXT NOT NULL, model TEXT NOT NULL, hash TEXT NOT NULL, "
                "dims INTEGER NOT NULL, vector BLOB NOT NULL, created_at REAL NOT NULL, "
                "PRIMARY KEY(provider, model, hash)) WITHOUT ROWID")
    old.execute("INSERT INTO embedding_cache VALUES ('local', 'm', 'abc', 2, ?, 0)", (b"\0" * 8,))
    old.close()
    index = apsw.Connection(str(tmp_path / "main.sqlite"))  # an index of schema 7 (its cache is that table)
    index.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); INSERT INTO meta VALUES ('schema', '7')")
    index.close()
    store = Store(tmp_path / "main.sqlite", cache)
    try:
        conn = store.conn
        assert conn.execute("PRAGMA cache.page_size").fetchone()[0] == 4096
        assert conn.execute("PRAGMA main.page_size").fetchone()[0] != 16_384  # the pragma stayed with the cache
        assert store.cached_vectors("local", "m", ["abc"]) == {"abc": b"\0" * 8}
        assert store.counts()["cached_embeddings"] == 1
        assert conn.execute("SELECT 1 FROM cache.sqlite_master WHERE name = 'embedding_cache_counted'").fetchone()
    finally:
        store.close()
