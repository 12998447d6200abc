"""The ``memfs`` command's entry point, and its fast path: a read-only command (search, get,
status, context) that a running daemon answers is asked and printed here, without importing
click, pydantic or numpy (importing them was half or more of such a command's time).

It owns a strict subset of the command line: the global options --workspace/-w, --agent/-a,
--mode, --config and --set (before or after the command name), and each command's own plain
options, parsed as click parses them (``--opt VALUE``, ``--opt=VALUE``, ``-o VALUE``, ``-oVALUE``,
flags, the last of a repeated option winning, the command's own over those given before its
name; but ``search`` with --agent twice, which searches several agents, is click's).  It sends
the request :mod:`memfs.cli` would send and prints the answer as its ``_emit`` does.  Anything
else goes to :func:`memfs.cli.main` unchanged: an option it does not know, --help, --version,
-v, --no-daemon, MEMFS_NO_DAEMON, ``search -``, ``--``, a value click would refuse, an answer
it cannot print byte for byte as click would (a usage error, ANSI codes, a stream not in UTF-8),
or no daemon answering (no daemon, one that says ``elsewhere``, one that went away): click then
asks again or starts a daemon on demand, which is harmless for a command that only reads.
"""

from __future__ import annotations

import os
import stat
import sys

TYPE_CHECKING = False  # typing itself is a few ms of every command (mypy takes this as typing's)
if TYPE_CHECKING:
    from typing import NoReturn

    from memfs.serve.wire import Answer

# Global options that take a value: the name click gives them, as memfs.cli.app.global_options does.
GLOBAL = {"--workspace": "workspace", "-w": "workspace", "--agent": "agent", "-a": "agent", "--mode": "mode",
          "--config": "config_file", "--set": "overrides"}
# Each command's own options: (flags, options with a value, how many arguments at least and at most).
COMMANDS: dict[str, tuple[dict[str, str], dict[str, str], int, int]] = {
    "search": ({"--json": "json"},
               {"-n": "n", "--max-results": "n", "--min-score": "min", "--in": "in", "--after": "after",
                "--before": "before", "--mmr": "mmr", "--decay": "decay"}, 1, 1),
    "get": ({"--json": "json", "--messages": "messages"}, {"--from": "from_line", "--lines": "lines"}, 1, 1),
    "status": ({"--json": "json"}, {}, 0, 0),
    "context": ({}, {}, 0, 1),
    "index": ({"--json": "json"}, {}, 0, 0),  # not --rebuild; on a terminal click draws the bar
    "sync": ({"--json": "json"}, {}, 0, 0),  # the message comes on stdin (read in _answered)
    "history": ({"--json": "json", "--diff": "diff", "--deleted": "deleted"}, {}, 0, 1 << 16),  # not forget
}
SEARCH_OPTIONS = ("n", "min", "in", "after", "before", "mmr", "decay")  # the order memfs.cli.reading.search sends


_STDIN: list[bytes] = []  # what `sync` read from stdin before it fell back to click


class _Fallback(Exception):
    """This command line is click's to handle."""


def main() -> None:
    """The ``memfs`` console script and ``python -m memfs``."""
    if sys.argv[1:2] == ["hook"] and not {"-h", "--help"} & set(sys.argv):
        from memfs.capture.hookrun import main as hook  # a runtime's hook: within a second, never click

        hook(sys.argv[2:])
    request = parse(sys.argv[1:])
    if request is not None and _answered(*request):
        return
    if _STDIN:  # the fast path read the message: click reads it again from here
        import io

        sys.stdin = io.TextIOWrapper(io.BytesIO(_STDIN[0]))
    from memfs.cli import main as click_main

    click_main()


def parse(argv: list[str]) -> tuple[str, dict[str, object], dict[str, object]] | None:
    """``(command, global options, the command's arguments as memfs.cli sends them)``, or None
    when the fast path does not take this command line."""
    try:
        return _parse(argv)
    except _Fallback:
        return None


