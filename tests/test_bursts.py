"""Bursts of closes (issue #45, memfs.bursts): a notes folder copied in costs each close its keyword
rows and its version only; the files' exact chunks and vectors come once the closes pause, and a
search made right after a short burst finds its files by meaning all the same."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
import trio
from conftest import write
from mounts import wait_until

from memfs import bursts as bursts_module
from memfs.fs.writes import MemoryWrites
from memfs.index.storage.records import PROVISIONAL_HASH
from memfs.memory import MOUNT, Memory, Provenance

WHO = Provenance(MOUNT)


def note(i: int) -> str:
    return (f"# 2026-10-{i + 1:02d}\n\n## Standup\n- Mara moved the rollout of the billing service to Thursday.\n"
            f"- Codeword for day {i}: plinth{i}q.\n\n## Evening\nWe walked to the harbour and talked about the "
            f"garden plan, the tomatoes and the new fence.\n")


def provisional(memory: Memory, rel: str) -> bool:
    record = memory.store.file(rel)
    assert record is not None, rel
    return record.hash.startswith(PROVISIONAL_HASH)


def exact(memory: Memory, workspace: Path, rel: str) -> bool:
    record = memory.store.file(rel)
    return record is not None and record.hash == hashlib.sha256((workspace / rel).read_bytes()).hexdigest()


def test_a_close_in_a_burst_stores_keyword_rows_only_and_a_jsonl_file_keeps_its_one_step(workspace: Path,
                                                                                        make_memory) -> None:
    memory = make_memory(workspace)
    memory.reconcile()
    write(workspace / "memory" / "2026-10-01.md", note(0))
    alone = memory.file_changed("memory/2026-10-01.md", WHO, None, True, False)
    assert not alone.provisional and alone.pending and exact(memory, workspace, "memory/2026-10-01.md")
    write(workspace / "memory" / "2026-10-02.md", note(1))
    burst = memory.file_changed("memory/2026-10-02.md", WHO, None, True, True)
    assert burst.provisional and not burst.pending and provisional(memory, "memory/2026-10-02.md")
    hits = memory.search("plinth1q", wait_ms=0).results
    assert hits[0].path == "memory/2026-10-02.md" and hits[0].text_score > 0
    # A transcript appended to in a burst: its append is read from its last chunk on, in one step.
    write(workspace / "sessions" / "s.jsonl", '{"type":"message","id":"m1","message":{"role":"user",'
                                              '"content":"Where do we keep the spare keys?"}}\n')
    transcript = memory.file_changed("sessions/s.jsonl", WHO, None, True, True)
    assert not transcript.provisional and exact(memory, workspace, "sessions/s.jsonl")
    # A key pasted into a note is masked in its keyword rows as in its exact chunks.
    key = "ghp_" + "Zq7" * 12
    write(workspace / "memory" / "2026-10-03.md", f"# 2026-10-03\n\n- The deploy token is {key} for now.\n")
    assert memory.file_changed("memory/2026-10-03.md", WHO, None, True, True).provisional
    hits = memory.search("deploy token", wait_ms=0).results
    assert hits[0].path == "memory/2026-10-03.md" and key not in hits[0].snippet and "[masked]" in hits[0].snippet
    assert not [r for r in memory.search(key[4:], wait_ms=0).results if r.path == "memory/2026-10-03.md"]


def test_a_search_right_after_a_short_burst_chunks_its_files_and_finds_them_by_meaning(workspace: Path,
                                                                                      make_memory) -> None:
    memory = make_memory(workspace)
    memory.reconcile()
    memory.embed_pending()
    write(workspace / "memory" / "2026-10-01.md", "# 2026-10-01\n\n- Booked the dentist for Tuesday morning.\n")
    memory.file_changed("memory/2026-10-01.md", WHO, None, True, False)
    write(workspace / "MEMORY.md", "- Mara's daughter Ines plays the cello in the city youth orchestra.\n")
    memory.file_changed("MEMORY.md", WHO, None, True, True)
    assert provisional(memory, "MEMORY.md")
    question = "which musical instrument does the girl practise"  # no word of it is in the note
    # Only the process completing provisional files (a mount) chunks them in a search: another
    # one could store a version older than the mount's close stored meanwhile.
    memory.search(question, wait_ms=1000)
    assert provisional(memory, "MEMORY.md")
    memory.complete_here()
    # A shared reader's search does not chunk private files (MEMORY.md): its wait would tell of them.
    memory.search(question, wait_ms=1000, mode="shared")
    assert provisional(memory, "MEMORY.md")
    hits = memory.search(question, wait_ms=1000).results
    assert hits and hits[0].path == "MEMORY.md" and hits[0].vector_score > 0, hits
    assert not provisional(memory, "MEMORY.md") and exact(memory, workspace, "MEMORY.md")
    # Without a wait (wait_ms=0) a search leaves them to the completion worker.
    write(workspace / "MEMORY.md", "- Ines switched from the cello to the double bass in May.\n")
    memory.file_changed("MEMORY.md", WHO, None, True, True)
    hits = memory.search("double bass", wait_ms=0).results
    assert hits[0].path == "MEMORY.md" and hits[0].text_score > 0
    assert provisional(memory, "MEMORY.md")


def test_the_completion_worker_waits_for_the_burst_to_pause_then_chunks_every_file(workspace: Path, make_memory,
                                                                                   monkeypatch) -> None:
    # The closes of a folder copied in, as the mount makes them (MemoryWrites.changed); the
    # completion and embedding workers run beside them.  (The bound on the wait, for a writer
    # that never pauses, is set out of the way: a loaded machine may take longer over these.)
    monkeypatch.setattr(bursts_module, "MOST_S", 600.0)
    memory = make_memory(workspace)
    memory.reconcile()
    writes = MemoryWrites(memory)
    names = [f"memory/2026-10-{i + 1:02d}.md" for i in range(20)]
    left: list[int] = []

    async def burst() -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(writes.complete_worker)
            nursery.start_soon(writes.embed_worker)
            with trio.fail_after(300):
                for i, rel in enumerate(names):
                    write(workspace / rel, note(i))
                    await writes.changed(rel, WHO)
                    await trio.sleep(0.005)  # the next file's lookup, create, write
                left.append(sum(provisional(memory, rel) for rel in names))
                while memory.provisional_paths() or memory.pending:
                    await trio.sleep(0.05)
            nursery.cancel_scope.cancel()

    trio.run(burst)
    # The first close found no burst (done whole); the others waited for the pause (a stall of
    # the machine longer than the gap lets the worker take a file or two in between).
    assert not provisional(memory, names[0])
    assert left[0] >= len(names) // 2, left
    assert all(exact(memory, workspace, rel) for rel in names)
    assert memory.pending == 0
    hits = memory.search("plinth7q", wait_ms=0).results
    assert hits[0].path == "memory/2026-10-08.md"


@pytest.mark.fuse
def test_notes_copied_in_through_a_mount_are_found_at_each_close_then_chunked_and_embedded(workspace: Path,
                                                                                         mount_factory,
                                                                                         tmp_path: Path) -> None:
    m = mount_factory(workspace, "main")
    source = tmp_path / "notes"
    source.mkdir()
    for i in range(30):
        (source / f"2026-10-{i % 28 + 1:02d}-{i}.md").write_text(note(i))
    memory = m.memory()
    try:
        seen_provisional = 0
        paths = sorted(source.iterdir(), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
        for pair in range(0, len(paths), 2):
            for path in paths[pair:pair + 2]:  # two closes back to back: the second is one of a burst
                (m.mnt / "memory" / path.name).write_bytes(path.read_bytes())
            for i in range(pair, pair + 2):
                rel = f"memory/{paths[i].name}"
                # close() has returned: found by keyword from another connection, without waiting.
                hits = memory.search(f"plinth{i}q", wait_ms=0).results
                assert hits and hits[0].path == rel and hits[0].text_score > 0, hits[:2]
                seen_provisional += provisional(memory, rel)
        assert seen_provisional >= 1  # one-step indexing at every close made none
        assert wait_until(lambda: not memory.provisional_paths() and memory.pending == 0, timeout=240)
        assert all(exact(memory, workspace, f"memory/{p.name}") for p in source.iterdir())
        hits = memory.search("when was the billing rollout moved to", wait_ms=0).results
        assert hits and all(h.vector_score > 0 for h in hits[:3]), hits
    finally:
        memory.close()
