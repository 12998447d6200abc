"""Write interception on a real mount: read-your-writes, background embedding, changes made beside
the mount, renames and deletes, ownership of new files."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from conftest import write
from mounts import wait_until

pytestmark = pytest.mark.fuse


def test_search_right_after_close_sees_the_write(mounted) -> None:
    memory = mounted.memory()
    try:
        for i in range(5):
            path = mounted.mnt / "memory" / f"2026-11-{10 + i:02d}.md"
            with open(path, "w") as handle:
                handle.write(f"# day {i}\n\nThe secret word of day {i} is quokka{i}x.\n")
            # No waiting: close() has returned, the keyword side must already know.
            hits = memory.search(f"quokka{i}x", wait_ms=0).results
            assert hits and hits[0].path == f"memory/2026-11-{10 + i:02d}.md"
        fd = os.open(mounted.mnt / "MEMORY.md", os.O_WRONLY | os.O_APPEND)
        os.write(fd, b"- fsync makes this visible: wombat77\n")
        os.fsync(fd)
        assert memory.search("wombat77", wait_ms=0).results  # before close
        os.close(fd)
    finally:
        memory.close()


def test_embedding_runs_off_the_event_loop(mounted) -> None:
    big = "".join(f"## {h:02d}:00 - Entry {h}\nWe discussed topic number {h} at length, " + "details " * 60 + "\n"
                  for h in range(80))
    memory = mounted.memory()
    try:
        (mounted.mnt / "memory" / "2026-11-01.md").write_text(big)
        pending_at_start = memory.pending
        assert pending_at_start > 10  # the daemon is embedding these now
        # Meanwhile the filesystem answers: create, write, read, list.
        for i in range(20):
            (mounted.mnt / f"side-{i}.txt").write_text(str(i))
        assert sorted(p.name for p in mounted.mnt.glob("side-*.txt"))[:2] == ["side-0.txt", "side-1.txt"]
        assert memory.pending > 0, "the other operations finished while embedding was still going on"
        assert wait_until(lambda: memory.pending == 0, timeout=240)
        hit = memory.search("topic number 50", wait_ms=0).results[0]
        assert hit.vector_score > 0
    finally:
        memory.close()


def test_changes_beside_the_mount_are_seen_and_indexed(mounted) -> None:
    mnt, ws = mounted.mnt, mounted.workspace
    (mnt / "MEMORY.md").write_text("- Favourite colour: green.\n")
    assert (mnt / "MEMORY.md").read_text() == "- Favourite colour: green.\n"  # now in the page cache
    (ws / "MEMORY.md").write_text("- Favourite colour: ultramarine blue.\n")  # another program
    assert wait_until(lambda: (mnt / "MEMORY.md").read_text() == "- Favourite colour: ultramarine blue.\n")
    assert (mnt / "MEMORY.md").stat().st_size == len("- Favourite colour: ultramarine blue.\n")
    assert wait_until(lambda: bool(mounted.search_json("ultramarine")["results"]), timeout=60)
    write(ws / "memory" / "2026-11-05.md", "- Planted garlic beside the mount.\n")
    assert wait_until(lambda: (mnt / "memory" / "2026-11-05.md").exists())
    assert wait_until(lambda: bool(mounted.search_json("garlic")["results"]), timeout=60)
    (ws / "memory" / "2026-11-05.md").unlink()
    assert wait_until(lambda: not (mnt / "memory" / "2026-11-05.md").exists())
    assert wait_until(lambda: not mounted.search_json("garlic")["results"], timeout=60)


def test_names_that_are_not_utf8_do_not_stop_the_mount(mounted) -> None:
    """watchfiles gives up on such a name; the mount must go on watching (a newcomer walk saw
    `touch memory/bad-\\xff\\xfe.md` end the whole mount)."""
    mnt, ws = mounted.mnt, mounted.workspace
    os.makedirs(mnt / "memory", exist_ok=True)
    bad = os.fsencode(mnt / "memory") + b"/bad-\xff\xfe.md"
    with open(bad, "wb") as f:
        f.write(b"- nothing to see\n")
    os.symlink("/etc/hostname", mnt / "memory" / "link.md")
    with open(os.fsencode(ws / "memory") + b"/beside-\xe9.md", "wb") as f:
        f.write(b"- written beside\n")
    time.sleep(1)
    assert os.path.ismount(mnt) and "link.md" in os.listdir(mnt / "memory")
    write(ws / "memory" / "2026-11-06.md", "- Repotted the fig tree beside the mount.\n")
    assert wait_until(lambda: bool(mounted.search_json("fig tree repotted")["results"]), timeout=60)
    (mnt / "memory" / "2026-11-07.md").write_text("- Oiled the bicycle chain through the mount.\n")
    assert mounted.search_json("bicycle chain")["results"]


def test_a_name_that_is_not_utf8_is_renamed_and_removed_like_any_other(mounted) -> None:
    """`mv` of such a memory file said EIO though it had moved (the index could not take the
    name), so the kernel kept the old name on the file, and a write to it overwrote the file at
    the new name (found by a newcomer walk); `rm` said EIO though the file was gone."""
    mnt, ws = mounted.mnt, mounted.workspace
    memory_dir = os.fsencode(mnt / "memory")
    old, new = memory_dir + b"/y\xfe.md", memory_dir + b"/target.md"
    with open(old, "wb") as f:
        f.write(b"ORIGINAL\n")
    os.rename(old, new)
    assert not os.path.lexists(old) and open(new, "rb").read() == b"ORIGINAL\n"
    assert [r["path"] for r in mounted.search_json("ORIGINAL")["results"]] == ["memory/target.md"]
    with open(old, "wb") as f:  # the old name is a new file now
        f.write(b"SECOND\n")
    assert open(new, "rb").read() == b"ORIGINAL\n"
    assert (ws / "memory" / "target.md").read_bytes() == b"ORIGINAL\n"
    os.rename(new, memory_dir + b"/z\xff.md")  # and to such a name: no longer indexed
    assert not mounted.search_json("ORIGINAL")["results"]
    os.unlink(old)
    os.unlink(memory_dir + b"/z\xff.md")
    assert not [n for n in os.listdir(memory_dir) if b"\xfe" in n or b"\xff" in n]
    (mnt / "memory" / "2026-11-08.md").write_text("- Tuned the ukulele.\n")
    assert mounted.search_json("ukulele")["results"]


def test_unlink_and_rename_move_the_index(mounted) -> None:
    mnt = mounted.mnt
    memory = mounted.memory()
    try:
        (mnt / "memory" / "2026-11-02.md").write_text("- Capybara sighting at the lake.\n")
        assert memory.search("capybara", wait_ms=0).results[0].path == "memory/2026-11-02.md"
        os.rename(mnt / "memory" / "2026-11-02.md", mnt / "memory" / "2026-11-03.md")
        assert memory.search("capybara", wait_ms=0).results[0].path == "memory/2026-11-03.md"
        os.rename(mnt / "memory" / "2026-11-03.md", mnt / "archived-note.md")  # no longer memory
        assert not memory.search("capybara", wait_ms=0).results
        os.rename(mnt / "archived-note.md", mnt / "memory" / "2026-11-04.md")  # back into memory
        assert memory.search("capybara", wait_ms=0).results[0].path == "memory/2026-11-04.md"
        os.rename(mnt / "memory", mnt / "memory-old")  # a whole directory moves out
        assert not memory.search("capybara", wait_ms=0).results
        os.rename(mnt / "memory-old", mnt / "memory")
        assert memory.search("capybara", wait_ms=0).results
        os.unlink(mnt / "memory" / "2026-11-04.md")
        assert not memory.search("capybara", wait_ms=0).results
        (mnt / "notes.txt").write_text("capybara in a plain file is not memory\n")
        assert not memory.search("capybara", wait_ms=0).results
    finally:
        memory.close()


SET_USER = """
import os, sys
os.setgid(65534); os.setuid(65534)
os.umask(0o027)
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o666); os.close(fd)
os.mkdir(sys.argv[2], 0o777)
"""


@pytest.fixture
def world_dir():
    """A directory other users can traverse (pytest's tmp dirs are private to root); requested
    before mount_factory so it is removed after the mount is gone."""
    base = Path(tempfile.mkdtemp(prefix="memfs-perm-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_create_gives_callers_uid_gid_and_mode(world_dir: Path, workspace: Path, mount_factory) -> None:
    m = mount_factory(workspace, "main", "--allow-other", mnt=world_dir / "mnt")  # other users reach it
    os.chmod(workspace, 0o777)
    f, d = m.mnt / "by-nobody.txt", m.mnt / "dir-by-nobody"
    out = subprocess.run([sys.executable, "-c", SET_USER, str(f), str(d)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    st = (workspace / "by-nobody.txt").stat()
    assert (st.st_uid, st.st_gid, st.st_mode & 0o777) == (65534, 65534, 0o640)
    st = (workspace / "dir-by-nobody").stat()
    assert (st.st_uid, st.st_mode & 0o777) == (65534, 0o750)
    # The kernel enforces permissions for everyone else (default_permissions).
    os.chmod(workspace / "by-nobody.txt", 0o600)
    denied = subprocess.run([sys.executable, "-c", "import os,sys; os.setuid(65533); open(sys.argv[1]).read()",
                             str(f)], capture_output=True, text=True)
    assert "Permission denied" in denied.stderr
