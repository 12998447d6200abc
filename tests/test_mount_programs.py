"""Ordinary programs on a real mount: what they do must match what they do on a plain directory,
and memory files written by them must be searchable as soon as they finish."""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.fuse


def sh(cmd: str, cwd: Path, **kwargs) -> subprocess.CompletedProcess:
    out = subprocess.run(cmd, shell=True, cwd=cwd, capture_output=True, text=True, timeout=120, **kwargs)
    assert out.returncode == 0, f"{cmd}: {out.stderr}"
    return out


def test_shell_tools(mounted) -> None:
    mnt, ws = mounted.mnt, mounted.workspace
    sh("echo 'first line' > notes.txt && echo 'second line' >> notes.txt", mnt)
    assert (ws / "notes.txt").read_text() == "first line\nsecond line\n"
    assert sh("cat notes.txt", mnt).stdout == "first line\nsecond line\n"
    assert "notes.txt:second line" in sh("grep -r 'second' .", mnt).stdout
    sh("mkdir -p tree/a/b && echo x > tree/a/b/f && ln -s a/b/f tree/link && chmod 640 tree/a/b/f", mnt)
    sh("cp -a tree tree2", mnt)
    assert os.readlink(ws / "tree2" / "link") == "a/b/f"
    assert oct((ws / "tree2" / "a" / "b" / "f").stat().st_mode & 0o777) == "0o640"
    sh("mv tree2 tree3 && rm -r tree3", mnt)
    assert not (ws / "tree3").exists() and not (ws / "tree2").exists()
    sh("tar cf /tmp/memfs-test-$$.tar tree && mkdir untar && tar xf /tmp/memfs-test-$$.tar -C untar && rm /tmp/memfs-test-$$.tar", mnt)
    assert (ws / "untar" / "tree" / "a" / "b" / "f").read_text() == "x\n"
    sh("rsync -a tree/ synced/", mnt)
    assert (ws / "synced" / "a" / "b" / "f").read_text() == "x\n"
    assert sh("ls -l notes.txt", mnt).stdout.split()[4] == str(len("first line\nsecond line\n"))


def test_sed_in_place_reindexes(mounted) -> None:
    mnt = mounted.mnt
    (mnt / "memory").mkdir(exist_ok=True)
    sh("printf '# 2026-11-22\\n\\n## 09:00 - Stack\\nWe picked the Flask framework.\\n' > memory/2026-11-22.md", mnt)
    assert mounted.search_json("Flask framework")["results"]
    sh("sed -i 's/Flask/Django/' memory/2026-11-22.md", mnt)
    results = mounted.search_json("which web framework did we pick")["results"]
    assert "Django" in results[0]["snippet"] and not any("Flask" in r["snippet"] for r in results)


def test_vim_save_and_python_atomic_write(mounted) -> None:
    mnt, ws = mounted.mnt, mounted.workspace
    (mnt / "MEMORY.md").write_text("# Memory\n\n- Deploys happen on Tuesday.\n")
    vim = shutil.which("vim") or shutil.which("vim.tiny")
    assert vim, "vim is installed by scripts/setup.sh"
    sh(f"{vim} -u NONE -N -es -c 'set swapfile backup writebackup backupcopy=no' "
       "-c '%s/Tuesday/Thursday/' -c 'wq' MEMORY.md", mnt, env={**os.environ, "HOME": str(mnt)})
    assert "Thursday" in (ws / "MEMORY.md").read_text()
    assert not list(ws.glob(".MEMORY.md.sw*"))
    results = mounted.search_json("when do deploys happen")["results"]
    assert results[0]["path"] == "MEMORY.md" and "Thursday" in results[0]["snippet"]

    target = mnt / "memory" / "2026-11-23.md"
    with tempfile.NamedTemporaryFile("w", dir=mnt / "memory", delete=False, suffix=".tmp") as tmp:
        tmp.write("# 2026-11-23\n\nThe office moved to Lisbon.\n")
        tmp.flush()
        os.fsync(tmp.fileno())
    os.replace(tmp.name, target)
    assert target.read_text().endswith("Lisbon.\n")
    found = mounted.search_json("office Lisbon")["results"]
    assert found and found[0]["path"] == "memory/2026-11-23.md"
    assert not any(r["path"].endswith(".tmp") for r in found)


def test_git_inside_the_mount(mounted) -> None:
    mnt = mounted.mnt
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@e", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@e", "HOME": str(mnt.parent)}
    sh("git init -q . && git add -A && git commit -qm init && echo change >> SOUL.md && git commit -qam two",
       mnt, env=env)
    assert sh("git log --oneline", mnt, env=env).stdout.count("\n") == 2
    assert sh("git status --porcelain", mnt, env=env).stdout == ""
    sh("git fsck --no-progress", mnt, env=env)


def test_tail_follows_appends(mounted) -> None:
    mnt = mounted.mnt
    log = mnt / "app.log"
    log.write_text("start\n")
    tail = subprocess.Popen(["tail", "-f", "-s", "0.1", str(log)], stdout=subprocess.PIPE)
    try:
        with open(log, "a") as handle:
            handle.write("appended\n")
        deadline = time.monotonic() + 20
        seen = b""
        os.set_blocking(tail.stdout.fileno(), False)
        while b"appended" not in seen and time.monotonic() < deadline:
            try:
                seen += os.read(tail.stdout.fileno(), 4096)
            except BlockingIOError:
                time.sleep(0.05)
        assert b"start\nappended\n" in seen
    finally:
        tail.kill()
        tail.wait()


