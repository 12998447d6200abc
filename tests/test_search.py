"""The engine end to end without FUSE: indexing, hybrid search, freshness, rebuilds, bad input."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
from conftest import write

from memfs.index.embedding.providers import LOCAL_MODEL_ID
from memfs.memory import parse_options

index_backend = pytest.fixture(lambda both_backends: both_backends, name="index_backend")  # every test on both


def test_hybrid_search_finds_by_meaning_and_cites_lines(workspace: Path, make_memory, locomo_day) -> None:
    locomo_day(workspace)
    memory = make_memory(workspace)
    memory.index()
    response = memory.search("When did Caroline go to the LGBTQ support group?")
    assert response.results, "expected a hit"
    top = response.results[0]
    assert top.path == "memory/2023-05-08.md" and top.start_line <= 13 <= top.end_line
    lines = (workspace / top.path).read_text().split("\n")
    assert top.snippet.split("\n")[0] == lines[top.start_line - 1]
    assert 0 < top.vector_score <= 1 and 0 < top.text_score <= 1
    assert response.model == LOCAL_MODEL_ID and response.pending == 0
    # Meaning without shared words: the vector side must carry it.
    semantic = memory.search("a painting of the sun coming up over the lake", min_score=0)
    assert any("sunrise" in r.snippet.lower() for r in semantic.results[:3])


def test_results_are_sorted_bounded_and_deterministic(workspace: Path, make_memory, locomo_day) -> None:
    locomo_day(workspace)
    memory = make_memory(workspace)
    memory.index()
    first = memory.search("painting kids camping", max_results=2, min_score=0)
    second = memory.search("painting kids camping", max_results=2, min_score=0)
    assert first.results == second.results and len(first.results) == 2
    scores = [r.score for r in first.results]
    assert scores == sorted(scores, reverse=True)
    assert all(len(r.snippet) <= memory.cfg.search.snippet_chars for r in first.results)
    assert all(r.score >= 0.5 for r in memory.search("painting kids camping", min_score=0.5).results)


def test_keyword_only_match_passes_min_score_without_vectors(workspace: Path, make_memory) -> None:
    write(workspace / "MEMORY.md", "# Memory\n\n- The staging database URL is in POSTGRES_URL_STAGING.\n")
    memory = make_memory(workspace, embedding__provider="none")
    memory.index()
    response = memory.search("POSTGRES_URL_STAGING")
    assert [r.path for r in response.results] == ["MEMORY.md"]
    assert response.results[0].score >= 0.35 and response.results[0].vector_score == 0


def test_search_right_after_a_write_is_never_stale(workspace: Path, make_memory) -> None:
    log = write(workspace / "memory" / "2026-11-22.md", "# 2026-11-22\n\n## 10:00 - API\nWe chose REST.\n")
    memory = make_memory(workspace)
    memory.index()
    assert memory.search("REST")
    log.write_text("# 2026-11-22\n\n## 10:00 - API\nWe switched to GraphQL for the mobile client.\n")
    memory.file_changed("memory/2026-11-22.md")
    response = memory.search("what API style did we choose", min_score=0)
    assert "GraphQL" in response.results[0].snippet
    assert not any("We chose REST" in r.snippet for r in response.results)
    log.unlink()
    memory.file_removed("memory/2026-11-22.md")
    assert not any(r.path == "memory/2026-11-22.md" for r in memory.search("GraphQL", min_score=0).results)


def test_incremental_index_skips_unchanged_and_reuses_cache(workspace: Path, make_memory, locomo_day) -> None:
    locomo_day(workspace)
    memory = make_memory(workspace)
    first = {o.path: o.action for o in memory.index()}
    assert first["memory/2023-05-08.md"] == "indexed"
    second = {o.path: o.action for o in memory.index()}
    assert set(second.values()) == {"unchanged"}
    # Append a line: the old chunks' vectors come from the cache, only new text is embedded.
    with open(workspace / "memory" / "2023-05-08.md", "a") as handle:
        handle.write("\n## 23:00 - Note\nBought a telescope.\n")
    outcome = memory.file_changed("memory/2023-05-08.md")
    units = memory.store.counts()["units"]
    # Pending counts chunks and units; only the changed chunk and the new lines' units are new.
    assert outcome.action == "indexed" and 0 < outcome.pending <= 4 < units


def test_fingerprint_change_rebuilds_atomically_and_keeps_cache(workspace: Path, make_memory, locomo_day) -> None:
    locomo_day(workspace)
    memory = make_memory(workspace)
    memory.index()
    cached = memory.store.counts()["cached_embeddings"]
    memory.close()
    rebuilt = make_memory(workspace, chunking__tokens=200, chunking__overlap=40)
    assert rebuilt.store.fingerprint["chunk_tokens"] == 200
    counts = rebuilt.store.counts()
    assert counts["chunks"] > 0 and counts["pending"] == 0
    assert counts["cached_embeddings"] >= cached
    assert rebuilt.store.check() == "ok"
    assert rebuilt.search("support group").results


def test_agents_are_isolated(tmp_path: Path, make_memory) -> None:
    main_ws, work_ws = tmp_path / "main", tmp_path / "work"
    write(main_ws / "MEMORY.md", "- The private codename is BLUEHERON.\n")
    write(work_ws / "MEMORY.md", "- Quarterly report due Friday.\n")
    main = make_memory(main_ws, agent="main", embedding__provider="none")
    work = make_memory(work_ws, agent="work", embedding__provider="none")
    main.index()
    work.index()
    assert main.search("BLUEHERON").results
    # Nothing of main's reaches work's search (work's own MEMORY.md is a candidate of any query).
    assert all(r.path == "MEMORY.md" and "BLUEHERON" not in r.snippet and "Quarterly" in r.snippet
               for r in work.search("BLUEHERON", min_score=0).results)
    assert not work.search("BLUEHERON").results
    assert main.paths.index != work.paths.index


def test_cjk_query_finds_cjk_text(workspace: Path, make_memory) -> None:
    write(workspace / "memory" / "2026-11-20.md", "# 2026-11-20\n\n我们决定使用PostgreSQL作为主数据库。\n\nUnrelated English line.\n")
    memory = make_memory(workspace, embedding__provider="none")
    memory.index()
    results = memory.search("数据库").results
    assert results and results[0].path == "memory/2026-11-20.md" and results[0].start_line <= 3


def test_any_query_string_is_safe(workspace: Path, make_memory, locomo_day) -> None:
    locomo_day(workspace)
    memory = make_memory(workspace)
    memory.index()
    for query in ['"', "AND", "OR NOT", "NEAR(", "*", "col:x", "...", "^", "'; DROP TABLE chunks; --", "\x00", " "]:
        memory.search(query)  # must not raise
    assert memory.store.check() == "ok"


def test_bad_files_are_indexed_or_skipped_with_reasons(workspace: Path, make_memory) -> None:
    memory_dir = workspace / "memory"
    write(memory_dir / "2026-01-01.md", "# fine\nhello world\n")
    (memory_dir / "2026-01-02.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (memory_dir / "2026-01-03.md").write_bytes(b"caf\xe9 latin-1 text\n")
    (memory_dir / "2026-01-04.md").write_bytes(b"")
    (memory_dir / "2026-01-05.md").write_text("x" * (1024 * 1024) + "\n")  # one line of 1 MB
    with open(memory_dir / "2026-01-06.md", "wb") as big:
        big.truncate(100 * 1024 * 1024)  # 100 MB (sparse): over index.max_file_mb (64)
    memory = make_memory(workspace, embedding__provider="none")
    outcomes = {o.path: o for o in memory.index()}
    assert outcomes["memory/2026-01-01.md"].action == "indexed"
    # What is text is indexed; the bad bytes are named (see test_search_truth for the details).
    assert outcomes["memory/2026-01-02.md"].action == "indexed"
    assert outcomes["memory/2026-01-02.md"].reason == "4 bytes are not text (shown as \ufffd)"
    assert outcomes["memory/2026-01-03.md"].reason == "1 byte is not text (shown as \ufffd)"
    assert outcomes["memory/2026-01-04.md"].action == "indexed" and outcomes["memory/2026-01-04.md"].chunks == 0
    assert outcomes["memory/2026-01-05.md"].action == "indexed" and outcomes["memory/2026-01-05.md"].chunks > 1
    assert "larger than" in outcomes["memory/2026-01-06.md"].reason
    assert memory.store.check() == "ok"
    assert memory.status()["skipped"] == 1
    assert memory.search("hello").results[0].path == "memory/2026-01-01.md"
    assert memory.search("latin").results[0].path == "memory/2026-01-03.md"


def test_get_is_bounded_and_refuses_outside(workspace: Path, make_memory) -> None:
    write(workspace / "memory" / "2026-01-01.md", "".join(f"line {i}\n" for i in range(1, 501)))
    memory = make_memory(workspace, embedding__provider="none")
    part = memory.get("memory/2026-01-01.md", 10, 5)
    assert part.text == "".join(f"line {i}\n" for i in range(10, 15)) and part.next_from == 15
    default = memory.get("memory/2026-01-01.md")
    assert default.to_line == 200 and default.total_lines == 500
    assert memory.get("memory/2026-01-01.md", 499).next_from is None
    import pytest

    from memfs.memory import GetError

    for bad in ("../etc/passwd", "/etc/passwd", "memory/none.md"):
        with pytest.raises(GetError):
            memory.get(bad)


def test_provider_failure_falls_back_to_keywords(workspace: Path, make_memory, locomo_day) -> None:
    locomo_day(workspace)
    os.environ.pop("MEMFS_TEST_MISSING_KEY", None)
    memory = make_memory(workspace, embedding__provider="openai", embedding__api_key_env="MEMFS_TEST_MISSING_KEY")
    memory.index()
    response = memory.search("support group")
    assert response.results and response.warnings
    assert "MEMFS_TEST_MISSING_KEY" in response.warnings[0]


def _chat(ws: Path) -> None:
    """Two synced chats in one day file; only the first one's title says "Zanzibar"."""
    def line(i: int, chat: str, title: str, role: str, content: str) -> str:
        return json.dumps({"id": f"{chat}-{i}", "chatId": chat, "chatTitle": title, "role": role,
                           "content": content, "timestamp": 1707123456789 + i * 60_000})
    write(ws / "clawgpt-memory" / "2024-02-05.jsonl", "\n".join([
        line(1, "c-honey", "Zanzibar honeymoon", "user", "Which beaches are quiet in March?"),
        line(2, "c-honey", "Zanzibar honeymoon", "assistant", "Matemwe and Pongwe stay calm; book the east coast."),
        line(3, "c-tax", "Quarterly taxes", "user", "When is the next estimated payment due?"),
        line(4, "c-tax", "Quarterly taxes", "assistant", "April 15th, then June 15th."),
    ]) + "\n")


