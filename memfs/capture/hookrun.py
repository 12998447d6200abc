"""``memfs hook RUNTIME EVENT``: the process a runtime's hook starts, which never breaks or slows
the agent.  It exits 0 within a second of starting, whatever happens, and prints nothing but the
context it adds.

How: this process reads the runtime's input (stdin, or Codex's notify argument) and forks a
worker in a session of its own, whose output goes nowhere the runtime waits on.  The worker asks
the daemon that serves the workspace (a mount, ``memfs serve``), else answers itself
(:mod:`.worker`), and hands back on a pipe what to print.  This process waits for it only as
long as the budget allows (:data:`TOTAL_S` since the process started), prints it if it came,
and exits; a worker still busy (a first hook with no daemon, a long transcript) finishes alone,
and says what it did, or what went wrong, in the file ``memfs status`` reads
(:mod:`.hookstate`).  Nothing but ``os``, ``select`` and ``time`` until the fork (not even
``json``): the interpreter's start is most of the budget already.
"""

from __future__ import annotations

import os
import select
import sys
import time

from memfs.capture import hooks

TOTAL_S = 0.8  # from the process's start to its exit, at most (the runtimes wait; a second is the promise)
STDIN_MAX = 16 << 20  # a prompt with a pasted log; more is not read
VALUED = {"-w": "workspace", "--workspace": "workspace", "-a": "agent", "--agent": "agent", "--mode": "mode",
          "--config": "config_file", "--set": "overrides"}


def started_ago() -> float:
    """Seconds since this process started (the interpreter's own start included), from /proc."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as uptime:
            up = float(uptime.read().split()[0])
        return max(0.0, up - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.1


def parse_argv(argv: list[str]) -> tuple[list[str], dict[str, object]]:
    """(RUNTIME, EVENT and any argument after them, the global options), as memfs.cli takes them."""
    words: list[str] = []
    opts: dict[str, object] = {"overrides": []}
    i = 0
    while i < len(argv):
        token = argv[i]
        name, sep, value = token.partition("=")
        if token.startswith("--") and sep and name in VALUED:
            key, i = VALUED[name], i + 1
        elif token in VALUED and i + 1 < len(argv):
            key, value, i = VALUED[token], argv[i + 1], i + 2
        elif token.startswith("-w") and len(token) > 2:
            key, value, i = "workspace", token[2:], i + 1
        else:
            if token in ("-v", "--verbose", "--no-daemon"):
                opts[token.lstrip("-").replace("-", "_")] = True
            else:
                words.append(token)
            i += 1
            continue
        if key == "overrides":
            opts["overrides"].append(value)  # type: ignore[union-attr]
        else:
            opts[key] = value
    return words, opts


def read_stdin(deadline: float) -> bytes:
    """What the runtime wrote on stdin, until it closes it (or the deadline: a runtime that
    keeps it open gets what came); nothing from a terminal."""
    try:
        if os.isatty(0):
            return b""
    except OSError:
        return b""
    chunks: list[bytes] = []
    size = 0
    while size < STDIN_MAX:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        try:
            ready, _, _ = select.select([0], [], [], left)
        except (OSError, ValueError):
            break
        if not ready:
            break
        try:
            chunk = os.read(0, 1 << 16)
        except OSError:
            break
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def main(argv: list[str]) -> None:
    """The whole hook; never returns (exit status 0, always)."""
    try:
        _run(argv)
    except BaseException:  # noqa: BLE001, S110 -- nothing may reach the agent: not a traceback, not a status
        pass
    sys.stdout.flush()
    os._exit(0)


def _run(argv: list[str]) -> None:
    deadline = time.monotonic() + TOTAL_S - started_ago()
    words, opts = parse_argv(argv)
    if len(words) < 2:
        return
    runtime, event, extra = words[0], words[1], words[2:]
    raw = extra[-1].encode() if extra else read_stdin(min(deadline, time.monotonic() + TOTAL_S / 2))
    try:
        name, action = hooks.canonical(runtime, event)
    except hooks.UnknownEvent:
        name, action = event, ""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the worker: alone in its session, its output going nowhere the runtime waits on
        code = 0
        try:
            os.close(read_end)
            os.setsid()
            null = os.open(os.devnull, os.O_RDWR)
            for fd in (0, 1, 2):
                os.dup2(null, fd)
            from memfs.capture import worker

            worker.run(runtime, event, raw, opts, write_end, deadline)
        except BaseException:  # noqa: BLE001
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    if not action or not hooks.waited(name, action):
        return
    said = memoryview(_read_until(read_end, deadline))
    while said:
        said = said[os.write(1, said):]


def _read_until(fd: int, deadline: float) -> bytes:
    """What the worker wrote, if it finished writing (closed its end) before the deadline."""
    data = b""
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return b""
        try:
            ready, _, _ = select.select([fd], [], [], left)
        except (OSError, ValueError):
            return b""
        if not ready:
            return b""
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            return data
        data += chunk
