"""The first seconds of a new mount: a fact written and searched at once is found by its meaning,
not by keyword alone, because the mount loads the model as it starts and a search embeds the
freshest few waiting passages itself (within search.pending_wait_ms)."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.fuse


def test_a_fresh_fact_is_found_by_meaning_in_the_first_second(workspace, mount_factory, tmp_path,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    # A runtime folder of its own: this mount finds no embedding service running (as a new user's
    # first mount does); the service it starts leaves soon after the test.
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
    m = mount_factory(workspace, "main", "--set", "embedding.service_idle_s=5")
    day = time.strftime("%Y-%m-%d")
    with open(m.mnt / "memory" / f"{day}.md", "a") as log:
        log.write("\n## 09:00 - Decisions\n\nWe chose PostgreSQL over MongoDB for the billing service.\n")
    began = time.monotonic()
    answer = (m.mnt / "search" / "which database did we choose for billing.md").read_text()
    took = time.monotonic() - began
    assert "PostgreSQL over MongoDB" in answer, answer
    scores = [line for line in answer.splitlines() if line.startswith("score ")]
    assert scores and "vector 0.000" not in scores[0], scores  # by its meaning, not by keyword alone
    assert took < 5, took  # one search, not a wait for the model to be started by it


def test_a_search_with_no_wait_answers_from_what_has_vectors(workspace, mount_factory) -> None:
    m = mount_factory(workspace, "main", "--set", "search.pending_wait_ms=0")
    day = time.strftime("%Y-%m-%d")
    with open(m.mnt / "memory" / f"{day}.md", "a") as log:
        log.write("\n## 09:00 - Decisions\n\nWe chose PostgreSQL over MongoDB for the billing service.\n")
    answer = (m.mnt / "search" / "n=6,min=0" / "PostgreSQL billing.md").read_text()
    assert "PostgreSQL over MongoDB" in answer  # by keyword at once, whatever has its vector
