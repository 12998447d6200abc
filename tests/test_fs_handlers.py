"""The daemon's request plumbing without a mount: handler guarding and the busy poller."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any

import pyfuse3
import pytest
import trio

from memfs.fs import busypoll
from memfs.fs import writes as writes_module
from memfs.fs.busypoll import BusyPoll
from memfs.fs.inodes import InodeTable
from memfs.fs.passthrough import Passthrough
from memfs.fs.writes import OWN_WRITE_MEMORY_S, MemoryWrites


class Layered(Passthrough):
    """A subclass overriding handlers the way MemfsOperations does."""

    async def getattr(self, inode: int, ctx: Any = None) -> pyfuse3.EntryAttributes:
        return await super().getattr(inode, ctx)

    async def statfs(self, ctx: Any) -> pyfuse3.StatvfsData:
        raise RuntimeError("a bug in a handler")

    async def readlink(self, inode: int, ctx: Any) -> bytes:
        raise OSError(errno.ENOSPC, "no space")


def ops_for(tmp_path: Path) -> tuple[Layered, list[int]]:
    ops = Layered(tmp_path, writes=None)  # type: ignore[arg-type]  # no memory files touched here
    calls: list[int] = []
    ops.on_request = lambda: calls.append(1)
    return ops, calls


def fuse_errno(coroutine: Any) -> int:
    async def run() -> int:
        with pytest.raises(pyfuse3.FUSEError) as caught:
            await coroutine
        return caught.value.errno

    return trio.run(run)


def test_each_request_is_guarded_once_even_through_super(tmp_path: Path) -> None:
    ops, calls = ops_for(tmp_path)
    attrs = trio.run(ops.getattr, pyfuse3.ROOT_INODE)
    assert attrs.st_ino == pyfuse3.ROOT_INODE
    assert len(calls) == 1  # one request, one touch of the poller, however many layers


def test_errors_become_errnos_and_never_escape(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    ops, _ = ops_for(tmp_path)
    assert fuse_errno(ops.readlink(pyfuse3.ROOT_INODE, None)) == errno.ENOSPC
    assert fuse_errno(ops.getattr(424242)) == errno.ENOENT  # an inode we never handed out
    missing = trio.run(ops.lookup, pyfuse3.ROOT_INODE, b"missing", None)
    assert missing.st_ino == 0 and missing.entry_timeout > 0  # "no such file", for the kernel to remember
    assert fuse_errno(ops.statfs(None)) == errno.EIO
    assert "unexpected error in statfs" in caplog.text


def test_busy_poll_keeps_polling_through_its_window_then_parks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(busypoll, "runnable_tasks", lambda: 1)  # a quiet machine, whatever this one is doing

    async def main() -> None:
        poll = BusyPoll(window_us=300_000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll.run)
            await trio.sleep(0.02)
            assert poll.parked  # no request yet: the loop sleeps
            poll.touch()
            assert not poll.parked
            await trio.sleep(0.02)
            assert not poll.parked  # inside the window
            await trio.sleep(0.6)
            assert poll.parked  # no request for longer than the window
            poll.touch()
            await trio.sleep(0.01)
            assert not poll.parked  # the next request wakes it again
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_busy_poll_steps_aside_while_the_cores_are_busy(monkeypatch: pytest.MonkeyPatch) -> None:
    assert busypoll.runnable_tasks() >= 1  # the real count: at least this test is running
    runnable = [busypoll.CORES + 2]
    monkeypatch.setattr(busypoll, "runnable_tasks", lambda: runnable[0])

    async def main() -> None:
        poll = BusyPoll(window_us=300_000)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll.run)
            poll.touch()
            await trio.sleep(0.01)
            assert poll.parked  # more tasks than cores: polling would take one from them
            runnable[0] = 1
            await trio.sleep(busypoll.CROWD_CHECK_S)
            poll.touch()
            await trio.sleep(0.01)
            assert not poll.parked  # quiet again: it polls
            runnable[0] = busypoll.CORES + 2
            await trio.sleep(busypoll.CROWD_CHECK_S + 0.05)
            assert poll.parked  # and stops mid-window when the machine gets busy
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_busy_poll_off_never_polls() -> None:
    async def main() -> None:
        poll = BusyPoll(window_us=0)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll.run)
            poll.touch()
            await trio.sleep(0.01)
            assert poll.parked
            nursery.cancel_scope.cancel()

    trio.run(main)


def test_own_write_records_are_forgotten_after_a_while(workspace: Path, make_memory: Any,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    writes = MemoryWrites(make_memory(workspace, embedding__provider="none"))
    clock = [1000.0]
    monkeypatch.setattr(writes_module.time, "monotonic", lambda: clock[0])
    for i in range(50):
        (workspace / f"f{i}.txt").write_text("x")
        writes.note_own(f"f{i}.txt")
    first = os.stat(workspace / "f0.txt")
    assert writes.is_own("f0.txt", first)
    (workspace / "f0.txt").write_text("changed beside the mount")
    assert not writes.is_own("f0.txt", os.stat(workspace / "f0.txt"))
    clock[0] += OWN_WRITE_MEMORY_S + 1
    (workspace / "g.txt").write_text("y")
    writes.note_own("g.txt")
    assert list(writes.own) == ["g.txt"]  # the old records went with the next write
    assert not writes.is_own("f1.txt", os.stat(workspace / "f1.txt"))


def test_an_inode_without_a_name_is_enoent_not_eio(tmp_path: Path) -> None:
    table = InodeTable((1, 1))
    inode = table.remember("a.txt", (1, 2))  # the kernel holds a lookup on it
    table.unlinked("a.txt")
    with pytest.raises(KeyError):  # guarded handlers turn KeyError into ENOENT
        table.path(inode)
    (tmp_path / "gone.txt").write_text("x")
    ops, _ = ops_for(tmp_path)
    entry = trio.run(ops.lookup, pyfuse3.ROOT_INODE, b"gone.txt", None)
    ops.inodes.unlinked("gone.txt")
    assert fuse_errno(ops.getattr(entry.st_ino)) == errno.ENOENT


def test_a_forgotten_file_gets_its_number_back_but_a_held_number_is_never_shared() -> None:
    table = InodeTable((1, 1))
    a = table.remember("a.md", (1, 10))
    b = table.remember("b.md", (1, 11))
    table.forget(a, 1)  # the kernel dropped it (memory pressure, an invalidation)
    assert table.remember("a.md", (1, 10)) == a
    table.unlinked("b.md")
    table.opened(b)  # still open, and the kernel still knows it
    assert table.remember("c.md", (1, 11)) not in (a, b)  # the backing number reused by a new file
    fresh = InodeTable((1, 1))
    numbers = [fresh.remember(f"f{i}", (1, 100 + i)) for i in range(5)]
    for n in numbers:
        fresh.forget(n, 1)
    assert [fresh.remember(f"g{i}", (1, 100 + i)) for i in reversed(range(5))] == list(reversed(numbers))


def test_removals_through_the_mount_are_recognised_as_our_own(workspace: Path, make_memory: Any) -> None:
    writes = MemoryWrites(make_memory(workspace, embedding__provider="none"))
    (workspace / "t.txt").write_text("x")
    trio.run(writes.removed, "t.txt")
    assert writes.is_own("t.txt", None)  # the watcher's "t.txt is gone" is our echo
    assert not writes.is_own("other.txt", None)  # a removal made beside the mount is not
    (workspace / "t.txt").write_text("made again beside the mount")
    assert not writes.is_own("t.txt", os.stat(workspace / "t.txt"))
