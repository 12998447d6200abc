"""Starting the workspace's daemon for a command that found none: ``memfs serve --on-demand``
for the same command line (workspace, agent, mode, config file, ``--set`` settings, current
folder and environment), detached in a session of its own, with its output in
``STATE/run/<key>.log``.  It says on a pipe when its socket answers ("ready") or why it will not
serve ("taken": another daemon has the key; "off": ``daemon.on_demand`` is false; an error), and
the command then asks it like any running daemon.  Standard library only, like :mod:`wire`.
"""

from __future__ import annotations

import json
import logging
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from memfs.mounttable import alive
from memfs.serve.wire import Invocation, daemon_key, run_dir
from memfs.userdirs import private_opener

log = logging.getLogger(__name__)

# How long a command waits for the daemon it started: the daemon brings the index up to date
# before it answers, which for a workspace with a few hundred changed files takes seconds.  Past
# this the command answers in its own process (from the index as it is), and the daemon, still
# starting, answers the commands after it.  A daemon that dies or cannot serve says so at once.
READY_TIMEOUT_S = 20.0
POLL_S = 0.02


def log_file(folder: Path, key: str) -> Path:
    return folder / f"{key}.log"


def announced(folder: Path, key: str) -> int | None:
    """The pid of the running daemon announced for ``key``, if there is one."""
    try:
        pid = json.loads((folder / f"{key}.json").read_text()).get("pid")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(pid, int):
        return None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass
    return pid


def _argv(invocation: Invocation, ready_fd: int) -> list[str]:
    # -P: the daemon runs the memfs this command runs, never a `memfs` folder where the caller
    # happens to stand (python -m puts the current folder first on sys.path).
    argv = [sys.executable, "-P", "-m", "memfs", "serve", "--on-demand", "--ready-fd", str(ready_fd)]
    for flag, value in (("--workspace", invocation.workspace), ("--agent", invocation.agent),
                        ("--mode", invocation.mode), ("--config", invocation.config_file)):
        if value is not None:
            argv += [flag, value]
    for override in invocation.overrides:
        argv += ["--set", override]
    return argv


def _read_line(fd: int, timeout: float) -> str | None:
    """The line the daemon writes on its pipe; "" when it closed the pipe without one (it
    ended), None when it said nothing within ``timeout``."""
    deadline = time.monotonic() + timeout
    data = b""
    while b"\n" not in data:
        left = deadline - time.monotonic()
        if left <= 0 or not select.select([fd], [], [], left)[0]:
            return None
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.split(b"\n", 1)[0].decode(errors="replace").strip()


def start(workspace: Path, agent: str, main: bool, invocation: Invocation,
          timeout: float = READY_TIMEOUT_S) -> int | None:
    """Start the daemon that serves ``invocation`` (settled to ``workspace``, ``agent`` and the
    mode) and wait until it answers; its pid, or None (the reason is logged at INFO) when the
    command is to answer in its own process."""
    folder = run_dir(invocation.env or None)
    key = daemon_key(str(workspace), agent, main)
    if (pid := announced(folder, key)) is not None:
        # It serves the key but did not answer this command (other settings, or it is stuck):
        # starting another would only be told "taken".
        log.info("the daemon with pid %d serves %s but not with these settings", pid, workspace)
        return None
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    logged = log_file(folder, key)
    read, write = os.pipe()
    try:
        with open(logged, "ab", opener=private_opener) as out:
            os.chmod(logged, 0o600)
            child = subprocess.Popen(_argv(invocation, write), stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                     cwd=invocation.cwd, start_new_session=True, pass_fds=(write,))
    except OSError as exc:
        os.close(read)
        log.info("could not start a daemon for %s: %s", workspace, exc)
        return None
    finally:
        os.close(write)
    try:
        said = _read_line(read, timeout)
    finally:
        os.close(read)
    if said == "ready":
        log.info("started a daemon for %s on demand (pid %d; log %s)", workspace, child.pid, logged)
        return child.pid
    if said == "taken":  # another command started one at the same moment: ask that one
        deadline = time.monotonic() + timeout
        while (pid := announced(folder, key)) is None and time.monotonic() < deadline:
            time.sleep(POLL_S)
        return pid
    if said is None:
        log.info("the daemon started for %s (pid %d) is not ready after %g s: answering here", workspace,
                 child.pid, timeout)
    elif said != "off":
        log.info("the daemon started for %s did not serve (%s); see %s", workspace, said or "it ended", logged)
    return None


def stop(workspace: Path, agent: str, env: dict[str, str] | None = None, timeout: float = 15.0) -> list[int]:
    """Stop the daemons started on demand for ``workspace`` and ``agent`` (both modes), and wait
    until they are gone: what only a process that holds the index alone may do (a rebuild)
    must not be refused because a command once started one.  Their pids."""
    folder = run_dir(env)
    stopped = []
    for main in (True, False):
        try:
            holder = json.loads((folder / f"{daemon_key(str(workspace), agent, main)}.lock").read_text() or "{}")
            pid = int(holder["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if holder.get("kind") != "on-demand":
            continue
        if not started_on_demand(pid):
            continue  # the pid is another process's now
        try:
            os.kill(pid, signal.SIGTERM)
        except OSError:
            continue
        stopped.append(pid)
    deadline = time.monotonic() + timeout
    while any(alive(pid) for pid in stopped) and time.monotonic() < deadline:
        time.sleep(POLL_S)
    for pid in stopped:
        log.info("stopped the daemon started on demand (pid %d)", pid)
    return stopped


def started_on_demand(pid: int) -> bool:
    """Whether ``pid`` is a daemon started on demand (not a process that reused its pid)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            return b"--on-demand" in cmdline.read().split(b"\0")
    except OSError:
        return False