def test_a_word_only_the_chat_title_holds_finds_its_messages(workspace: Path, make_memory) -> None:
    from memfs.render.results import render_json, render_markdown

    _chat(workspace)
    memory = make_memory(workspace)
    memory.index()
    response = memory.search("Zanzibar")
    assert response.results, "the chat's title is indexed with its messages"
    assert {(r.chat_id, r.chat_title) for r in response.results} == {("c-honey", "Zanzibar honeymoon")}
    assert all(r.path == "clawgpt-memory/2024-02-05.jsonl" and r.end_line <= 2 for r in response.results)
    page = render_markdown(response)
    assert "\n### Zanzibar honeymoon\n" in page and "chat c-honey · score" in page
    assert "--messages" in page
    first = json.loads(render_json(response))["results"][0]
    assert (first["chat_title"], first["chat_id"]) == ("Zanzibar honeymoon", "c-honey")
    # A result from a Markdown file says nothing of chats.
    write(workspace / "memory" / "2024-02-05.md", "# 2024-02-05\n\n## 10:00 - Notes\nZanzibar flights booked.\n")
    memory.file_changed("memory/2024-02-05.md")
    md = [r for r in memory.search("Zanzibar flights").results if r.path.startswith("memory/")]
    assert md and md[0].chat_title == md[0].chat_id == ""


