"""`memfs status` as text: the embedding backlog's share and time left while big writes are
still being chunked (their passages are counted as waiting, estimated, so the share does not
fall back when they arrive: a newcomer saw 65% / 14 min, then 2% / 3.5 h half a minute later)."""

from __future__ import annotations

import re
import time

from memfs.render.status import render_status

INFO = {"workspace": "/w", "agent": "main", "files": 3, "skipped": 0, "chunks": 40, "provider": "local",
        "model": "m", "dims": 384, "passages": 400, "pending": 140, "embed_rate": 20.0, "embedding_now": True,
        "seconds_left": 7.0, "measured_at": time.time()}


def pending_line(info: dict[str, object], bar: bool = False) -> str:
    return next(line for line in render_status(info, bar).splitlines() if line.startswith("pending:"))


def test_the_share_counts_the_passages_of_big_writes_still_being_chunked_as_waiting() -> None:
    settled = pending_line(INFO)
    assert re.search(r"\(65% of 400 embedded; 20\.0/s, about 7 s left\)$", settled), settled
    # 260 embedded; 140 waiting and about 600 to come: 260 of 1000.
    chunking = {**INFO, "passages": 1000, "pending_estimated": 600,
                "provisional": ["sessions/import.jsonl", "sessions/b.jsonl"]}
    line = pending_line(chunking)
    assert line.startswith("pending:    740 passage(s) waiting for an embedding (about 600 of them to come from "
                           "the 2 files being chunked; 26% of 1000 embedded;"), line
    bar = pending_line(chunking, bar=True)
    assert "26% of 1000 passages embedded, 740 waiting (about 600 of them to come from the 2 files" in bar, bar
    # Nothing embedded waits yet, only what a big write will make.
    idle = pending_line({**INFO, "pending": 0, "pending_estimated": 300, "passages": 560,
                         "provisional": ["sessions/import.jsonl"]})
    assert "300 passage(s) waiting" in idle and "the 1 file being chunked" in idle and "46% of 560" in idle, idle
    keyword_only = pending_line({**INFO, "pending": 0, "provider": "none", "provisional": ["a.jsonl"]})
    assert keyword_only == "pending:    0 passage(s) waiting for an embedding"  # nothing will be embedded


def test_files_being_chunked_are_not_told_as_nobody_embedding() -> None:
    # Right after a notes folder was copied into a mount, its files are still being chunked and
    # no rate was measured for a while (nothing was embedded during the burst): a newcomer was
    # told "nothing is embedding now" while the mount was about to embed them.
    quiet = {**INFO, "embedding_now": False, "seconds_left": 70.0}
    assert "nothing is embedding now (at the last rate, 20.0/s" in pending_line(quiet)
    chunking = {**quiet, "pending_estimated": 1200, "provisional": ["memory/2025-01-02.md"]}
    line = pending_line(chunking)
    assert "files are being chunked first (then embedded, at 20.0/s" in line and "nothing is embedding" not in line
    from memfs.index.embedding.backlog import Backlog

    stale = Backlog(1340, 20.0, time.time() - 3600)
    assert "no memfs process is embedding them now" in stale.line()
    assert stale.line(chunking=True).endswith("files are being chunked first (then embedded, at 20.0/s: about 2 min)")