def test_odd_opens_do_not_kill_the_daemon(mounted) -> None:
    mnt = mounted.mnt
    (mnt / "direct.bin").write_bytes(b"x" * 8192)
    fd = os.open(mnt / "direct.bin", os.O_RDONLY | os.O_DIRECT)
    try:
        os.pread(fd, 4096, 0)
    except OSError:
        pass  # an unaligned user buffer may be refused; the daemon must survive either way
    finally:
        os.close(fd)
    os.mkfifo(mnt / "fifo")
    assert (mnt / "fifo").is_fifo()
    for call in (lambda: os.getxattr(mnt / "direct.bin", "user.k"), lambda: os.setxattr(mnt / "direct.bin", "user.k", b"v"),
                 lambda: os.listxattr(mnt / "direct.bin")):
        with pytest.raises(OSError) as raised:
            call()
        assert raised.value.errno == errno.EOPNOTSUPP  # xattrs are off by default: cleanly unsupported
    assert (mnt / "direct.bin").stat().st_size == 8192  # still alive


def test_xattrs_pass_through_when_enabled(workspace, mount_factory) -> None:
    m = mount_factory(workspace, "main", "--set", "mount.xattrs=true")
    target = m.mnt / "tagged.txt"
    target.write_text("x")
    try:
        os.setxattr(target, "user.colour", b"blue")
    except OSError as exc:
        assert exc.errno == errno.EOPNOTSUPP  # the backing filesystem has no user xattrs
        pytest.skip("backing filesystem without user xattrs")
    assert os.getxattr(target, "user.colour") == b"blue"
    assert "user.colour" in os.listxattr(target)
    assert os.getxattr(m.workspace / "tagged.txt", "user.colour") == b"blue"
    os.removexattr(target, "user.colour")
    with pytest.raises(OSError) as raised:
        os.getxattr(target, "user.colour")
    assert raised.value.errno == errno.ENODATA


def test_tree_removed_and_made_again_keeps_every_name(mounted) -> None:
    """rm -r then recreate through the mount while the watcher is still reporting the removal:
    the late report must not take the new files' names away (it once made them EIO)."""
    base = mounted.mnt / "scratch"
    for round_ in range(6):
        if base.exists():
            shutil.rmtree(base)
        base.mkdir()
        paths = [base / f"f{i}.txt" for i in range(300)]
        for p in paths:
            p.write_bytes(b"x" * 64)
        time.sleep(0.07 * (round_ % 3))  # let the watcher's batches land at different points
        for p in paths:
            with open(p, "ab") as handle:
                handle.write(b"y\n")
            os.stat(p)
    assert all(p.read_bytes() == b"x" * 64 + b"y\n" for p in paths)
    log = next((mounted.state / "mounts").glob("*.log")).read_text()
    assert "unexpected error" not in log


def test_a_file_keeps_its_number_and_a_shell_its_folder(mounted) -> None:
    """Inode numbers live as long as the file: through the watcher's echo of mkdir, mkfifo,
    symlink, chmod and chown made through the mount, a touch beside it, and the kernel dropping
    its caches.  A shell standing in a new folder keeps a working getcwd()."""
    mnt, ws = mounted.mnt, mounted.workspace
    os.mkdir(mnt / "proj")
    os.mkfifo(mnt / "proj" / "pipe")
    os.symlink("pipe", mnt / "proj" / "link")
    (mnt / "proj" / "notes.txt").write_text("x\n")
    names = ["proj", "proj/pipe", "proj/link", "proj/notes.txt"]
    numbers = {n: os.lstat(mnt / n).st_ino for n in names}
    script = "cd proj && sleep 0.4 && /bin/pwd"  # /bin/pwd asks getcwd(), not $PWD
    shell = subprocess.run(["sh", "-c", script], cwd=mnt, capture_output=True, text=True, timeout=30)
    assert shell.returncode == 0 and shell.stdout.strip() == str(mnt / "proj"), shell.stderr
    os.chmod(mnt / "proj", 0o700)
    os.chown(mnt / "proj" / "notes.txt", os.getuid(), os.getgid())
    os.utime(ws / "proj" / "notes.txt")  # beside the mount
    time.sleep(0.4)  # the watcher has seen all of it
    assert {n: os.lstat(mnt / n).st_ino for n in names} == numbers
    if os.geteuid() == 0:
        Path("/proc/sys/vm/drop_caches").write_text("2")
        assert {n: os.lstat(mnt / n).st_ino for n in names} == numbers
    (ws / "proj" / "notes.txt").unlink()
    (ws / "proj" / "notes.txt").write_text("a new file under the old name\n")
    time.sleep(0.4)
    # (the backing file system may give the new file the old one's number, as it may natively)
    assert (mnt / "proj" / "notes.txt").read_text() == "a new file under the old name\n"
    assert os.lstat(mnt / "proj" / "notes.txt").st_size == len("a new file under the old name\n")
