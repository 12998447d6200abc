"""What is mounted where: the kernel's mount table and the records running mounts leave in the
state directory (``mounts/<key>.json``, beside their logs); and unmounting, which needs no more.

Light on purpose (standard library only): every CLI command asks it whether the workspace it was
given is really a memfs mount, without loading FUSE.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping

from memfs.mountinfo import FSNAME, memfs_mount_containing, mountinfo_rows, unescape  # noqa: F401 (FSNAME, memfs_mount_containing: imported from here)


class MountError(RuntimeError):
    """Why a mount cannot be made (or removed); the message says how to fix it."""


@dataclass(frozen=True)
class MountInfo:
    pid: int
    mountpoint: str
    workspace: str
    agent: str
    started: float
    mode: str = "main"
    config_file: str = ""  # what the mount was started with, so a command run inside it agrees
    overrides: tuple[str, ...] = ()


def mounts_dir(state_dir: Path) -> Path:
    return state_dir / "mounts"


def _key(mountpoint: Path) -> str:
    return hashlib.sha256(str(mountpoint).encode()).hexdigest()[:16]


def pid_file(state_dir: Path, mountpoint: Path) -> Path:
    return mounts_dir(state_dir) / f"{_key(mountpoint)}.json"


def log_file(state_dir: Path, mountpoint: Path) -> Path:
    return mounts_dir(state_dir) / f"{_key(mountpoint)}.log"


def leftover_file(state_dir: Path, mountpoint: Path) -> Path:
    """What a daemon that stopped left undone (passages still to embed), for ``memfs umount``."""
    return mounts_dir(state_dir) / f"{_key(mountpoint)}.left"


def read_record(state_dir: Path, mountpoint: Path) -> MountInfo | None:
    try:
        raw = json.loads(pid_file(state_dir, mountpoint).read_text())
        raw["overrides"] = tuple(raw.get("overrides", ()))
        return MountInfo(**raw)
    except (OSError, ValueError, TypeError):
        return None


def alive(pid: int) -> bool:
    """Whether the process runs (and is not a zombie)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat") as stat_file:
            return stat_file.read().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def live_record(state_dir: Path, mountpoint: Path) -> MountInfo | None:
    """The record of the mount at ``mountpoint`` if its daemon is alive and it is still mounted."""
    record = read_record(state_dir, mountpoint)
    if record is None or record.mountpoint != str(mountpoint) or not alive(record.pid) or not is_mounted(mountpoint):
        return None
    return record


class OtherMounts:
    """The other memfs daemons serving one workspace (known by their records in the state
    folder) and the files they hold open for writing.  A change the watcher sees in such a file
    is another mount's write in progress: that mount versions and indexes it when it closes, with
    the writer's name, so a watcher beside it must not record its half-written states."""

    REFRESH_S = 2.0  # mounts come and go rarely: re-read the records at most this often

    def __init__(self, state_dir: Path, workspace: Path) -> None:
        self.folder = mounts_dir(state_dir)
        self.workspace = os.path.realpath(workspace)
        self._pids: list[int] = []
        self._read_at = -self.REFRESH_S

    def pids(self) -> list[int]:
        now = time.monotonic()
        if now - self._read_at >= self.REFRESH_S:
            self._read_at = now
            found = []
            for record in self.folder.glob("*.json"):
                try:
                    info = json.loads(record.read_text())
                    pid, workspace = int(info["pid"]), str(info["workspace"])
                except (OSError, ValueError, KeyError, TypeError):
                    continue
                if pid != os.getpid() and os.path.realpath(workspace) == self.workspace and alive(pid):
                    found.append(pid)
            self._pids = found
        return self._pids

    def writing(self, path: Path) -> bool:
        """Whether one of them has ``path`` open for writing now."""
        target = str(path)
        for pid in self.pids():
            fds = f"/proc/{pid}/fd"
            try:
                numbers = os.listdir(fds)
            except OSError:
                continue
            for fd in numbers:
                try:
                    if os.readlink(f"{fds}/{fd}") != target:
                        continue
                    with open(f"/proc/{pid}/fdinfo/{fd}") as info:
                        flags = next(int(line.split()[1], 8) for line in info if line.startswith("flags:"))
                except (OSError, StopIteration, ValueError):
                    continue
                if flags & os.O_ACCMODE != os.O_RDONLY:
                    return True
        return False