def test_get_messages_prints_a_sync_span_as_text_under_its_title(workspace: Path, make_memory) -> None:
    from memfs.memory import GetError

    _chat(workspace)
    memory = make_memory(workspace)
    raw = memory.get("clawgpt-memory/2024-02-05.jsonl", 2, 2)
    assert raw.text.startswith('{"id": "c-honey-2"')  # the default stays the file's bytes
    shown = memory.get("clawgpt-memory/2024-02-05.jsonl", 2, 2, messages=True)
    assert (shown.from_line, shown.to_line, shown.next_from) == (2, 3, 4)
    assert shown.text == ("# Zanzibar honeymoon\n\n"
                          "[2024-02-05 08:59 UTC] Assistant: Matemwe and Pongwe stay calm; book the east coast.\n\n"
                          "# Quarterly taxes\n\n"
                          "[2024-02-05 09:00 UTC] User: When is the next estimated payment due?\n")
    write(workspace / "memory" / "2024-02-05.md", "# 2024-02-05\n")
    with pytest.raises(GetError, match="not a sync file or session transcript"):
        memory.get("memory/2024-02-05.md", messages=True)


def test_date_filters_date_a_synced_message_by_its_day_file(workspace: Path, make_memory) -> None:
    """Messages are routed to day files by sync.timezone: 03:00 UTC on the 25th is the evening of
    the 24th in Los Angeles, and after/before count it there, as its file does."""
    memory = make_memory(workspace, embedding__provider="none", sync__timezone="America/Los_Angeles")
    at = int(dt.datetime(2026, 11, 25, 3, 0, tzinfo=dt.timezone.utc).timestamp() * 1000)
    line = json.dumps({"id": "r1", "chatId": "c1", "chatTitle": "Garden", "role": "user",
                       "content": "Cut back the reeds by the pond", "timestamp": at})
    memory.ingest_sync(line.encode() + b"\n")
    assert (workspace / "clawgpt-memory" / "2026-11-24.jsonl").exists()
    before = memory.search("reeds pond", options=parse_options({"before": "2026-11-25"})).results
    after = memory.search("reeds pond", options=parse_options({"after": "2026-11-25"})).results
    assert [r.path for r in before] == ["clawgpt-memory/2026-11-24.jsonl"] and after == []


