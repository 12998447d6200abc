"""Terminal output in memory: its control sequences are removed whole wherever text leaves
(memfs.cleantext), so the word after a colour code is a word: found by keyword, shown clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import write

from memfs.cleantext import clean_str, clean_text


@pytest.mark.parametrize("raw,clean", [
    ("The deploy failed: \x1b[1;31mzookeeper\x1b[0m rejected the manifest.",
     "The deploy failed: zookeeper rejected the manifest."),
    ("\x1b]0;deploy@build-7: ~/infra\x07\x1b[32m=== 212 passed\x1b[0m", "=== 212 passed"),  # OSC title, BEL
    ("see \x1b]8;;https://example.org\x1b\\the docs\x1b]8;;\x1b\\ now", "see the docs now"),  # OSC link, ST
    ("\x1b[2J\x1b[H\x1b[?25lready\x1b[?25h", "ready"),  # clear, home, cursor hide/show
    ("charset \x1b(Bback\x1b7saved", "charset backsaved"),  # two-byte escapes
    ("a \u009b2Jb", "a b"),  # the C1 CSI
])
def test_terminal_sequences_are_removed_whole(raw: str, clean: str) -> None:
    text, bad = clean_text(raw.encode())
    assert (text, bad) == (clean, 0)  # formatting, like a line ending: not counted as bytes lost
    assert clean_str(raw) == clean


def test_a_sequence_cut_short_is_a_mark_and_other_bytes_still_count() -> None:
    text, bad = clean_text(b"title \x1b]0;never ended\nred \x1b[31mword\x1b[0m \xff end \x1b")
    assert text == "title \ufffd]0;never ended\nred word \ufffd end \ufffd"
    assert bad == 3  # the unfinished OSC's escape, the undecodable byte, the lone escape at the end


def test_a_chat_message_is_cleaned_as_a_file_is(workspace: Path, make_memory) -> None:
    """JSON writes an escape byte as \\u001b: a message's content never went through the file's
    cleaning, so the raw sequence reached the index and the snippet."""
    line = {"id": "m1", "chatId": "c1", "chatTitle": "Deploy \u001b[1mlog\u001b[0m", "role": "user",
            "content": "CI says \u001b[1;33mdeprecated\u001b[0m for the pkg_resources import", "timestamp": 1763800000000}
    write(workspace / "clawgpt-memory" / "2025-11-22.jsonl", json.dumps(line) + "\n")
    memory = make_memory(workspace, embedding__provider="none")
    memory.index()
    results = memory.search("deprecated").results
    assert results and results[0].snippet.endswith("User: CI says deprecated for the pkg_resources import")
    assert results[0].chat_title == "Deploy log"
    assert results[0].text_score == 1.0


def test_a_coloured_word_is_found_by_keyword_and_shown_clean(workspace: Path, make_memory) -> None:
    """The issue's example: `zookeeper` gave keyword 0 (`31mzookeeper` was the indexed word) and
    the snippet showed `\\ufffd[1;31mzookeeper\\ufffd[0m`."""
    write(workspace / "memory" / "2025-11-20.md",
          "# 2025-11-20\n\n## 08:30 - Incident\nThe deploy failed: \x1b[1;31mzookeeper\x1b[0m rejected the manifest.\n")
    memory = make_memory(workspace)
    memory.index()
    results = memory.search("zookeeper").results
    assert results and results[0].text_score == 1.0, [(r.snippet, r.score) for r in results]
    assert "The deploy failed: zookeeper rejected the manifest." in results[0].snippet
    assert "[1;31m" not in results[0].snippet and "\ufffd" not in results[0].snippet
    got = memory.get("memory/2025-11-20.md")
    assert "failed: zookeeper rejected" in got.text and got.bad_bytes == 0
