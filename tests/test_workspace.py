from pathlib import Path

import pytest

from memfs.workspace import FileKind, OutsideWorkspace, classify, init_workspace, relative


@pytest.mark.parametrize(
    "path,kind",
    [
        ("MEMORY.md", FileKind.LONG_TERM),
        ("memory/2026-11-22.md", FileKind.DAILY_LOG),
        ("memory/2026-01-26-api-design.md", FileKind.DAILY_LOG),
        ("memory/projects/notes.md", FileKind.MEMORY_NOTE),
        ("clawgpt-memory/2026-02-04.jsonl", FileKind.SYNC),
        ("sessions/abc.jsonl", FileKind.SESSION),
        ("sessions/abc.jsonl.reset.2026-01-01", FileKind.SESSION),
        ("sessions/claude-code/src-kettle/2025-11-03-5b0c5e2e.jsonl", FileKind.SESSION),
        ("sessions/claude-code/.hidden/x.jsonl", FileKind.OTHER),
        ("sessions/claude-code/notes.md", FileKind.OTHER),
        ("AGENTS.md", FileKind.OTHER),
        ("memory/.2026-11-22.md.swp", FileKind.OTHER),
        ("clawgpt-memory/.rejected/x.jsonl", FileKind.OTHER),
        ("notes/todo.txt", FileKind.OTHER),
    ],
)
def test_classify(path: str, kind: FileKind) -> None:
    assert classify(path) is kind


def test_extra_paths(tmp_path: Path) -> None:
    assert classify("notes/a.md", ["notes/*.md"]) is FileKind.MEMORY_NOTE


def test_init_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("mine")
    created, kept = init_workspace(tmp_path)
    assert (tmp_path / "AGENTS.md").read_text() == "mine"
    assert "AGENTS.md" in kept and "MEMORY.md" in created
    assert (tmp_path / "memory").is_dir()
    agents = (Path(__file__).parent.parent / "workspace_template" / "AGENTS.md").read_text()
    for must in ("memory/YYYY-MM-DD.md", "MEMORY.md", "search/", "sed -n"):
        assert must in agents


def test_relative_rejects_escapes(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("x")
    (tmp_path / "link").symlink_to("/etc/passwd")
    assert relative(tmp_path, "MEMORY.md") == "MEMORY.md"
    assert relative(tmp_path, tmp_path / "MEMORY.md") == "MEMORY.md"
    for bad in ("../x", "/etc/passwd", "link", "memory/../../x"):
        with pytest.raises(OutsideWorkspace):
            relative(tmp_path, bad)


def test_a_tz_the_machine_does_not_know_is_named_not_silently_taken_as_utc(monkeypatch, caplog) -> None:
    import time

    from memfs import workspace

    for value, warned in (("America/New_Yrok", True), ("America/New_York", False), ("UTC", False)):
        monkeypatch.setenv("TZ", value)
        time.tzset()
        workspace.warn_unknown_tz.cache_clear()
        caplog.clear()
        workspace.timezone("")
        assert ("TZ=America/New_Yrok is not a time zone" in caplog.text) is warned, value
    monkeypatch.undo()
    time.tzset()
