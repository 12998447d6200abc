"""The order the embedding queue takes passages in (real index, real model): MEMORY.md, then what
is dated today or yesterday, then everything else, the last written first."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import trio
from trio.testing import MockClock
from conftest import write

from memfs import bursts as bursts_module
from memfs.embedder import BackgroundEmbedder
from memfs.memory import Memory


def waiting(memory: Memory, path: str) -> int:
    """Passages of ``path`` (its chunks and their units) still without a vector."""
    conn = memory.store.conn
    chunks = conn.execute("SELECT count(*) FROM chunks WHERE path = ? AND embedded = 0", (path,)).fetchone()[0]
    units = conn.execute("SELECT count(*) FROM units u JOIN chunks c ON c.id = u.chunk_id "
                         "WHERE c.path = ? AND u.vector IS NULL", (path,)).fetchone()[0]
    return int(chunks) + int(units)


def test_memory_md_then_recent_days_then_the_last_written_first(workspace: Path, make_memory, locomo_day) -> None:
    today = dt.date.today().isoformat()
    locomo_day(workspace)  # memory/2023-05-08.md: old history
    write(workspace / "MEMORY.md", "# Memory\n\n- The spare key is under the blue pot.\n- Dentist on Friday.\n")
    write(workspace / "memory" / f"{today}.md", f"# {today}\n\n## 09:00 - note\n\nCalled the plumber about the sink.\n")
    memory = make_memory(workspace)
    memory.indexer.reconcile()
    old = "memory/2023-05-08.md"
    later = write(workspace / "memory" / "notes" / "ideas.md", "# Ideas\n\n- Paint the fence green.\n")
    memory.file_changed(later.relative_to(workspace).as_posix())  # written after the old day: goes first
    first, recent, rest = waiting(memory, "MEMORY.md"), waiting(memory, f"memory/{today}.md"), waiting(memory, old)
    last = waiting(memory, "memory/notes/ideas.md")
    assert first and recent and rest and last

    assert memory.embed_pending(limit=first) == first
    assert waiting(memory, "MEMORY.md") == 0
    assert waiting(memory, f"memory/{today}.md") == recent and waiting(memory, old) == rest

    memory.embed_pending(limit=recent)
    assert waiting(memory, f"memory/{today}.md") == 0 and waiting(memory, old) == rest

    memory.embed_pending(limit=1)  # the chunk of the note written last (with its units), before the old day's
    assert waiting(memory, "memory/notes/ideas.md") == 0 and waiting(memory, old) == rest


def test_the_main_mode_is_told_the_rate_of_private_text_being_embedded_and_a_shared_reader_is_not(
        workspace: Path, make_memory) -> None:
    # Session transcripts are private by default: a backlog of imported sessions was all private,
    # the rate (kept from shared readers) never moved, and the main mode was told "nothing is
    # embedding now" while it was (second newcomer walk).
    for name in list(workspace.rglob("*.md")):
        name.unlink()
    write(workspace / "MEMORY.md", "".join(f"- Private fact {i}: the locker code is {1000 + i}.\n" for i in range(40)))
    memory = make_memory(workspace)
    memory.reconcile()
    pending = memory.store.pending_count()
    assert pending > 40
    memory.embed_pending(limit=20)
    main, shared = memory.backlog(include_private=True), memory.backlog(include_private=False)
    assert main.rate > 0 and main.active and "should be done in" in main.line(), main
    assert shared.rate == 0 and not shared.active  # nothing public was embedded: nothing to tell it


def test_a_reader_with_nothing_waiting_is_shown_no_embedding_rate(workspace: Path, make_memory) -> None:
    """A shared reader whose public passages are all embedded, while private ones wait, is told
    no rate (it was the rate of public batches over the last minute, beside "pending: 0")."""
    for name in list(workspace.rglob("*.md")):
        name.unlink()
    write(workspace / "memory" / "2026-11-20.md", "# 2026-11-20\n\n- Public: the ferry leaves at 7:40.\n")
    memory = make_memory(workspace)
    memory.reconcile()
    memory.embed_pending()  # the public note: a public rate is recorded
    write(workspace / "MEMORY.md", "".join(f"- Private fact {i}: the locker code is {1000 + i}.\n" for i in range(40)))
    memory.file_changed("MEMORY.md")
    shared, main = memory.status(mode="shared"), memory.status(mode="main")
    assert shared["pending"] == 0 and shared["embed_rate"] is None and shared["seconds_left"] is None, shared
    assert main["pending"] > 0 and main["embed_rate"] > 0  # the main mode has a backlog, and a rate for it
    memory.embed_pending()
    assert memory.status(mode="main")["embed_rate"] is None  # nothing waits for it either now


def test_the_last_written_file_first_though_its_chunks_were_made_before_an_earlier_ones(
        workspace: Path, make_memory) -> None:
    """A big write's exact chunks are made by the completion worker after files written later
    (150 logs copied after an import waited behind it: a newcomer walk): the queue goes by when
    a file was written, not by when its chunks were made."""
    import os
    import time

    memory = make_memory(workspace)
    earlier = write(workspace / "memory" / "2023-01-10.md", "# 2023-01-10\n\n- Imported: the ferry timetable.\n")
    write(workspace / "memory" / "2023-01-11.md", "# 2023-01-11\n\n- Written last: the kayak rental.\n")
    stamp = time.time()
    os.utime(earlier, (stamp - 60, stamp - 60))
    memory.file_changed("memory/2023-01-11.md")  # its chunks first (lower ids)
    memory.file_changed("memory/2023-01-10.md")  # then the earlier file's, as the completion worker makes them
    assert waiting(memory, "memory/2023-01-10.md") and waiting(memory, "memory/2023-01-11.md")
    memory.embed_pending(limit=waiting(memory, "memory/2023-01-11.md"))
    assert waiting(memory, "memory/2023-01-11.md") == 0 and waiting(memory, "memory/2023-01-10.md")


def test_the_written_lately_queue_reads_each_files_waiting_chunks_through_their_own_index(
        workspace: Path, make_memory) -> None:
    """The queue's "written lately" part sorted every waiting chunk at each call (160 ms a call
    with 100k waiting, against a call of a quarter second: scripts/bench_queue.py); it now reads a
    few of each file's waiting chunks through chunks_waiting, which an index made before gets at
    its next opening."""
    memory = make_memory(workspace)
    if memory.store.backend != "sqlite":
        pytest.skip("SQLite's query plan")
    write(workspace / "memory" / "2023-01-10.md", "# 2023-01-10\n\n- The ferry timetable.\n")
    memory.file_changed("memory/2023-01-10.md")
    memory.store.conn.execute("DROP INDEX chunks_waiting")  # as an index made before it had none
    memory.close()
    memory = make_memory(workspace)
    conn = memory.store.conn
    plan = " ".join(str(r[-1]) for r in conn.execute(
        "EXPLAIN QUERY PLAN SELECT id FROM chunks INDEXED BY chunks_waiting WHERE path = ? AND embedded = 0 "
        "ORDER BY id DESC LIMIT 5", ("memory/2023-01-10.md",)))
    assert "chunks_waiting" in plan and "TEMP B-TREE" not in plan, plan  # no sort
    chosen = memory.store.pending_chunks(5, written_since=0.0)
    assert [c.path for c in chosen] == ["memory/2023-01-10.md"]


def test_two_processes_of_one_index_never_embed_the_same_passage(workspace: Path, make_memory, locomo_day) -> None:
    # Two mounts of one workspace (or a mount and `memfs index`) each embed what waits, in the
    # same order: without turns both read the same passages at once and the model did the work
    # twice (a newcomer's second mount made the first's searches 6x slower during a backlog).
    # Two Memory objects hold two open files of the index, as two processes do.
    import threading
    import time

    locomo_day(workspace)
    first, second = make_memory(workspace), make_memory(workspace)
    first.reconcile()
    second.reconcile()
    pending = first.store.pending_count()
    assert pending > 20
    given: list[tuple[str, int]] = []

    def recording(memory: Memory, name: str) -> None:
        real = memory.indexer._embed

        def embed(chunks, units):
            given.extend((name, c.id) for c in chunks)
            given.extend((name, -u.id) for u in units)
            time.sleep(0.05)  # a model call takes a while: the other process asks meanwhile
            return real(chunks, units)

        memory.indexer._embed = embed

    recording(first, "first")
    recording(second, "second")
    threads = [threading.Thread(target=m.embed_pending, kwargs={"limit": pending}) for m in (first, second)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    passages = [p for _, p in given]
    assert len(passages) == len(set(passages)), "a passage was given to the model twice"
    assert first.store.pending_count() == 0


def test_background_calls_are_sized_to_a_quarter_second_at_the_last_calls_rate() -> None:
    """Calls of 2 passages spent a tenth of their time around the model; calls sized by the rate
    take ~0.25 s each, so a note behind a backlog still waits at most two calls."""
    from memfs.embedder import BATCH, CALL_S, MAX_BATCH, CallSize

    size = CallSize(BATCH)
    assert size.passages == BATCH  # the first call after a quiet spell: most often one note
    size.measured(10, 0.05)  # 200 passages a second
    assert size.passages == int(200 * CALL_S) == 50
    size.measured(4000, 1.0)
    assert size.passages == MAX_BATCH
    size.measured(1, 2.0)  # a loaded machine: small calls again, never below the floor
    assert size.passages == BATCH
    size.measured(0, 0.3)  # nothing stored (rows replaced meanwhile): no rate to go by
    assert size.passages == BATCH
    size.measured(30, 0.1)
    size.reset()
    assert size.passages == BATCH
    remote = CallSize(512)  # a server's requests in flight: never fewer
    remote.measured(10, 1.0)
    assert remote.passages == 512



def test_a_note_written_alone_gets_a_small_call_next_and_a_bursts_files_do_not(workspace: Path,
                                                                                 make_memory) -> None:
    """Behind a backlog the calls are full (a quarter second each); a note written alone is first
    in the queue, and its own small call comes next, not another full one (a search polling for
    it found it a second later).  The files of a burst leave the size as it is."""
    from memfs.embedder import BATCH, MAX_BATCH

    embedder = BackgroundEmbedder(make_memory(workspace))
    sizes: list[int] = []

    async def closes() -> None:
        embedder.size.measured(4000, 1.0)
        sizes.append(embedder.size.passages)
        embedder.closed(True)  # a note written alone
        sizes.append(embedder.size.passages)
        embedder.size.measured(4000, 1.0)
        embedder.closed(True)  # right after it: a burst
        sizes.append(embedder.size.passages)
        await trio.sleep(0.25)  # a pause (on trio's mock clock)
        embedder.size.measured(4000, 1.0)
        embedder.closed(True)  # alone again
        sizes.append(embedder.size.passages)

    trio.run(closes, clock=MockClock(autojump_threshold=0))
    assert sizes == [MAX_BATCH, BATCH, MAX_BATCH, BATCH]


def test_whether_anything_waits_is_answered_without_counting_the_backlog(workspace: Path, make_memory) -> None:
    """The background embedder asks at each call whether anything still waits: a count read every
    waiting entry (~10 ms at 300k, in the mount's event loop); the answer comes from the first
    entry of each partial index, and agrees with the count throughout."""
    memory = make_memory(workspace)
    assert not memory.has_pending and memory.pending == 0
    write(workspace / "memory" / "2023-01-10.md", "# 2023-01-10\n\n- The ferry timetable.\n- The garden gate.\n")
    memory.file_changed("memory/2023-01-10.md")
    assert memory.has_pending and memory.pending > 0
    memory.embed_pending()
    assert not memory.has_pending and memory.pending == 0
    if memory.store.backend == "sqlite":
        conn, asked = memory.store.conn, []
        conn.set_exec_trace(lambda _cursor, sql, _bindings: asked.append(sql) or True)
        try:
            memory.store.has_pending()
        finally:
            conn.set_exec_trace(None)
        plan = " ".join(str(r[-1]) for sql in asked for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}"))
        # EXISTS stops at the first entry each partial index holds
        assert "INDEX chunks_pending" in plan and "INDEX units_pending" in plan, plan


def test_the_background_embedder_waits_while_closes_stream_in_then_embeds_them_all(workspace: Path, make_memory,
                                                                                   monkeypatch) -> None:
    # A notes folder copied in: closes come one after another; the model's calls (a core each,
    # and the index's write lock while their vectors are stored) wait for the pause after them,
    # then embed everything.  The first close finds the embedder quiet: its note goes at once, in
    # a call of its own few passages.  (The bound on the wait, for a writer that never pauses, is
    # set out of the way: a loaded machine may take longer than it over these closes.)
    monkeypatch.setattr(bursts_module, "MOST_S", 600.0)
    memory = make_memory(workspace)
    memory.reconcile()
    embedder = BackgroundEmbedder(memory)
    written: list[int] = []
    left: list[int] = []

    async def stream() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(embedder.run)
            embedder.kick()  # what the reconcile left
            with trio.fail_after(300):
                while memory.pending:
                    await trio.sleep(0.02)
                for i in range(30):
                    rel = f"memory/2026-03-{i % 28 + 1:02d}-{i}.md"
                    write(workspace / rel, f"# Day {i}\n\nWe walked to the harbour with friend number {i}.\n\n"
                                           f"- Bought {i} apples at the market.\n")
                    outcome = await trio.to_thread.run_sync(memory.file_changed, rel)
                    written.append(outcome.pending)
                    embedder.closed(bool(outcome.pending))
                    await trio.sleep(0.01)  # the next file's lookup, create, write
                left.append(memory.pending)
                while memory.pending:
                    await trio.sleep(0.02)
            nursery.cancel_scope.cancel()

    trio.run(stream)
    assert left[0] >= sum(written) - 2 * max(written), (left, written)  # only the first note's call ran
    assert memory.pending == 0 and not memory.provider_error
