"""Private stays private on real mounts: two workspaces with the same agent never share an
index, and a shared-mode mount shows no private path through any route."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import write
from mounts import memfs_cli

pytestmark = pytest.mark.fuse

SECRET = "SECRET-HERON-8813"
SECRET_TEXT = "8813: the alarm code is"


def run(*cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, timeout=120)


def test_two_workspaces_with_the_default_agent_keep_their_own_search(tmp_path: Path, mount_factory) -> None:
    """The issue's repro: ws1 mounted, then ws2 mounted with the same (default) agent and state."""
    ws1, ws2 = tmp_path / "ws1", tmp_path / "ws2"
    write(ws1 / "memory" / "2026-11-22.md", "- Booked the train to Lyon for Saturday.\n- Call the plumber.\n")
    write(ws2 / "memory" / "2026-11-22.md", "- The vault combination is 31-07-66, keep it safe.\n")
    mnt1 = mount_factory(ws1, "main")
    mount_factory(ws2, "main")
    answer = (mnt1.mnt / "search" / "vault combination.md").read_text()
    assert "31-07-66" not in answer
    assert "Lyon" in (mnt1.mnt / "search" / "train to Lyon.md").read_text()
    # `memfs index` in ws2 does not touch the live mount of ws1 either.
    out = memfs_cli("index", "-w", str(ws2), env={"MEMFS_STATE_DIR": str(mnt1.state)})
    assert out.returncode == 0, out.stderr
    assert "31-07-66, keep" not in (mnt1.mnt / "search" / "n=20,min=0" / "vault combination 31-07-66.md").read_text()
    assert "memory/2026-11-22.md#L1" in (mnt1.mnt / "search" / "train to Lyon.md").read_text()


@pytest.fixture
def both(workspace: Path, mount_factory, locomo_day):
    """The same workspace mounted twice: main mode, and shared mode beside it."""
    locomo_day(workspace)
    write(workspace / "MEMORY.md", f"# Memory\n\n- {SECRET}: the alarm code is 5-5-1-9.\n")
    write(workspace / "secret-notes" / "plans.md", "- SECOND-SECRET surprise party on the 12th.\n")
    write(workspace / "memory" / "2026-11-20.md", "- Public note: the team picnic is on Sunday.\n")
    settings = ("--set", "bundle.timezone=UTC", "--set", "privacy.private_paths=MEMORY.md,secret-notes")
    main = mount_factory(workspace, "main", *settings)
    shared = mount_factory(workspace, "main", "--mode", "shared", *settings, mnt=workspace.parent / "shared-mnt")
    return main, shared


def test_nothing_private_is_reachable_through_a_shared_mount(both) -> None:
    main, shared = both
    mnt = shared.mnt
    # The control: the main mount shows all of it.
    assert SECRET_TEXT in (main.mnt / "MEMORY.md").read_text()
    assert SECRET_TEXT in (main.mnt / "search" / f"{SECRET}.md").read_text()
    assert SECRET_TEXT in (main.mnt / "context" / "main.md").read_text()

    for name in ("MEMORY.md", "memory.md", "secret-notes", "secret-notes/plans.md"):
        with pytest.raises(FileNotFoundError):
            os.stat(mnt / name)
    assert run("cat", "MEMORY.md", cwd=mnt).returncode != 0
    listing = run("ls", "-a", cwd=mnt).stdout.decode().split()
    assert "MEMORY.md" not in listing and "secret-notes" not in listing and "AGENTS.md" in listing
    assert "." in listing and ".." in listing
    found = run("find", ".", cwd=mnt).stdout.decode()
    assert "MEMORY.md" not in found and "secret-notes" not in found and "./memory/2026-11-20.md" in found
    assert run("grep", "-r", "8813", ".", cwd=mnt).stdout == b""
    assert run("grep", "-r", "SECOND-SECRET", ".", cwd=mnt).stdout == b""
    tarball = run("tar", "-cf", "-", ".", cwd=mnt).stdout
    assert b"8813" not in tarball and b"SECOND-SECRET" not in tarball and b"team picnic" in tarball

    reads = []
    for query in (SECRET, "alarm code", "what is the alarm code", "surprise party", "SECOND-SECRET"):
        for folder in ("", "n=20,min=0/"):
            for ext in ("md", "json"):
                reads.append((mnt / "search" / f"{folder}{query}.{ext}").read_text())
    reads.append((mnt / "context" / "shared.md").read_text())
    reads.append((mnt / ".memfs" / "status").read_text())
    for text in reads:
        assert SECRET_TEXT not in text and "5-5-1-9" not in text and "surprise party on" not in text
        assert "secret-notes/" not in text and "MEMORY.md#" not in text
    with pytest.raises(PermissionError):
        (mnt / "context" / "main.md").read_text()
    assert "main.md" not in os.listdir(mnt / "context")
    assert "mode:       shared" in (mnt / ".memfs" / "status").read_text()
    assert "team picnic" in (mnt / "search" / "team picnic.md").read_text()


def test_a_shared_mount_cannot_create_or_move_onto_private_paths(both) -> None:
    main, shared = both
    mnt, ws = shared.mnt, shared.workspace
    before = (ws / "MEMORY.md").read_bytes()
    write(ws / "memory" / "draft.md", "- a draft\n")
    attempts = {
        "create": lambda: open(mnt / "MEMORY.md", "w").close(),
        "create lowercase": lambda: open(mnt / "memory.md", "w").close(),
        "mkdir": lambda: os.mkdir(mnt / "secret-notes"),
        "rename onto": lambda: os.rename(mnt / "memory" / "draft.md", mnt / "MEMORY.md"),
        "rename into a private folder": lambda: os.rename(mnt / "memory" / "draft.md", mnt / "secret-notes"),
        "symlink": lambda: os.symlink("memory/draft.md", mnt / "MEMORY.md"),
        "hard link": lambda: os.link(mnt / "memory" / "draft.md", mnt / "memory.md"),
    }
    for what, attempt in attempts.items():
        with pytest.raises(OSError) as raised:
            attempt()
        assert raised.value.errno == errno.EACCES, what
    assert (ws / "MEMORY.md").read_bytes() == before and not (ws / "memory.md").exists()
    assert sorted(p.name for p in (ws / "secret-notes").iterdir()) == ["plans.md"]
    log = next(p for p in (shared.state / "mounts").glob("*.log") if "shared mode)" in p.read_text()).read_text()
    assert "refused on a shared mount: MEMORY.md is a private path" in log


def test_writes_through_a_shared_mount_are_indexed_into_the_same_index(both) -> None:
    main, shared = both
    with open(shared.mnt / "memory" / "2026-11-20.md", "a") as log:
        log.write("- Group chat decided: the offsite moves to Porto.\n")
    assert "memory/2026-11-20.md#L1-L2" in (shared.mnt / "search" / "offsite Porto.md").read_text()
    assert "memory/2026-11-20.md#L1-L2" in (main.mnt / "search" / "offsite Porto.md").read_text()
    assert json.loads(memfs_cli("search", "--json", "offsite Porto", "-w", str(main.workspace),
                                env={"MEMFS_STATE_DIR": str(main.state)}).stdout)["results"]
