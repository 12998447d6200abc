"""One index per (workspace, agent): isolation, symlinks, moved workspaces, migration of the
indexes of earlier versions, and an index that finds itself opened for another workspace."""

from __future__ import annotations

import json
import os
import shutil
import stat
from pathlib import Path

from conftest import write

from memfs.config import load_config
from memfs.index.storage.records import FileRecord
from memfs.index.storage.sqlite.store import Store
from memfs.memory import Memory
from memfs.state import locate


def cfg_for(ws: Path, state: Path, agent: str = "main"):
    return load_config(workspace=ws, agent=agent, env={},
                       overrides=[("state_dir", str(state)), ("embedding.provider", "none")])


def shown(response) -> str:
    return "\n".join(r.snippet for r in response.results)


def two_workspaces(tmp_path: Path) -> tuple[Path, Path]:
    ws1, ws2 = tmp_path / "ws1", tmp_path / "ws2"
    write(ws1 / "memory" / "2026-11-22.md", "- The garden gate code is 4471.\n- Lunch with Ana on Friday.\n")
    write(ws2 / "memory" / "2026-11-22.md", "- The vault combination is 93-17-58.\n- Dentist at nine.\n")
    return ws1, ws2


def test_same_agent_on_two_workspaces_never_shares_an_index(tmp_path: Path, make_memory) -> None:
    ws1, ws2 = two_workspaces(tmp_path)
    one = make_memory(ws1)
    one.index()
    two = make_memory(ws2)
    two.index()  # used to re-index the shared main.sqlite with ws2's files
    assert one.paths.index != two.paths.index and one.paths.index.parent != two.paths.index.parent
    assert "93-17-58" not in shown(one.search("vault combination 93-17-58", min_score=0))
    assert "4471" in one.search("garden gate code").results[0].snippet
    assert "93-17-58" in two.search("vault combination").results[0].snippet
    assert "4471" not in shown(two.search("garden gate code 4471", min_score=0))


def test_a_symlink_to_the_workspace_is_the_same_workspace(tmp_path: Path) -> None:
    ws, _ = two_workspaces(tmp_path)
    link = tmp_path / "link"
    link.symlink_to(ws)
    state = tmp_path / "state"
    assert locate(cfg_for(link, state)).index == locate(cfg_for(ws, state)).index
    memory = Memory(cfg_for(ws, state))
    memory.index()
    memory.close()
    through_link = Memory(cfg_for(link, state))
    try:
        assert [o.action for o in through_link.index()] == ["unchanged"]
    finally:
        through_link.close()


def test_a_moved_workspace_takes_its_index_along(tmp_path: Path) -> None:
    ws, _ = two_workspaces(tmp_path)
    state = tmp_path / "state"
    memory = Memory(cfg_for(ws, state))
    memory.index()
    old = memory.paths
    memory.close()
    moved = tmp_path / "elsewhere" / "renamed-ws"
    moved.parent.mkdir()
    os.rename(ws, moved)
    again = Memory(cfg_for(moved, state))
    try:
        assert again.paths.index != old.index and not old.folder.exists()
        assert again.paths.identity.path == str(moved)
        assert [o.action for o in again.index()] == ["unchanged"]  # nothing re-read or re-embedded
        assert "4471" in again.search("garden gate code").results[0].snippet
    finally:
        again.close()


def test_a_copy_of_a_workspace_gets_its_own_index(tmp_path: Path) -> None:
    ws, _ = two_workspaces(tmp_path)
    state = tmp_path / "state"
    Memory(cfg_for(ws, state)).close()
    copy = tmp_path / "copy"
    shutil.copytree(ws, copy)
    assert locate(cfg_for(copy, state)).folder != locate(cfg_for(ws, state)).folder
    assert (locate(cfg_for(ws, state)).folder / "workspace.json").exists()  # the original kept its own


def _legacy_index(state: Path, agent: str, files: dict[str, str]) -> Path:
    """An index file as an earlier memfs left it: ``<agent>.sqlite`` beside the cache, with no
    record of which workspace it was made from."""
    from memfs.index.embedding.fingerprint import text_hash
    from memfs.index.text.chunking import chunk_markdown

    state.mkdir(parents=True, exist_ok=True)
    path = state / f"{agent}.sqlite"
    store = Store(path, state / f"{agent}.embcache.sqlite")
    for rel, text in files.items():
        chunks = chunk_markdown(text, 400, 80)
        store.replace_file(FileRecord(rel, "daily_log", "x", 0.0, len(text), 0, ""), chunks,
                           [text_hash(c.text) for c in chunks], [c.text for c in chunks], {})
    store.close()
    return path


def test_an_index_of_an_earlier_version_is_migrated_and_cleaned_of_other_text(tmp_path: Path) -> None:
    ws, _ = two_workspaces(tmp_path)
    state = tmp_path / "state"
    legacy = _legacy_index(state, "main", {"memory/2026-11-22.md": "- LEGACY-OTHER-WORKSPACE secret line\n",
                                           "memory/2026-01-01.md": "- another file of the other workspace\n"})
    memory = Memory(cfg_for(ws, state))
    try:
        assert not legacy.exists() and memory.paths.index.exists()
        assert not memory.search("LEGACY-OTHER-WORKSPACE secret", min_score=0).results
        assert {f.path for f in memory.store.files()} == {"memory/2026-11-22.md"}
        assert "4471" in memory.search("garden gate code").results[0].snippet
    finally:
        memory.close()
    other = Memory(cfg_for(tmp_path / "ws2", state))  # the second workspace starts a fresh index
    try:
        assert other.paths.index != memory.paths.index
        assert not other.search("garden gate code", min_score=0).results
    finally:
        other.close()


def test_an_index_opened_for_another_workspace_reconciles_before_serving(tmp_path: Path) -> None:
    ws1, ws2 = two_workspaces(tmp_path)
    state = tmp_path / "state"
    one = Memory(cfg_for(ws1, state))
    one.index()
    one.close()
    # A state directory restored from a backup, or copied by hand: ws2's folder holds ws1's index.
    target = locate(cfg_for(ws2, state)).index
    shutil.copy(one.paths.index, target)
    two = Memory(cfg_for(ws2, state))
    try:
        assert not two.search("garden gate code", min_score=0).results
        assert "93-17-58" in two.search("vault combination").results[0].snippet
    finally:
        two.close()


def test_state_folders_are_private_to_their_user(tmp_path: Path) -> None:
    ws, _ = two_workspaces(tmp_path)
    state = tmp_path / "state"
    state.mkdir(mode=0o755)
    paths = locate(cfg_for(ws, state))
    for folder in (state, state / "workspaces", paths.folder):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700, folder


def test_a_new_folder_that_got_a_deleted_ones_inode_is_not_taken_for_a_move(tmp_path: Path) -> None:
    """File systems reuse a deleted folder's inode at once; only a folder with the same names
    at its top is the old workspace moved."""
    ws, _ = two_workspaces(tmp_path)
    state = tmp_path / "state"
    old = locate(cfg_for(ws, state))
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "unrelated.txt").write_text("x")
    st = os.stat(fresh)
    record = json.loads((old.folder / "workspace.json").read_text())
    record.update({"dev": st.st_dev, "ino": st.st_ino, "path": str(tmp_path / "gone")})  # as if reused
    (old.folder / "workspace.json").write_text(json.dumps(record))
    found = locate(cfg_for(fresh, state))
    assert found.folder != old.folder and old.folder.exists()