def test_a_word_in_most_chunks_is_left_out_of_a_large_index_keyword_query_by_its_stem(
        workspace: Path, make_memory, monkeypatch: pytest.MonkeyPatch) -> None:
    """informative_terms counts a word by the term FTS5 holds for it: "melanie" is indexed as
    "melani", and looked up as typed it was never found, so never dropped however common."""
    from memfs.index.search import hybrid as search

    for day in range(1, 25):
        write(workspace / "memory" / f"2023-05-{day:02d}.md",
              f"## 10:00 - Melanie\nMelanie talked about the weather on day {day}.\n"
              + ("Melanie went to a pottery class.\n" if day == 7 else ""))
    memory = make_memory(workspace, **{"embedding__provider": "none"})
    memory.index()
    monkeypatch.setattr(search, "COMMON_TERM_MIN_CHUNKS", 10)  # this index stands for a large one
    assert search.informative_terms(memory.store, ["melanie", "pottery"]) == ["pottery"]
    assert search.informative_terms(memory.store, ["melanie", "weather"]) == ["melanie", "weather"]  # none rare
    monkeypatch.setattr(search, "COMMON_TERM_MIN_CHUNKS", 5000)
    assert search.informative_terms(memory.store, ["melanie", "pottery"]) == ["melanie", "pottery"]  # small index


def test_nearest_chunks_are_found_beside_the_keyword_side(workspace: Path, make_memory, locomo_day,
                                                          monkeypatch, index_backend: str) -> None:
    """With the in-memory matrix (a large index; here from the first vector on), the pending query
    vector is awaited and the KNN run on another thread while the search holds the store's lock
    (no write can move the matrix meanwhile), and the answer is the one a ready vector gives."""
    if index_backend != "sqlite":
        pytest.skip("SQLite's in-memory matrix: PostgreSQL finds the nearest chunks on the server")
    import threading

    from memfs.index.search.hybrid import SearchParams, hybrid_search
    from memfs.index.storage.sqlite import searching as store_module  # where KNN reads it

    monkeypatch.setattr(store_module, "MATRIX_MIN_VECTORS", 1)
    locomo_day(workspace)
    memory = make_memory(workspace)
    memory.index()
    store = memory.store
    params = SearchParams.from_config(memory.cfg.search)
    seen: list[tuple[threading.Thread, bool]] = []
    for query in ("When did Caroline go to the LGBTQ support group?", "a painting of the sun over the lake"):
        vector = memory.provider.embed([query])[0]

        def pending() -> object:
            free = store.lock.acquire(blocking=False)  # an RLock: the search's own thread would get it
            if free:
                store.lock.release()
            seen.append((threading.current_thread(), free))
            return vector

        ready = hybrid_search(store, query, vector, params)
        assert ready and hybrid_search(store, query, pending, params) == ready
    assert store._matrix is not None
    assert all(thread is not threading.current_thread() and not free for thread, free in seen), seen


def test_a_provisional_jsonl_result_cites_its_own_message_only(workspace: Path, make_memory) -> None:
    # Until a big write's exact chunks come, its units are its lines: a JSONL line beside the
    # match is another message, not its context (a newcomer saw an unrelated one cited with it).
    lines = [json.dumps({"type": "message", "id": f"m{i}", "message": {"role": "user", "content":
                         f"Message {i}: the weather was mild and the garden quiet."}}) for i in range(300)]
    lines[150] = json.dumps({"type": "message", "id": "x", "message": {"role": "user",
                                                                        "content": "The Xylophonist played."}})
    write(workspace / "sessions" / "import.jsonl", "\n".join(lines) + "\n")
    memory = make_memory(workspace, embedding__provider="none", index__defer_mb="0.001")
    assert memory.file_changed("sessions/import.jsonl", defer=True).provisional
    hit = memory.search("Xylophonist").results[0]
    assert (hit.path, hit.start_line, hit.end_line) == ("sessions/import.jsonl", 151, 151)
    assert hit.snippet.count("\n") == 0 and "Xylophonist" in hit.snippet