def _parse(argv: list[str]) -> tuple[str, dict[str, object], dict[str, object]] | None:
    if os.environ.get("MEMFS_NO_DAEMON"):
        return None  # --no-daemon's twin
    if any(k.startswith("_") and k.endswith("_COMPLETE") for k in os.environ):
        return None  # a shell's completion asking click
    if any(not _encodable(arg) for arg in argv):
        return None
    outer: dict[str, list[str]] = {}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):  # before the command name: only options
        i = _option(argv, i, {}, GLOBAL, outer)
    if i == len(argv) or argv[i] not in COMMANDS:
        return None
    command = argv[i]
    flags, valued, least, most = COMMANDS[command]
    inner: dict[str, list[str]] = {}
    words: list[str] = []
    i += 1
    while i < len(argv):
        if argv[i].startswith("-"):
            i = _option(argv, i, flags, {**GLOBAL, **valued}, inner)
        else:
            words.append(argv[i])
            i += 1
    if not least <= len(words) <= most:
        return None
    if command == "search" and len(inner.get("agent") or outer.get("agent") or []) > 1:
        return None  # `search --agent a --agent b`: several agents, not the last one (click's)
    return command, _globals(outer, inner), _arguments(command, words, inner)


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # bytes of argv that are not UTF-8
        return False
    return True


def _option(argv: list[str], i: int, flags: dict[str, str], valued: dict[str, str],
            into: dict[str, list[str]]) -> int:
    """Take the option at ``argv[i]`` into ``into`` (every value, in order); the index after it."""
    token = argv[i]
    if token.startswith("--"):
        name, eq, value = token.partition("=")
        if name in flags and not eq:
            into.setdefault(flags[name], []).append("")
            return i + 1
        if name not in valued:
            raise _Fallback
        if not eq:
            if i + 1 == len(argv):
                raise _Fallback
            value = argv[i + 1]
            i += 1
        into.setdefault(valued[name], []).append(value)
        return i + 1
    name = token[:2]
    if len(token) < 2 or name not in valued or "=" in token:  # "-", -v, -h, clusters of flags
        raise _Fallback
    if len(token) > 2:
        value = token[2:]
    elif i + 1 < len(argv):
        value = argv[i + 1]
        i += 1
    else:
        raise _Fallback
    into.setdefault(valued[name], []).append(value)
    return i + 1


def _path_ok(value: str, file_okay: bool, dir_okay: bool) -> bool:
    """Whether click.Path(file_okay, dir_okay) takes ``value`` (it refuses a file where a folder
    is asked for, a folder where a file is, and what cannot be read)."""
    if not value:
        return False
    try:
        st = os.stat(value)
    except OSError:
        return True
    if (not file_okay and stat.S_ISREG(st.st_mode)) or (not dir_okay and stat.S_ISDIR(st.st_mode)):
        return False
    return os.access(value, os.R_OK)


def _globals(outer: dict[str, list[str]], inner: dict[str, list[str]]) -> dict[str, object]:
    """The global options merged as memfs.cli.app._options merges them."""
    from pathlib import Path

    for value in outer.get("workspace", []) + inner.get("workspace", []):
        if not _path_ok(value, file_okay=False, dir_okay=True):
            raise _Fallback
    for value in outer.get("config_file", []) + inner.get("config_file", []):
        if not _path_ok(value, file_okay=True, dir_okay=False):
            raise _Fallback
    opts: dict[str, object] = {}
    for key in ("workspace", "agent", "mode", "config_file"):
        given = inner.get(key) or outer.get(key)
        if not given:
            opts[key] = None
        elif not given[-1]:
            raise _Fallback  # an empty value: click's reading of it is not worth repeating
        else:  # click.Path(path_type=Path) gives the commands a Path
            opts[key] = str(Path(given[-1])) if key in ("workspace", "config_file") else given[-1]
    opts["overrides"] = outer.get("overrides", []) + inner.get("overrides", [])
    return opts


def _count(values: list[str]) -> int:
    """click.IntRange(min=1) of the last value, when it is plainly a number."""
    value = values[-1]
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        raise _Fallback
    return int(value)


def _arguments(command: str, words: list[str], given: dict[str, list[str]]) -> dict[str, object]:
    if command == "search":
        if words[0] == "-":
            raise _Fallback  # queries from stdin
        # Passed as given: the daemon checks them as `memfs search` does, and a usage error is
        # printed by click (see _answered).
        options = {k: given[k][-1] for k in SEARCH_OPTIONS if k in given}
        return {"query": words[0], "json": "json" in given, "options": options}
    if command == "get":
        return {"path": words[0], "from_line": _count(given["from_line"]) if "from_line" in given else 1,
                "lines": _count(given["lines"]) if "lines" in given else None, "json": "json" in given,
                "messages": "messages" in given}
    if command == "status":  # on a terminal, pending work is drawn as a bar (memfs.cli.reading.status)
        return {"json": "json" in given, "tty": sys.stdout.isatty()}
    if command in ("index", "sync"):
        return {"json": "json" in given}
    if command == "history":
        if words and words[0] == "forget":
            raise _Fallback  # it asks before it forgets
        return {"path": words[0] if words else None, "versions": words[1:], "diff": "diff" in given,
                "deleted": "deleted" in given, "json": "json" in given, "pid": os.getpid(), "via": "cli"}
    return {"mode": words[0] if words else None}


