"""Noise is not language (memfs.index.text.noise): random bytes, a base64 blob or a hex dump in memory
are found by their exact tokens, never by a vector, and a junk query (a run of one letter, random
base64, marks) is searched by its words alone, so it answers nothing."""

from __future__ import annotations

import base64
import random
from pathlib import Path

import pytest
from conftest import write

from memfs.index.text.noise import is_noise, unreadable_query

BLOB = base64.b64encode(random.Random("blob").randbytes(1200)).decode()
BLOB_LINES = [BLOB[i : i + 76] for i in range(0, len(BLOB), 76)]


def hex_dump(data: bytes) -> str:
    rows = []
    for offset in range(0, len(data), 16):
        chunk = data[offset : offset + 16]
        words = " ".join(chunk[i : i + 2].hex() for i in range(0, 16, 2))
        rows.append(f"{offset:08x}: {words}  " + "".join(chr(b) if 32 <= b < 127 else "." for b in chunk))
    return "\n".join(rows)


@pytest.mark.parametrize("text", [
    BLOB_LINES[0],
    hex_dump(random.Random("hex").randbytes(64)).split("\n")[1],
    "ĨڡV \ufffd",  # what is left of a line of random bytes
    "\ufffd snx \ufffd",
])
def test_noise_passages(text: str) -> None:
    assert is_noise(text)


@pytest.mark.parametrize("text", [
    "The user is allergic to penicillin.",
    "Rolled back to commit 9f3c2a7e5b1d4c8a06f2 after the outage.",
    "Work laptop is a ThinkPad X1 Carbon, asset tag IT-20931.",
    "Added a composite index on orders(customer_id, created_at); 9 s to 200 ms.",
    "The block is an `Expr::StmtBlock` or `Expr::StmtBlockWithScope` in `CompileTimeEnv::new`",
    "| Requirement Key | Has Task? | Notes |\n|-----------------|-----------|-------|",
    "Garage door code is 5521 \ufffd",  # a fact with a stray byte is still a fact
    "这个错误是渲染问题",
    "2024-05-02 09:00 1,450 06:40 020 7946 0321",
])
def test_language_is_not_noise(text: str) -> None:
    assert not is_noise(text)


@pytest.mark.parametrize("query,unreadable", [
    ("q" * 252, True), ("x" * 200, True), ("ab" * 100, True),
    (base64.b64encode(random.Random(1).randbytes(120)).decode()[:160], True),
    ("\ufffd\ufffd\ufffd \ufffd\ufffd", True),
    ("medication allergy", False), ("9f3c2a7e5b1d4c8a06f2", True),  # a hash: its words find it
    ("who borrowed my science fiction novel", False),
    ("Pneumonoultramicroscopicsilicovolcanoconiosis", True),  # one token of 45 letters: no word the model reads
])
def test_unreadable_queries(query: str, unreadable: bool) -> None:
    assert unreadable_query(query) is unreadable


@pytest.fixture
def junk(workspace: Path, make_memory):
    """A workspace as a newcomer's: facts, and junk beside them."""
    write(workspace / "memory" / "2025-11-02.md",
          "# 2025-11-02\n\n## 09:00 - Health\nThe user is allergic to penicillin.\n\n"
          "## 11:15 - Biscuit\nTook Biscuit the beagle to the vet for his rabies shot; the booster is due next March.\n")
    (workspace / "memory" / "attachment.md").write_bytes(random.Random("noise").randbytes(200_000))
    write(workspace / "memory" / "notes" / "signing-key.md",
          "# Signing key backup\n\n```\n" + "\n".join(BLOB_LINES) + "\n```\n")
    write(workspace / "memory" / "notes" / "firmware.md",
          "# Router firmware header\n\n" + hex_dump(random.Random("fw").randbytes(512)) + "\n")
    memory = make_memory(workspace)
    memory.index()
    return memory


@pytest.mark.parametrize("query", [
    "q" * 252, "x" * 200, "ab" * 100, "q",
    base64.b64encode(random.Random(2).randbytes(120)).decode()[:160],
    "0f3a9c17e2b84d5566aa01bc9de2f310",
    "\ufffd\ufffd\ufffd \ufffd\ufffd",
])
def test_junk_queries_answer_nothing(junk, query: str) -> None:
    results = junk.search(query).results
    assert not results, [(r.citation, r.score, r.snippet[:40]) for r in results]


def test_a_blob_is_found_by_its_exact_token_and_facts_beside_junk_by_meaning(junk) -> None:
    found = junk.search(BLOB_LINES[3]).results
    assert found and found[0].path == "memory/notes/signing-key.md" and BLOB_LINES[3] in found[0].snippet
    assert found[0].vector_score == 0.0  # found by its words: its vector says nothing
    allergy = junk.search("medication allergy").results
    assert allergy and "penicillin" in allergy[0].snippet, [(r.snippet, r.score) for r in allergy]


def test_a_passage_waiting_for_its_vector_keeps_its_keyword_score(workspace: Path, make_memory, locomo_day) -> None:
    """The memory's best cosine (scoring.stand_out) knows nothing of a passage not embedded yet:
    a note just written, found by its one rare word at 0.97, fell to 0.37 beside a day of
    unrelated passages that had vectors."""
    locomo_day(workspace)
    memory = make_memory(workspace)
    memory.index()
    write(workspace / "memory" / "2026-01-02.md", "# 2026-01-02\n\n- Bought a kayak called Zephyrine.\n")
    memory.file_changed("memory/2026-01-02.md")
    assert memory.store.pending_count() > 0  # the case this test is about
    results = memory.search("Zephyrine").results
    assert [r.path for r in results] == ["memory/2026-01-02.md"] and results[0].score > 0.9, results


def test_a_waiting_exact_match_stays_above_older_notes_raised_by_meaning(workspace: Path, make_memory) -> None:
    """In a memory of a few notes the best cosine stands out a lot, and raised two older notes
    (0.58 cosine, no shared word) to 0.99, above the just-written note that holds the query's
    word (0.97, no vector yet): a passage waiting for its vector rises with the memory too."""
    memory = make_memory(workspace)
    for day in range(2):
        write(workspace / "memory" / f"2026-11-1{day}.md", f"# day {day}\n\nThe secret word of day {day} is quokka{day}x.\n")
    memory.index()
    write(workspace / "memory" / "2026-11-12.md", "# day 2\n\nThe secret word of day 2 is quokka2x.\n")
    memory.file_changed("memory/2026-11-12.md")
    assert memory.store.pending_count() > 0  # the case this test is about
    results = memory.search("quokka2x", wait_ms=0).results
    assert results and results[0].path == "memory/2026-11-12.md", [(r.path, r.score) for r in results]
    assert results[0].vector_score == 0.0


def test_stand_out_keeps_the_order_of_waiting_and_embedded_scores() -> None:
    import numpy as np

    from memfs.index.search import scoring

    scores = np.array([0.97, 0.40, 0.30, 0.10])
    by_meaning = np.array([False, True, True, False])
    waiting = np.array([True, False, False, False])  # the last: noise, kept as it is
    for best in (0.2, 0.45, 0.58, 0.9):
        for passages in (3, 500, 50_000):
            weighed = scoring.stand_out(scores, best, passages, by_meaning, waiting)
            assert weighed[0] >= weighed[1] >= weighed[2], (best, passages, weighed)
            assert weighed[0] >= scores[0] and weighed[3] == scores[3]