def test_a_search_counts_as_pending_the_passages_a_big_write_being_chunked_will_add(workspace: Path,
                                                                                    make_memory) -> None:
    # A newcomer's search said "pending: 0" during an import that `memfs status` counted 39507
    # passages waiting for (its exact chunks, estimated): the search counts them as status does,
    # and a shared reader is told none of a private file's.
    from memfs.render.results import render_markdown

    def transcript(word: str) -> str:
        lines = [json.dumps({"type": "message", "id": f"m{i}", "message": {"role": "user", "content":
                             f"Message {i}: the weather was mild and the {word} quiet."}}) for i in range(300)]
        return "\n".join(lines) + "\n"

    write(workspace / "sessions" / "import.jsonl", transcript("garden"))  # private by default
    write(workspace / "memory" / "2026-11-20.md", "".join(f"## 09:{i % 60:02d}\nThe harbour was quiet, day {i}.\n\n"
                                                          for i in range(300)))
    memory = make_memory(workspace, index__defer_mb="0.001")
    for path in ("sessions/import.jsonl", "memory/2026-11-20.md"):
        assert memory.file_changed(path, defer=True).provisional
    for mode in ("main", "shared"):
        status = memory.status(mode=mode)
        assert status["pending_estimated"] > 0, status
        response = memory.search("weather", mode=mode)
        assert response.pending == status["pending"] + status["pending_estimated"]
        assert response.pending_estimated == status["pending_estimated"]
        assert f"· pending: {response.pending}\n" in render_markdown(response)
        assert response.as_dict()["pending"] == response.pending
        assert f"{response.pending} passages still wait" in response.pending_note, response.pending_note
    assert memory.search("weather", mode="shared").pending < memory.search("weather").pending
    summed: list[bool] = []
    lines = memory.store.provisional_lines
    memory.store.provisional_lines = lambda include_private=True: summed.append(include_private) or lines(include_private)
    memory.search("harbour")
    memory.search("garden", mode="shared")
    assert summed == []  # summed again when the text changes, not by every search
    memory.complete("memory/2026-11-20.md")
    assert memory.search("harbour").pending == memory.status()["pending"] + memory.status()["pending_estimated"]
    assert summed == [True]


def test_an_empty_section_of_memory_md_is_not_a_result(workspace: Path, make_memory) -> None:
    write(workspace / "MEMORY.md", "# Long-term Memory\n\n## User Preferences\n\n## Important Decisions\n\n## People\n")
    write(workspace / "memory" / "2026-11-20.md", "## 09:10\nOrdered an oat milk flat white again, no sugar.\n")
    memory = make_memory(workspace)
    memory.index()
    for query in ("drink preference", "user preferences", "important decisions"):
        assert [r.path for r in memory.search(query, min_score=0).results if r.path == "MEMORY.md"] == [], query
    assert memory.search("oat milk").results[0].path == "memory/2026-11-20.md"


def test_memory_md_stays_a_candidate_behind_a_history_that_outranks_it(workspace: Path, make_memory) -> None:
    """MEMORY.md's facts are found however much history outranks its chunk: a newcomer's "medication
    allergy" found MEMORY.md until months of chats were imported, then got nothing (its chunk, eight
    facts in one, was in neither the 50 best keyword chunks nor the 50 nearest)."""
    write(workspace / "MEMORY.md", "# Memory\n\n## Health\n- The user is allergic to penicillin.\n"
          "- Blood type: O negative\n\n## People\n- Wife: Priya Raman\n- Boss: Dana Whitfield\n\n"
          "## Preferences\n- Drinks oat milk flat whites\n- Runs 5 km on Saturdays\n- Prefers aisle seats\n"
          "- Uses vim, never emacs\n")
    for day in range(70):  # each a chunk of its own, nearer the question in words and meaning
        write(workspace / "memory" / f"2026-{day // 28 + 1:02d}-{day % 28 + 1:02d}.md",
              f"- Medication and allergy check-up {day}: the medication allergy list was reviewed again.\n")
    memory = make_memory(workspace)
    memory.index()
    found = memory.search("medication allergy", max_results=100, min_score=0.0).results
    assert any(r.path == "MEMORY.md" and "penicillin" in r.snippet for r in found), [r.citation for r in found[:5]]
    # A shared reader never gets it (MEMORY.md is private), whatever the pool.
    shared = memory.search("medication allergy", max_results=100, min_score=0.0, mode="shared").results
    assert all(r.path != "MEMORY.md" for r in shared)
