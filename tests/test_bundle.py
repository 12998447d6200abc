"""The context bundle: order, budgets, fairness, truncation markers, modes, determinism."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from conftest import write

from memfs.index.text import tokens
from memfs.memory import UnknownMode
from memfs.render.bundle import allocate, truncate

NOW = dt.datetime(2026, 11, 22, 23, 30, tzinfo=dt.timezone.utc)


def test_allocation_is_fair_water_filling() -> None:
    assert allocate([100, 200], 1000, 3000) == [100, 200]
    assert allocate([10_000, 100, 10_000], 1000, 3000) == [450, 100, 450]
    assert allocate([10_000, 10_000], 8000, 3000) == [3000, 3000]  # per-file cap
    assert sum(allocate([5000, 7, 900, 4000], 2000, 3000)) == 2000


def test_truncation_keeps_head_and_tail_with_a_marker() -> None:
    text = "".join(f"line {i} " + "word " * 20 + "\n" for i in range(1, 201))
    body, included, cut = truncate("AGENTS.md", text, 300)
    assert cut and included <= 300
    lines = body.split("\n")
    assert lines[0].startswith("line 1 ") and body.rstrip("\n").endswith("word ")
    assert "line 200 " in body
    marker = next(line for line in lines if line.startswith("[… memfs:"))
    assert "tokens cut here" in marker and "sed -n" in marker and "memfs get AGENTS.md --from" in marker


def _bundle_ws(ws: Path) -> None:
    write(ws / "MEMORY.md", "- PRIVATE-MARKER-7731: the user's bank is Northwind.\n")
    write(ws / "memory" / "2026-11-22.md", "- today entry\n")
    write(ws / "memory" / "2026-11-21.md", "- yesterday entry\n")


def test_order_modes_and_private_memory(workspace: Path, make_memory) -> None:
    _bundle_ws(workspace)
    memory = make_memory(workspace, embedding__provider="none", bundle__timezone="UTC")
    main = memory.bundle("main", now=NOW)
    headers = [line[11:] for line in main.split("\n") if line.startswith("## source: ")]
    assert headers == ["AGENTS.md", "SOUL.md", "USER.md", "TOOLS.md", "memory/2026-11-22.md",
                       "memory/2026-11-21.md", "MEMORY.md"]
    assert "PRIVATE-MARKER-7731" in main
    shared = memory.bundle("shared", now=NOW)
    assert "PRIVATE-MARKER-7731" not in shared and "## source: MEMORY.md" not in shared
    assert main.startswith("# memfs context: main (2026-11-22)")
    assert "| file | tokens included / total | truncated |" in main
    assert memory.bundle("main", now=NOW) == main  # deterministic
    with pytest.raises(UnknownMode):
        memory.bundle("MAIN", now=NOW)


def test_today_follows_the_configured_time_zone(workspace: Path, make_memory) -> None:
    _bundle_ws(workspace)
    write(workspace / "memory" / "2026-11-23.md", "- tomorrow in UTC terms\n")
    tokyo = make_memory(workspace, embedding__provider="none", bundle__timezone="Asia/Tokyo").bundle("main", now=NOW)
    assert "## source: memory/2026-11-23.md" in tokyo and "## source: memory/2026-11-22.md" in tokyo  # 08:30 next day there


def test_missing_files_get_a_note(tmp_path: Path, make_memory) -> None:
    write(tmp_path / "ws" / "AGENTS.md", "rules\n")
    memory = make_memory(tmp_path / "ws", embedding__provider="none", bundle__timezone="UTC")
    text = memory.bundle("main", now=NOW)
    assert "_(missing: SOUL.md does not exist yet)_" in text
    assert "| SOUL.md | 0 / 0 | missing |" in text


def test_a_huge_agents_file_does_not_starve_the_others(workspace: Path, make_memory) -> None:
    _bundle_ws(workspace)
    write(workspace / "AGENTS.md", "".join(f"rule {i}: " + "be careful " * 30 + "\n" for i in range(3000)))
    memory = make_memory(workspace, embedding__provider="none", bundle__timezone="UTC",
                         bundle__total_tokens=2000, bundle__per_file_tokens=5000)
    text = memory.bundle("main", now=NOW)
    for must in ("today entry", "yesterday entry", "PRIVATE-MARKER-7731", "SOUL.md —", "USER.md —"):
        assert must in text
    assert "| AGENTS.md |" in text and "| yes |" in text
    body = text.split("\n## source: AGENTS.md\n", 1)[1].split("\n## source: SOUL.md\n", 1)[0]
    assert tokens.count(body) < 2000 and "tokens cut here" in body


@pytest.mark.parametrize("budget", [300, 450, 800, 2000, 8000])
def test_the_whole_bundle_stays_within_its_budget(workspace: Path, make_memory, budget: int) -> None:
    _bundle_ws(workspace)
    write(workspace / "MEMORY.md", "".join(f"- fact {i}: the user prefers option {i} of many\n" for i in range(400)))
    write(workspace / "memory" / "2026-11-22.md", "".join(f"## 09:{i % 60:02d} - entry {i}\nDid thing {i}.\n"
                                                          for i in range(300)))
    memory = make_memory(workspace, embedding__provider="none", bundle__timezone="UTC", bundle__total_tokens=budget)
    for mode in ("main", "shared"):
        text = memory.bundle(mode, now=NOW)
        used = tokens.count(text)
        assert used <= budget, (mode, used)
        assert f"{used} of {budget} budget tokens used" in text  # the manifest states the real size
        if budget >= 2000 and mode == "main":  # (shared leaves MEMORY.md out: less than the budget to show)
            assert used >= budget * 0.8  # and the budget is actually used, not wasted on caution


def test_lowercase_memory_md_is_long_term_memory(tmp_path: Path, make_memory) -> None:
    write(tmp_path / "ws" / "AGENTS.md", "rules\n")
    write(tmp_path / "ws" / "memory.md", "- LOWERCASE-LONG-TERM fact: the boat is called Wren.\n")
    memory = make_memory(tmp_path / "ws", embedding__provider="none", bundle__timezone="UTC")
    main = memory.bundle("main", now=NOW)
    assert "## source: memory.md" in main and "LOWERCASE-LONG-TERM" in main
    assert "LOWERCASE-LONG-TERM" not in memory.bundle("shared", now=NOW)
    memory.index()
    assert memory.search("boat called Wren").results[0].path == "memory.md"
    assert not memory.search("boat called Wren", mode="shared", min_score=0).results


def test_a_manifest_too_big_for_the_budget_gives_a_compact_bundle(tmp_path: Path, make_memory) -> None:
    files = [f"notes/file-{i:02d}-with-a-long-name.md" for i in range(14)]
    for name in files:
        write(tmp_path / "ws" / name, "x\n" * 200)
    memory = make_memory(tmp_path / "ws", embedding__provider="none", bundle__timezone="UTC",
                         bundle__total_tokens=300, bundle__files=",".join(files))
    text = memory.bundle("main", now=NOW)
    assert tokens.count(text) <= 300 and "too small for the manifest of 14 files" in text


def test_a_synced_chat_in_the_bundle_reads_as_messages_under_its_title(workspace: Path, make_memory) -> None:
    import json

    lines = [json.dumps({"id": f"c1-{i}", "chatId": "c1", "chatTitle": "Trip to Porto", "role": role,
                         "content": text, "timestamp": 1763800000000 + i * 60_000})
             for i, (role, text) in enumerate([("user", "Book the riverside hotel"),
                                               ("assistant", "Booked it for the 3rd \x1b[31m")]
                                              + [("user", f"Day {n}: walk the Ribeira and taste port wine number {n}")
                                                 for n in range(80)])]
    write(workspace / "clawgpt-memory" / "2026-11-22.jsonl", "\n".join(lines) + "\n")
    memory = make_memory(workspace, embedding__provider="none",
                         bundle__files=["clawgpt-memory/{today}.jsonl"], bundle__timezone="UTC")
    text = memory.bundle("main", now=NOW)
    assert "# Trip to Porto" in text and "User: Book the riverside hotel" in text, text
    assert '"chatTitle"' not in text and "\x1b" not in text
    short = make_memory(workspace, embedding__provider="none", bundle__files=["clawgpt-memory/{today}.jsonl"],
                        bundle__timezone="UTC", bundle__total_tokens=600, bundle__per_file_tokens=400)
    cut = short.bundle("main", now=NOW)
    assert "sed -n" not in cut and "memfs get clawgpt-memory/2026-11-22.jsonl --messages" in cut, cut
