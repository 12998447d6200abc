"""The kernel's caches in front of the daemon: what they answer without a request, and that what
they answer stays true when files change through the mount and beside it.

The daemon counts the requests it gets in ``.memfs/requests``; a test reads it before and after
a workload and compares the kinds it is about."""

from __future__ import annotations

import os
import subprocess
import time
from collections import Counter
from pathlib import Path

import pytest


def requests(mnt: Path) -> Counter[str]:
    counts: Counter[str] = Counter()
    for line in (mnt / ".memfs" / "requests").read_text().splitlines():
        if line and not line.startswith("#"):
            name, _, count = line.partition(" ")
            counts[name] = int(count)
    return counts


def cost(mnt: Path, work) -> Counter[str]:
    """The requests ``work`` sent, less those reading .memfs/requests adds (measured the same way)."""
    before = requests(mnt)
    overhead = requests(mnt) - before
    before = requests(mnt)
    work()
    after = requests(mnt)
    spent = after - before
    spent.subtract(overhead)
    return +spent


def wait_for(check, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return False


@pytest.fixture
def long_cached(workspace: Path, mount_factory):
    """A mount whose names and attributes the kernel may keep for an hour: anything it shows
    fresh before that was invalidated, not timed out."""
    return mount_factory(workspace, "main", "--set", "mount.entry_timeout_s=3600", "--set",
                         "mount.attr_timeout_s=3600")


def test_a_missing_name_is_asked_once(long_cached) -> None:
    mnt = long_cached.mnt
    missing = mnt / "memory" / "no-such-note.md"
    assert (mnt / "memory").is_dir()

    def look_three_times() -> None:
        for _ in range(3):
            assert not missing.exists()

    assert cost(mnt, look_three_times)["lookup"] == 1


def test_a_name_made_beside_the_mount_appears_despite_the_cached_miss(long_cached) -> None:
    mnt, ws = long_cached.mnt, long_cached.workspace
    assert not (mnt / "later.txt").exists()  # the kernel now remembers "no such file"
    assert not (mnt / "memory" / "2026-11-20.md").exists()
    (ws / "later.txt").write_text("made beside\n")
    (ws / "memory" / "2026-11-20.md").write_text("# A day\nmade beside the mount\n")
    assert wait_for(lambda: (mnt / "later.txt").exists()), "the watcher did not drop the cached miss"
    assert (mnt / "later.txt").read_text() == "made beside\n"
    assert wait_for(lambda: (mnt / "memory" / "2026-11-20.md").exists())
    assert (mnt / "memory" / "2026-11-20.md").read_text() == "# A day\nmade beside the mount\n"


def test_a_name_made_through_the_mount_replaces_the_cached_miss(long_cached) -> None:
    mnt = long_cached.mnt
    target = mnt / "memory" / "2026-11-21.md"
    assert not target.exists()
    target.write_text("# Day\nwritten through the mount\n")
    assert target.exists() and target.read_text() == "# Day\nwritten through the mount\n"
    os.mkdir(mnt / "newdir")
    assert (mnt / "newdir").is_dir()
    os.symlink("later", mnt / "link")
    assert os.readlink(mnt / "link") == "later"


def test_ls_lR_asks_once_per_folder_not_per_file(long_cached) -> None:
    mnt, ws = long_cached.mnt, long_cached.workspace
    for folder in ("a", "b"):
        (ws / "tree" / folder).mkdir(parents=True)
        for i in range(50):
            (ws / "tree" / folder / f"f{i}.txt").write_text("x" * i)
    spent = cost(mnt, lambda: subprocess.run(["ls", "-lR", str(mnt / "tree")], check=True, capture_output=True))
    # The listing itself brings every entry's attributes (readdirplus): no lookup or getattr per file.
    assert spent["opendir"] == 3
    assert spent["lookup"] + spent["getattr"] <= 3, spent
    listing = subprocess.run(["ls", "-lR", str(mnt / "tree")], check=True, capture_output=True, text=True).stdout
    assert " f49.txt" in listing


def test_stat_after_ls_matches_a_change_made_beside_the_mount(long_cached) -> None:
    mnt, ws = long_cached.mnt, long_cached.workspace
    (ws / "notes.txt").write_text("short\n")
    subprocess.run(["ls", "-l", str(mnt)], check=True, capture_output=True)
    (ws / "notes.txt").write_text("a longer line written beside the mount\n")
    want = len("a longer line written beside the mount\n")
    assert wait_for(lambda: os.stat(mnt / "notes.txt").st_size == want), "size kept from the listing"
    assert (mnt / "notes.txt").read_bytes() == b"a longer line written beside the mount\n"


def test_unchanged_files_are_read_from_the_page_cache(long_cached) -> None:
    mnt, ws = long_cached.mnt, long_cached.workspace
    (mnt / "big.txt").write_bytes(b"0123456789" * 100_000)  # through the mount: no watcher event to come
    assert (mnt / "big.txt").read_bytes()[:10] == b"0123456789"
    spent = cost(mnt, lambda: [(mnt / "big.txt").read_bytes() for _ in range(3)])
    assert spent["read"] == 0 and spent["open"] == 3, spent
    (ws / "big.txt").write_bytes(b"abcdefghij" * 100_000)  # changed beside: the pages go
    assert wait_for(lambda: (mnt / "big.txt").read_bytes()[:10] == b"abcdefghij")


def test_requests_already_waiting_skip_the_scheduler(mounted) -> None:
    mnt = mounted.mnt
    (mnt / "work").mkdir()
    for i in range(300):
        with open(mnt / "work" / f"{i}.txt", "w") as handle:
            handle.write("x")
    line = next(line for line in (mnt / ".memfs" / "requests").read_text().splitlines() if "picked up at once" in line)
    taken_at_once = int(line.split("picked up at once ")[1].split(",")[0])
    assert "after a wait through the event loop" in line
    assert taken_at_once > 0, line


def test_a_file_changed_beside_an_unwatched_mount_is_read_fresh_at_the_next_open(workspace, mount_factory) -> None:
    """Without the watcher (or before it reports), the open itself sees that the file is not what
    the kernel's pages were read from: it drops them and the size the kernel holds."""
    m = mount_factory(workspace, "main", "--set", "mount.watch=false", "--set", "mount.attr_timeout_s=3600",
                      "--set", "mount.entry_timeout_s=3600")
    ws, mnt = m.workspace, m.mnt
    (mnt / "plain.txt").write_text("first version\n")
    assert (mnt / "plain.txt").read_text() == "first version\n"
    assert (mnt / "plain.txt").read_text() == "first version\n"  # now from the page cache
    (ws / "plain.txt").write_text("other version\n")  # same size, new bytes, new mtime
    os.utime(ws / "plain.txt", ns=(time.time_ns(), time.time_ns() + 5_000_000_000))
    assert (mnt / "plain.txt").read_text() == "other version\n"
    (ws / "plain.txt").write_text("a longer third version\n")
    assert (mnt / "plain.txt").read_text() == "a longer third version\n"
    assert os.stat(mnt / "plain.txt").st_size == len("a longer third version\n")
    unchanged = cost(mnt, lambda: (mnt / "plain.txt").read_text())
    assert unchanged["read"] == 0, unchanged