def mount_device(mountpoint: Path) -> str | None:
    """The "major:minor" of the filesystem mounted at ``mountpoint``, read without touching it
    (a stat of our own mountpoint before the loop runs would wait for ourselves)."""
    target = str(mountpoint)
    device = None
    for fields in mountinfo_rows():
        if len(fields) > 4 and unescape(fields[4]) == target:
            device = fields[2]  # the last one listed is the one on top
    return device


def is_mounted(mountpoint: Path) -> bool:
    target = str(mountpoint)
    try:
        with open("/proc/self/mounts") as mounts:
            for line in mounts:
                fields = line.split()
                if len(fields) > 1 and unescape(fields[1]) == target:
                    return True
    except OSError:
        pass
    return False


def is_stale(mountpoint: Path) -> bool:
    """A FUSE mount whose daemon died: the kernel answers ENOTCONN.  statvfs always goes to the
    daemon (a stat may be answered from the kernel's attribute cache for a while after it died)."""
    try:
        os.statvfs(mountpoint)
    except OSError as exc:
        return exc.errno == errno.ENOTCONN
    return False


def force_unmount(mountpoint: Path) -> None:
    tool = shutil.which("fusermount3") or shutil.which("fusermount")
    if tool:
        subprocess.run([tool, "-u", "-z", str(mountpoint)], capture_output=True)
    if is_mounted(mountpoint) and os.geteuid() == 0:
        subprocess.run(["umount", "-l", str(mountpoint)], capture_output=True)


def users_of(mountpoint: Path, exclude: int | None = None) -> list[tuple[int, str, str]]:
    """(pid, program, path) of processes with a file, folder or current directory inside
    ``mountpoint``: unmounting under them would cut their writes off."""
    inside = str(mountpoint).rstrip("/") + "/"
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in (os.getpid(), exclude):
            continue
        links = [f"/proc/{entry}/cwd"]
        try:
            links += [f"/proc/{entry}/fd/{fd}" for fd in os.listdir(f"/proc/{entry}/fd")]
        except OSError:
            continue
        for link in links:
            try:
                target = os.readlink(link)
            except OSError:
                continue
            if target == str(mountpoint) or target.startswith(inside):
                try:
                    with open(f"/proc/{entry}/comm") as comm:
                        program = comm.read().strip()
                except OSError:
                    program = "?"
                found.append((int(entry), program, target))
                break
    return found


def unmount(mountpoint: Path, state_dir: Path, timeout: float = 30.0, force: bool = False,
            known: Callable[[], Mapping[int, str]] | None = None) -> str:
    """Unmount cleanly: the daemon finishes what it is doing and exits.  Also clears stale mounts.
    ``known`` names memfs's own processes by pid (another mount, a daemon), for the refusal
    when one of them keeps the mount busy."""
    record = pid_file(state_dir, mountpoint)
    info = read_record(state_dir, mountpoint)
    stale = is_stale(mountpoint)
    if not stale and not is_mounted(mountpoint):
        record.unlink(missing_ok=True)
        raise MountError(f"{mountpoint} is not mounted")
    running = info is not None and alive(info.pid)
    if not stale and not force:
        busy = users_of(mountpoint, info.pid if info else None)
        if busy:
            ours = known() if known is not None else {}
            named = ", ".join(f"{ours.get(pid) or f'{program} (pid {pid})'} has {path}"
                              for pid, program, path in busy[:3])
            raise MountError(f"{mountpoint} is busy: {named}{' and more' if len(busy) > 3 else ''}; close them "
                             "first (unmounting now would cut their writes off), or `memfs umount --force`")
    if running and not stale:
        assert info is not None
        os.kill(info.pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and alive(info.pid):
            time.sleep(0.05)
        if not alive(info.pid) and not is_mounted(mountpoint):
            left = leftover_file(state_dir, mountpoint)
            try:
                note = left.read_text().strip()
                left.unlink()
            except OSError:
                note = ""
            return f"unmounted; {note}" if note else "unmounted"
    force_unmount(mountpoint)
    record.unlink(missing_ok=True)
    if is_mounted(mountpoint):
        raise MountError(f"could not unmount {mountpoint}: is a program still using it? (fuser -m {mountpoint})")
    if not stale and info is None:
        # A live mount whose daemon this state directory has no record of (another
        # MEMFS_STATE_DIR, or a pid file removed by hand): not stale, just not ours to signal.
        return "unmounted (no record of its daemon here, so it was detached with fusermount3)"
    return "cleaned up a stale mount" if stale or not running else "unmounted"
