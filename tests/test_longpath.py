"""memfs.longpath: reaching files whose absolute path is longer than PATH_MAX through folder
descriptors, and the workspace walk and path checks built on it (real files, no mount)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from conftest import write_deep

from memfs import longpath
from memfs.config import load_config
from memfs.workspace import OutsideWorkspace, iter_memory_files, relative

FOLDERS = [f"{i:03d}" + "d" * 252 for i in range(16)]  # 16 x 256 bytes: past PATH_MAX from anywhere


def test_reach_names_a_long_path_the_kernel_refuses(tmp_path: Path) -> None:
    full = write_deep(tmp_path, FOLDERS, "note.md", b"deep text\n")
    assert not longpath.fits(full)
    with pytest.raises(OSError) as refused:
        os.stat(full)
    assert refused.value.errno == errno.ENAMETOOLONG
    with longpath.reach(full) as short:
        assert longpath.fits(short) and short.startswith("/proc/self/fd/")
        with open(short, "rb") as handle:
            assert handle.read() == b"deep text\n"
    assert longpath.is_file(full) and longpath.exists(full) and longpath.lexists(full)
    assert not longpath.exists(str(full) + "x") and not longpath.is_file(full.parent)
    assert longpath.lstat(full).st_size == 10
    with longpath.reach(tmp_path / "short.md") as short:
        assert short == str(tmp_path / "short.md")  # a short path is used as it is


def test_reach_closes_the_folder_it_opened(tmp_path: Path) -> None:
    full = write_deep(tmp_path, FOLDERS, "note.md", b"x")
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(50):
        longpath.lstat(full)
    assert len(os.listdir("/proc/self/fd")) == before


def test_open_nofollow_refuses_a_symlink_anywhere_on_the_way(tmp_path: Path) -> None:
    full = write_deep(tmp_path / "ws", FOLDERS, "note.md", b"mine\n")
    write_deep(tmp_path / "elsewhere", FOLDERS[8:], "note.md", b"someone else's\n")
    rel = "/".join([*FOLDERS, "note.md"])
    fd = longpath.open_nofollow(tmp_path / "ws", rel, os.O_RDONLY)
    assert os.read(fd, 100) == b"mine\n"
    os.close(fd)
    # A folder deep down swapped for a symlink to another tree: the walk does not follow it,
    # where the kernel (and reach) would.
    parent = os.open(tmp_path / "ws", os.O_PATH | os.O_DIRECTORY)
    for folder in FOLDERS[:7]:
        inner = os.open(folder, os.O_PATH | os.O_DIRECTORY, dir_fd=parent)
        os.close(parent)
        parent = inner
    os.rename(FOLDERS[7], "moved", src_dir_fd=parent, dst_dir_fd=parent)
    os.symlink(str(tmp_path / "elsewhere"), FOLDERS[7], dir_fd=parent)
    os.close(parent)
    with longpath.reach(full) as short, open(short, "rb") as handle:
        assert handle.read() == b"someone else's\n"
    with pytest.raises(OSError) as refused:
        longpath.open_nofollow(tmp_path / "ws", rel, os.O_RDONLY)
    assert refused.value.errno in (errno.ENOTDIR, errno.ELOOP)


def test_realpath_resolves_symlinks_past_path_max(tmp_path: Path) -> None:
    write_deep(tmp_path, FOLDERS, "note.md", b"x")
    deep = tmp_path.joinpath(*FOLDERS)
    with longpath.reach(deep / "out") as short:
        os.symlink("/usr", short)
    assert os.path.realpath(deep / "out" / "lib") == str(deep / "out" / "lib")  # what os.path cannot see
    assert longpath.realpath(deep / "out" / "lib") == os.path.realpath("/usr/lib")
    assert longpath.realpath(deep / "note.md") == str(deep / "note.md")
    assert longpath.realpath(deep / "missing" / "x.md") == str(deep / "missing" / "x.md")


def test_the_workspace_walk_and_path_check_reach_past_path_max(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    (ws / "memory").mkdir(parents=True)
    (ws / "memory" / "2026-11-20.md").write_text("short\n")
    write_deep(ws / "memory", FOLDERS, "2026-11-21.md", b"deep\n")
    cfg = load_config(workspace=ws, env={}, overrides=[("state_dir", str(tmp_path / "state"))])
    deep_rel = "/".join(["memory", *FOLDERS, "2026-11-21.md"])
    assert iter_memory_files(cfg) == sorted(["memory/2026-11-20.md", deep_rel])
    assert sorted(longpath.files_below(ws / "memory")) == sorted(["2026-11-20.md", deep_rel.removeprefix("memory/")])
    assert relative(ws, deep_rel) == deep_rel
    # A symlink deep down that leads out of the workspace is seen as one.
    with longpath.reach(ws.joinpath("memory", *FOLDERS, "escape")) as short:
        os.symlink("/etc", short)
    with pytest.raises(OutsideWorkspace):
        relative(ws, "/".join(["memory", *FOLDERS, "escape", "passwd"]))
