"""Search over chat messages and transcripts: what a long message's paragraphs show."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import write


def test_each_paragraph_of_a_long_message_can_be_a_result(workspace: Path, make_memory) -> None:
    """A message longer than a chunk is cut at its paragraphs, all citing its one line; only its
    best paragraph used to be a result, so a second paragraph that holds the answer, in
    another chunk, was never shown."""
    def paragraph(topic: str, n: int) -> str:
        return " ".join(f"Step {i} of the {topic} went as planned and the logs looked ordinary." for i in range(n))

    paragraphs = [paragraph("garden shed rebuild", 30) + " The zanzibarite sample broke in the vice.",
                  paragraph("kitchen tiling", 30), paragraph("boiler service", 30),
                  paragraph("attic insulation", 30) + " We ordered a zanzibarite replacement from Leeds."]
    line = {"id": "m1", "chatId": "c1", "chatTitle": "House projects", "role": "assistant",
            "content": "\n\n".join(paragraphs), "timestamp": 1763800000000}
    write(workspace / "clawgpt-memory" / "2025-11-22.jsonl", json.dumps(line) + "\n")
    memory = make_memory(workspace, embedding__provider="none")
    memory.index()
    shown = " ".join(r.snippet for r in memory.search("zanzibarite", min_score=0).results)
    assert "broke in the vice" in shown and "replacement from Leeds" in shown, shown
