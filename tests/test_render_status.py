"""`memfs status` as text: the embedding backlog's share and time left while big writes are
still being chunked (their passages are not counted yet, so neither figure may pass for the
whole: a newcomer saw 65% / 14 min, then 2% / 3.5 h half a minute later)."""

from __future__ import annotations

import re
import time

from memfs.render.status import render_status

INFO = {"workspace": "/w", "agent": "main", "files": 3, "skipped": 0, "chunks": 40, "provider": "local",
        "model": "m", "dims": 384, "passages": 400, "pending": 140, "embed_rate": 20.0, "embedding_now": True,
        "seconds_left": 7.0, "measured_at": time.time()}


def pending_line(info: dict[str, object], bar: bool = False) -> str:
    return next(line for line in render_status(info, bar).splitlines() if line.startswith("pending:"))


def test_the_share_and_time_left_say_they_leave_out_big_writes_still_being_chunked() -> None:
    settled = pending_line(INFO)
    assert re.search(r"\(65% of 400 embedded; 20\.0/s, about 7 s left\)$", settled), settled
    for bar in (False, True):
        chunking = pending_line({**INFO, "provisional": ["sessions/import.jsonl", "sessions/b.jsonl"]}, bar)
        assert "65%" in chunking and "not counting the passages of the 2 big writes still being chunked" in chunking
    idle = pending_line({**INFO, "pending": 0, "provisional": ["sessions/import.jsonl"]})
    assert idle.endswith("the 1 big write being chunked joins the backlog when chunked"), idle
    keyword_only = pending_line({**INFO, "pending": 0, "provider": "none", "provisional": ["a.jsonl"]})
    assert "backlog" not in keyword_only  # nothing will be embedded