def _utf8(stream: object) -> bool:
    import codecs

    try:
        return codecs.lookup(getattr(stream, "encoding", None) or "ascii").name == "utf-8"
    except LookupError:
        return False


def _tz_in_doubt() -> bool:
    """TZ is set and the C library took it as UTC: a typo it says nothing of, or a real UTC
    spelled unusually.  Telling them apart needs zoneinfo, which this path does not import."""
    if not os.environ.get("TZ"):
        return False
    import time

    return not (time.timezone or time.daylight or time.tzname[0] in ("UTC", "GMT", "UCT", "Zulu"))


def _answered(command: str, opts: dict[str, object], args: dict[str, object]) -> bool:
    """Ask the daemon that serves this command and print its answer; False: click answers it."""
    # click.echo rewraps a stream it finds misconfigured (ASCII): not ours to copy.
    if not (_utf8(sys.stdout) and _utf8(sys.stderr)):
        return False
    if _tz_in_doubt():
        return False  # click's path names a TZ this machine does not know (memfs.workspace.warn_unknown_tz)
    from memfs.serve.wire import Client, Invocation

    invocation = Invocation.here(opts)
    client = Client(invocation)
    try:
        if command == "sync":
            import base64

            data = sys.stdin.buffer.read()
            _STDIN.append(data)  # for click, should the daemon not answer
            args = {"data": base64.b64encode(data).decode(), **args, "pid": os.getpid(), "via": "cli"}
            answer = client.run(command, args)
        elif command == "index":
            if sys.stderr.isatty():
                return False  # click's progress bar
            from memfs.serve.progress import PlainProgress, already_embedding, daemon_progress, to_stderr

            if line := already_embedding(client):
                to_stderr(line)
            with daemon_progress(invocation, PlainProgress("embedding", True, to_stderr)):
                answer = client.run(command, args)
        else:
            answer = client.run(command, args)
    except (KeyboardInterrupt, EOFError):
        _aborted(command)
    finally:
        client.close()
    # A usage error comes with click's usage lines; click strips ANSI codes from what it prints
    # where it is not a terminal.
    if answer is None or answer.usage or any("\x1b" in text for text in (answer.stdout, answer.stderr,
                                                                         answer.error or "")):
        return False
    _emit(answer)
    return True


def _emit(answer: Answer) -> NoReturn:
    """Print as memfs.cli.app._emit and click's main do, and exit as they do."""
    try:
        if answer.stdout:
            try:
                sys.stdout.write(answer.stdout)
                sys.stdout.flush()
            except UnicodeEncodeError:  # a version's bytes that are not UTF-8
                sys.stdout.flush()
                sys.stdout.buffer.write(answer.stdout.encode("utf-8", "surrogateescape"))
                sys.stdout.flush()
        if answer.stderr:
            sys.stderr.write(answer.stderr)
            sys.stderr.flush()
        if answer.error is not None:
            sys.stderr.write(f"Error: {answer.error}\n")
            sys.stderr.flush()
            sys.exit(1)
    except OSError as exc:
        import errno

        if exc.errno != errno.EPIPE:
            raise
        # The reader went away (`memfs get ... | head`): as click, exit 1 and say nothing more,
        # not even when the interpreter flushes the streams on its way out.
        sys.stdout = _QuietFlush(sys.stdout)  # type: ignore[assignment]
        sys.stderr = _QuietFlush(sys.stderr)  # type: ignore[assignment]
        sys.exit(1)
    sys.exit(0)


def _aborted(command: str) -> NoReturn:
    said = "Aborted!"
    if command == "index":  # what is embedded stays: `memfs index` says so, as memfs.cli.writing.index does
        from memfs.serve.progress import ABORTED as said
    sys.stderr.write(f"\n{said}\n")  # click's blank line after ^C, then its word
    sys.stderr.flush()
    sys.exit(1)


class _QuietFlush:
    """A stream whose flush ignores a broken pipe (click's _PacifyFlushWrapper)."""

    def __init__(self, wrapped: object) -> None:
        self.wrapped = wrapped

    def flush(self) -> None:
        try:
            self.wrapped.flush()  # type: ignore[attr-defined]
        except OSError as exc:
            import errno

            if exc.errno != errno.EPIPE:
                raise

    def __getattr__(self, attr: str) -> object:
        return getattr(self.wrapped, attr)
