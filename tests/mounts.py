"""Mounting real memfs filesystems in tests, always unmounted afterwards."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from memfs.config import load_config
from memfs.memory import Memory
from memfs.mounttable import is_mounted as mount_table_has


def clean_env() -> dict[str, str]:
    """This environment without the caller's MEMFS_* settings, and with commands that start no
    daemon on demand: a test that is not about on-demand daemons gets the answers of the process
    it runs (and leaves nothing running); the tests of on-demand daemons turn it on."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
    return {**env, "MEMFS_DAEMON_ON_DEMAND": "false"}


def memfs_cli(*args: str, env: dict[str, str] | None = None, input: str | None = None,
              timeout: float = 120, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memfs", *args], capture_output=True, text=True,
                          env={**clean_env(), **(env or {})}, input=input, timeout=timeout, cwd=cwd)


def is_mounted(path: Path) -> bool:
    return mount_table_has(path)


@dataclass
class Mounted:
    workspace: Path
    mnt: Path
    state: Path
    agent: str
    output: str = ""  # what `memfs mount` printed (stdout and stderr)

    @property
    def pid(self) -> int | None:
        for record in (self.state / "mounts").glob("*.json"):
            info = json.loads(record.read_text())
            if info["mountpoint"] == str(self.mnt):
                return int(info["pid"])
        return None

    def memory(self, **settings: str) -> Memory:
        """A second connection to this mount's index, as another process would have."""
        overrides = [("state_dir", str(self.state))] + list(settings.items())
        return Memory(load_config(workspace=self.workspace, agent=self.agent, env={}, overrides=overrides))

    def search_json(self, query: str) -> dict:
        out = memfs_cli("search", "--json", query, "-w", str(self.workspace), "--agent", self.agent,
                        env={"MEMFS_STATE_DIR": str(self.state)})
        assert out.returncode == 0, out.stderr
        return json.loads(out.stdout)


def mount(workspace: Path, mnt: Path, state: Path, agent: str = "main", *extra: str) -> Mounted:
    try:
        mnt.mkdir(parents=True, exist_ok=True)
    except OSError:
        pass  # a stale mount answers ENOTCONN; `memfs mount --force` deals with it
    out = memfs_cli("mount", str(workspace), str(mnt), "--agent", agent, *extra,
                    env={"MEMFS_STATE_DIR": str(state)})
    assert out.returncode == 0, out.stderr + out.stdout
    assert is_mounted(mnt)
    return Mounted(workspace, mnt, state, agent, out.stdout + out.stderr)


def unmount(m: Mounted) -> None:
    """Unmount however it takes: memfs umount, then lazy fusermount3, then kill the daemon."""
    if is_mounted(m.mnt):
        memfs_cli("umount", str(m.mnt), env={"MEMFS_STATE_DIR": str(m.state)}, timeout=60)
    if is_mounted(m.mnt):
        subprocess.run(["fusermount3", "-u", "-z", str(m.mnt)], capture_output=True)
    pid = m.pid
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + 10
    while is_mounted(m.mnt) and time.monotonic() < deadline:
        time.sleep(0.05)


def wait_until(predicate, timeout: float = 30.0, step: float = 0.05) -> bool:
    """Poll ``predicate`` until it holds or ``timeout`` passes; its last answer."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(step)
    return predicate()
