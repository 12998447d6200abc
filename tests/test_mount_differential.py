"""Differential conformance: long random sequences of file operations applied both to the mount
and to a plain directory must give the same results, the same errnos and the same final tree.

The operations work inside ``memory/`` so Markdown names are memory files and the indexing hooks
run on every change, not only the passthrough.
"""

from __future__ import annotations

import ctypes
import errno
import itertools
import os
import shutil
import stat
import subprocess
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.fuse

NAMES = ["a.md", "b.md", "c.txt", "d", "d/e.md", "d/f", "g/h.md"]
libc = ctypes.CDLL(None, use_errno=True)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def renameat2(src: str, dst: str, flags: int) -> None:
    if libc.renameat2(-100, os.fsencode(src), -100, os.fsencode(dst), ctypes.c_uint(flags)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


name = st.sampled_from(NAMES)
data = st.binary(min_size=0, max_size=300)
mode = st.sampled_from([0o600, 0o644, 0o755, 0o400, 0o700])
operation = st.one_of(
    st.tuples(st.just("create"), name, mode),
    st.tuples(st.just("write"), name, st.integers(0, 600), data),
    st.tuples(st.just("append"), name, data),
    st.tuples(st.just("truncate"), name, st.integers(0, 500)),
    st.tuples(st.just("rename"), name, name, st.sampled_from([0, RENAME_NOREPLACE, RENAME_EXCHANGE])),
    st.tuples(st.just("link"), name, name),
    st.tuples(st.just("unlink"), name),
    st.tuples(st.just("mkdir"), name, st.sampled_from([0o755, 0o700])),
    st.tuples(st.just("rmdir"), name),
    st.tuples(st.just("chmod"), name, mode),
    st.tuples(st.just("symlink"), st.sampled_from(NAMES + ["../x", "/nonexistent"]), name),
    st.tuples(st.just("fsync"), name),
    st.tuples(st.just("read"), name),
    st.tuples(st.just("stat"), name),
    st.tuples(st.just("listdir"), st.sampled_from(["", "d", "g"])),
    st.tuples(st.just("touch-beside"), name),  # a change the mount learns of from its watcher
    st.tuples(st.just("forget"),),  # the kernel drops every cached name and inode it can
)
DESTRUCTIVE = {"unlink", "rmdir", "rename"}  # may end a file's life, and free its number


def apply(root: Path, op: tuple) -> tuple:
    kind, *args = op
    p = lambda n: str(root / n)  # noqa: E731
    try:
        if kind == "create":
            os.close(os.open(p(args[0]), os.O_CREAT | os.O_EXCL | os.O_WRONLY, args[1]))
            return ("ok",)
        if kind == "write":
            fd = os.open(p(args[0]), os.O_WRONLY)
            try:
                return ("ok", os.pwrite(fd, args[2], args[1]))
            finally:
                os.close(fd)
        if kind == "append":
            fd = os.open(p(args[0]), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                return ("ok", os.write(fd, args[1]))
            finally:
                os.close(fd)
        if kind == "truncate":
            os.truncate(p(args[0]), args[1])
        elif kind == "rename":
            renameat2(p(args[0]), p(args[1]), args[2])
        elif kind == "link":
            os.link(p(args[0]), p(args[1]), follow_symlinks=False)
        elif kind == "unlink":
            os.unlink(p(args[0]))
        elif kind == "mkdir":
            os.mkdir(p(args[0]), args[1])
        elif kind == "rmdir":
            os.rmdir(p(args[0]))
        elif kind == "chmod":
            os.chmod(p(args[0]), args[1], follow_symlinks=True)
        elif kind == "symlink":
            os.symlink(args[0], p(args[1]))
        elif kind == "fsync":
            fd = os.open(p(args[0]), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        elif kind == "read":
            with open(p(args[0]), "rb") as handle:
                return ("ok", handle.read())
        elif kind == "stat":
            s = os.lstat(p(args[0]))
            return ("ok", stat.S_IFMT(s.st_mode), stat.S_IMODE(s.st_mode), s.st_nlink,
                    s.st_size if not stat.S_ISDIR(s.st_mode) else None)
        elif kind == "listdir":
            return ("ok", sorted(os.listdir(p(args[0]) if args[0] else str(root))))
        elif kind == "touch-beside":
            os.utime(backing(root) / args[0], follow_symlinks=False)
            time.sleep(0.15)  # the watcher's debounce is 50 ms: let it act before the next step
        elif kind == "forget" and os.geteuid() == 0:
            Path("/proc/sys/vm/drop_caches").write_text("2")
        return ("ok",)
    except OSError as exc:
        return ("err", errno.errorcode.get(exc.errno, exc.errno))


BACKING: dict[Path, Path] = {}  # a case folder on the mount -> the same folder in the workspace


def backing(root: Path) -> Path:
    return BACKING.get(root, root)


class Identities:
    """Inode numbers as `stat` shows them on the mount, against the backing files': one number
    is only ever one backing file, and a file keeps its number while it lives (through the
    watcher's reports, chmod, mkdir beside it and the kernel forgetting it)."""

    def __init__(self) -> None:
        self.backing_of: dict[int, int] = {}
        self.number_of: dict[int, int] = {}

    def observe(self, fused: Path, under: Path, op: tuple) -> None:
        if op[0] in DESTRUCTIVE:
            self.number_of.clear()
        if op[0] != "stat":
            return
        try:
            number, real = os.lstat(fused / op[1]).st_ino, os.lstat(under / op[1]).st_ino
        except OSError:
            return
        assert self.backing_of.setdefault(number, real) == real, f"{op}: number {number} is two files"
        assert self.number_of.setdefault(real, number) == number, f"{op}: {op[1]} changed number"


def tree(root: Path) -> dict[str, tuple]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for entry in sorted(dirnames + filenames):
            full = Path(dirpath) / entry
            s = os.lstat(full)
            rel = str(full.relative_to(root))
            if stat.S_ISLNK(s.st_mode):
                out[rel] = ("link", os.readlink(full))
            elif stat.S_ISDIR(s.st_mode):
                out[rel] = ("dir", stat.S_IMODE(s.st_mode))
            else:
                try:
                    content = full.read_bytes()
                except PermissionError:
                    content = b"<unreadable>"
                out[rel] = ("file", stat.S_IMODE(s.st_mode), s.st_nlink, content)
    return out


@pytest.fixture(scope="module")
def diff_mount(tmp_path_factory):
    from mounts import mount, unmount

    base = tmp_path_factory.mktemp("diff")
    ws = base / "ws"
    (ws / "memory").mkdir(parents=True)
    m = mount(ws, base / "mnt", base / "state", "main", "--set", "embedding.provider=none")
    yield m, base / "native"
    unmount(m)


counter = itertools.count()


@settings(max_examples=int(os.environ.get("MEMFS_DIFF_EXAMPLES", "60")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(ops=st.lists(operation, min_size=10, max_size=80))
@example(ops=[("create", "a.md", 0o644), ("mkdir", "d", 0o755), ("symlink", "a.md", "c.txt"),  # the echoes
              ("stat", "a.md"), ("stat", "d"), ("stat", "c.txt"), ("chmod", "d", 0o700), ("forget",),
              ("stat", "d"), ("touch-beside", "a.md"), ("touch-beside", "d"), ("stat", "a.md"), ("stat", "d"),
              ("stat", "c.txt"), ("forget",), ("stat", "a.md"), ("stat", "d"), ("stat", "c.txt")])
def test_mount_behaves_like_a_plain_directory(diff_mount, ops) -> None:
    m, native_base = diff_mount
    case = f"case-{next(counter)}"
    fused = m.mnt / "memory" / case
    native = native_base / case
    fused.mkdir()
    native.mkdir(parents=True)
    BACKING[fused] = m.workspace / "memory" / case
    identities = Identities()
    try:
        for op in ops:
            expected = apply(native, op)
            got = apply(fused, op)
            assert got == expected, f"{op}: mount gave {got}, plain directory gave {expected}"
            identities.observe(fused, BACKING[fused], op)
        assert tree(fused) == tree(native)
    finally:
        for root in (fused, native):
            for dirpath, dirnames, _ in os.walk(root):
                for d in dirnames:
                    os.chmod(Path(dirpath) / d, 0o755)
        shutil.rmtree(fused, ignore_errors=True)
        shutil.rmtree(native, ignore_errors=True)


def long_names() -> tuple[list[str], str]:
    """Folders of NAME_MAX-ish names and a last name that make a relative path of exactly
    PATH_MAX - 1 (4,095) bytes: longer than the workspace path plus it, for the daemon."""
    folders = [f"{i:03d}" + "d" * 252 for i in range(15)]  # 15 x 256 bytes with their slashes
    last = "f" * (4095 - 256 * len(folders))
    assert len("/".join([*folders, last])) == 4095
    return folders, last


def test_paths_up_to_path_max_behave_like_a_plain_directory(diff_mount) -> None:
    m, native_base = diff_mount
    folders, last = long_names()
    deep = "/".join(folders)
    ops: list[tuple] = [("mkdir", "/".join(folders[: i + 1]), 0o755) for i in range(len(folders))]
    target, other = f"{deep}/{last}", f"{deep}/{last[:-1]}g"
    ops += [("create", target, 0o644), ("write", target, 0, b"deep"), ("stat", target), ("read", target),
            ("chmod", target, 0o600), ("truncate", target, 2), ("stat", target), ("rename", target, other, 0),
            ("link", other, target), ("stat", other), ("unlink", other), ("append", target, b"+"),
            ("read", target), ("unlink", target), ("symlink", "somewhere", target), ("stat", target),
            ("unlink", target), ("mkdir", target, 0o700), ("stat", target), ("rmdir", target),
            ("create", target + "x", 0o644),  # one byte too long: ENAMETOOLONG for both
            ("create", target, 0o644), ("listdir", deep)]  # a folder whose children's full paths pass PATH_MAX
    results = {}
    here = os.getcwd()
    for label, root in (("native", native_base / "long"), ("mount", m.mnt / "memory" / "long")):
        root.mkdir(parents=True)
        os.chdir(root)  # the paths are relative, as pjdfstest gives them: absolute ones would not fit
        try:
            results[label] = [apply(Path(""), op) for op in ops]
        finally:
            os.chdir(here)
    for op, expected, got in zip(ops, results["native"], results["mount"]):
        assert got == expected, f"{op[0]} {op[1][-20:]}: mount gave {got}, plain directory gave {expected}"
    assert results["mount"][-3] == ("err", "ENAMETOOLONG") and results["mount"][-1] == ("ok", [last])
    subprocess.run(["rm", "-rf", "long"], cwd=m.mnt / "memory", check=True)
    subprocess.run(["rm", "-rf", "long"], cwd=native_base, check=True)
