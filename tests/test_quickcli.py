"""The fast path of the `memfs` command (memfs.quickcli): a read-only command a running daemon
answers is asked without importing click, pydantic or numpy, with the request click would send
and byte for byte the output click would print; anything else, and anything no daemon answers,
is click's, unchanged.  Real processes, a real daemon started on demand, click's own parser."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import click
import pytest
from conftest import write
from mounts import clean_env, wait_until

from memfs import cli, quickcli
from memfs.cli import app as cli_app
from memfs.serve.wire import Invocation

CLICK = "import sys; sys.argv[0] = 'memfs'; from memfs.cli import main; main()"  # click, as before the fast path
HEAVY = ("click", "pydantic", "numpy", "memfs.cli", "memfs.config", "memfs.memory")


def env_for(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**clean_env(), "MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_DAEMON_ON_DEMAND": "true", **extra}


SCRIPT = Path(sys.executable).parent / "memfs"  # the console script pip made from pyproject's entry point


def fast(*args: str, env: dict[str, str], cwd: Path | None = None,
         flags: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    """The `memfs` console script (its name is the one click shows in usage lines)."""
    return subprocess.run([sys.executable, *flags, str(SCRIPT), *args], capture_output=True, text=True, env=env,
                          cwd=cwd, timeout=120)


def slow(*args: str, env: dict[str, str], cwd: Path | None = None) -> subprocess.CompletedProcess:
    """memfs.cli.main itself: click parses, then asks the daemon (or answers itself)."""
    return subprocess.run([sys.executable, "-c", CLICK, *args], capture_output=True, text=True, env=env, cwd=cwd,
                          timeout=120)


def imported(stderr: str) -> set[str]:
    """The modules `python -X importtime` says were imported."""
    return {line.rsplit("|", 1)[1].strip() for line in stderr.splitlines() if line.startswith("import time:")}


def heavy(stderr: str) -> set[str]:
    return {m for m in imported(stderr) if m.split(".")[0] in HEAVY or m in HEAVY}


@pytest.fixture
def workspace(cli_workspace: Path) -> Path:
    return cli_workspace


@pytest.fixture
def daemon(tmp_path: Path, workspace: Path) -> dict[str, str]:
    """A daemon started on demand for the workspace, its embeddings settled; the env that finds it."""
    env = env_for(tmp_path)
    first = fast("status", "-w", str(workspace), env=env)
    assert first.returncode == 0, first.stderr
    assert wait_until(lambda: json.loads(fast("status", "--json", "-w", str(workspace), env=env).stdout)["pending"]
                      == 0, timeout=120)
    return env


# ---- the parser agrees with click's ---------------------------------------------------------

def click_request(argv: list[str]) -> tuple[str, Invocation, dict] | None:
    """What memfs.cli sends a daemon for ``argv``, from click's own parsing; None when click
    refuses the command line or it is not a read-only command."""
    try:
        ctx = cli.main.make_context("memfs", list(argv))
        ctx.obj = ctx.params  # what the group's callback does
        name, command, rest = cli.main.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        sub = command.make_context(name, rest, parent=ctx)
    except (click.ClickException, click.exceptions.Exit):
        return None
    if name not in ("search", "get", "status", "context", "index", "sync", "history"):
        return None
    if name == "index" and sub.params["rebuild"]:
        return None
    if name == "history" and (sub.params["path"] == "forget" or sub.params["containing"] or sub.params["yes"]):
        return None
    p = sub.params
    with sub:
        opts = cli_app._options(dict(p))
    if name == "search":
        given = {"n": p["limit"], "min": p["min_score"], "in": p["scope"], "after": p["after"],
                 "before": p["before"], "mmr": p["mmr"], "decay": p["decay"]}
        args = {"query": p["query"], "json": p["as_json"], "options": {k: v for k, v in given.items() if v is not None}}
    elif name == "get":
        args = {"path": p["path"], "from_line": p["from_line"], "lines": p["lines"], "json": p["as_json"],
                "messages": p["messages"]}
    elif name == "status":
        args = {"json": p["as_json"], "tty": sys.stdout.isatty()}  # a terminal gets a bar (a newcomer walk)
    elif name in ("index", "sync"):
        args = {"json": p["as_json"]}  # (sync's message is read from stdin when it is asked)
    elif name == "history":
        args = {"path": p["path"], "versions": list(p["versions"]), "diff": p["diff"], "deleted": p["deleted"],
                "json": p["as_json"], "pid": os.getpid(), "via": "cli"}
    else:
        args = {"mode": p["bundle_mode"]}
    return name, Invocation.here(opts), args


def quick_request(argv: list[str]) -> tuple[str, Invocation, dict] | None:
    parsed = quickcli.parse(argv)
    if parsed is None:
        return None
    command, opts, args = parsed
    return command, Invocation.here(opts), args


TAKEN = [
    ["index"], ["index", "--json", "-w", "ws"], ["sync"], ["sync", "--json"], ["history"],
    ["history", "MEMORY.md"], ["history", "--diff", "MEMORY.md", "2", "3"], ["history", "--deleted", "--json"],
    ["status"], ["status", "--json"], ["-w", "ws", "status"], ["status", "-w", "ws"],
    ["status", "--workspace=ws/"], ["--workspace", "./ws", "status"], ["-wws", "status", "--json"],
    ["-w", "elsewhere", "status", "-w", "ws"], ["status", "-w", "elsewhere", "-w", "ws"],
    ["--agent", "a", "--mode", "shared", "status", "-a", "b"], ["--set", "x=1", "status", "--set", "y=2", "--set=z=3"],
    ["--config", "c.toml", "status"], ["status", "--config=sub/c.toml", "--mode=main"],
    ["get", "MEMORY.md"], ["get", "--from", "3", "memory/2023-05-08.md", "--lines=7"],
    ["get", "MEMORY.md", "--json", "--messages", "--from=0012"], ["-w", "ws", "get", "AGENTS.md", "--lines", "2"],
    ["search", "support group"], ["search", "--json", "support group", "-n", "3"], ["search", "q", "-n3", "--in", "memory"],
    ["search", "q", "--min-score=0.2", "--after", "2023-01-01", "--before", "2024-01-01", "--mmr", "0.7",
     "--decay", "30"], ["search", "q", "-n", "2", "-n", "4"], ["search", "q", "-n", "-1"], ["search", "q", "-n", "abc"],
    ["search", "q", "--max-results", "5", "-w", "ws"], ["search", ""],
    ["context"], ["context", "shared"], ["--mode", "shared", "context", "main", "-w", "ws"],
]
REFUSED = [  # click's to answer: help, version, verbosity, no daemon, stdin, what it refuses or validates
    [], ["--help"], ["-h"], ["--version"], ["status", "--help"], ["-v", "status"], ["status", "-vv"],
    ["--no-daemon", "status"], ["status", "--no-daemon"], ["search", "-"], ["search", "--", "-q"],
    ["status", "--bogus"], ["search", "q", "--n", "5"], ["search"], ["search", "a", "b"], ["get"],
    ["status", "extra"], ["context", "main", "shared"], ["status", "-w"], ["status", "--json=yes"],
    ["get", "x", "--from", "0"], ["get", "x", "--lines", "+3"], ["get", "x", "--lines", "٣"], ["get", "x", "--from", " 2"],
    ["status", "-w", "file.txt"], ["status", "--config", "sub"], ["status", "-w="], ["status", "-w", ""],
    ["status", "-w=ws"], ["config"], ["index", "--rebuild"], ["history", "forget", "MEMORY.md", "1"],
    ["history", "--containing", "x"], ["history", "MEMORY.md", "-y"], ["--json", "status"],
    ["search", "q\udcff"], ["status", "-a"], ["search", "q", "-a", "x", "-a", "y"], ["-a", "x", "-a", "y", "search", "q"],
]


def test_the_fast_parser_sends_what_click_would_and_leaves_the_rest_to_click(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "ws").mkdir()
    (tmp_path / "sub").mkdir()
    (tmp_path / "file.txt").write_text("a file, not a workspace\n")
    monkeypatch.chdir(tmp_path)
    for key in [k for k in os.environ if k.startswith("MEMFS_")]:
        monkeypatch.delenv(key)
    for argv in TAKEN:
        assert quick_request(argv) is not None, argv
        assert quick_request(argv) == click_request(argv), argv
    for argv in REFUSED:
        assert quick_request(argv) is None, argv
    monkeypatch.setenv("MEMFS_NO_DAEMON", "1")
    assert quick_request(["status"]) is None
    monkeypatch.delenv("MEMFS_NO_DAEMON")
    monkeypatch.setenv("_MEMFS_COMPLETE", "bash_complete")
    assert quick_request(["status"]) is None


# ---- a running daemon: the same bytes, without click ---------------------------------------

CASES = [
    ["status"], ["status", "--json"], ["get", "MEMORY.md"], ["get", "--lines", "3", "memory/2023-05-08.md"],
    ["get", "memory/2023-05-08.md", "--from=5", "--lines", "4", "--json"], ["get", "nope.md"],
    ["search", "LGBTQ support group"], ["search", "--json", "medication allergy", "-n2"],
    ["search", "support group", "--in", "memory", "--min-score", "0.1"], ["search", "   "],
    ["context"], ["context", "shared"], ["context", "nonsense"], ["--mode", "shared", "get", "MEMORY.md"],
    ["--mode", "shared", "context", "main"], ["index"],  # (index --json carries the status of the moment)
    ["history"], ["history", "MEMORY.md"], ["history", "MEMORY.md", "1"], ["history", "--diff", "MEMORY.md"],
    ["history", "--deleted"], ["history", "nope.md"],
]


def test_a_daemon_answers_the_fast_path_with_the_bytes_click_prints(workspace: Path, daemon: dict[str, str]) -> None:
    env, ws = daemon, str(workspace)
    for args in CASES:
        for argv in ([*args, "-w", ws], ["-w", ws, *args]):
            quick = fast(*argv, env=env)
            via_click = slow(*argv, env=env)
            assert (quick.stdout, quick.stderr, quick.returncode) == \
                   (via_click.stdout, via_click.stderr, via_click.returncode), argv
        # The command's own process, once per command (where -w goes is the parsers' business,
        # compared above; an in-process answer costs a model load).
        alone = fast(*args, "-w", ws, "--no-daemon", env=env)
        assert (quick.stdout, quick.stderr, quick.returncode) == (alone.stdout, alone.stderr, alone.returncode), args
    errors = {tuple(a): fast(*a, "-w", ws, env=env) for a in (["get", "nope.md"], ["context", "nonsense"])}
    assert all(out.returncode == 1 and out.stderr.startswith("Error: ") for out in errors.values()), errors
    # Inside the workspace, with a relative path and no -w.
    quick = fast("get", "2023-05-08.md", "--lines", "2", env=env, cwd=workspace / "memory")
    assert quick.returncode == 0 and quick.stdout
    assert (quick.stdout, quick.stderr) == (lambda o: (o.stdout, o.stderr))(
        slow("get", "2023-05-08.md", "--lines", "2", env=env, cwd=workspace / "memory"))


def test_a_command_the_daemon_answers_imports_neither_click_nor_the_models(workspace: Path,
                                                                           daemon: dict[str, str]) -> None:
    env, ws = daemon, str(workspace)
    for args in (["status"], ["get", "AGENTS.md"], ["search", "support group", "-n", "2"], ["context"], ["index"]):
        out = fast(*args, "-w", ws, env=env, flags=("-X", "importtime"))
        assert out.returncode == 0, out.stderr
        assert "memfs.quickcli" in imported(out.stderr) and heavy(out.stderr) == set(), (args, heavy(out.stderr))
    # `python -m memfs` is the fast path too.
    out = subprocess.run([sys.executable, "-X", "importtime", "-m", "memfs", "get", "AGENTS.md", "-w", ws],
                         capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0 and out.stdout == "# Agents\nRead MEMORY.md first.\n"
    assert "memfs.quickcli" in imported(out.stderr) and heavy(out.stderr) == set(), heavy(out.stderr)


def test_what_the_fast_path_does_not_take_is_clicks_with_the_same_bytes(workspace: Path,
                                                                        daemon: dict[str, str]) -> None:
    env, ws = daemon, str(workspace)
    for args in (["search", "q", "--n", "5"], ["search", "q", "-n", "abc"], ["search", "q", "--after", "someday"],
                 ["status", "--bogus"], ["get", "AGENTS.md", "--from", "0"], ["status", "--help"], ["--help"],
                 ["--version"], ["search"]):
        quick = fast(*args, "-w", ws, env=env, flags=("-X", "importtime"))
        via_click = slow(*args, "-w", ws, env=env)
        assert "click" in imported(quick.stderr), args  # it went to click
        stderr = "".join(line + "\n" for line in quick.stderr.splitlines() if not line.startswith("import time:"))
        assert (quick.stdout, stderr, quick.returncode) == \
               (via_click.stdout, via_click.stderr, via_click.returncode), args
    typo = fast("search", "q", "--n", "5", "-w", ws, env=env)
    assert typo.returncode == 2 and "No such option '--n'" in typo.stderr
    bad = fast("search", "q", "-n", "abc", "-w", ws, env=env)
    assert bad.returncode == 2 and "Try 'memfs search --help' for help." in bad.stderr


def test_with_no_daemon_the_command_is_clicks_which_answers_or_starts_one(tmp_path: Path, workspace: Path) -> None:
    ws = str(workspace)
    off = env_for(tmp_path, MEMFS_DAEMON_ON_DEMAND="false")
    quick = fast("get", "AGENTS.md", "-w", ws, env=off, flags=("-X", "importtime"))
    assert quick.returncode == 0 and quick.stdout == "# Agents\nRead MEMORY.md first.\n"
    assert "click" in imported(quick.stderr) and not (tmp_path / "state" / "run").exists()
    # On demand: the first command (click's) starts the daemon, the next is the fast path's.
    env = env_for(tmp_path)
    first = fast("-v", "get", "AGENTS.md", "-w", ws, env=env)
    assert "started a daemon" in first.stderr and first.stdout == "# Agents\nRead MEMORY.md first.\n"
    later = fast("get", "AGENTS.md", "-w", ws, env=env, flags=("-X", "importtime"))
    assert later.stdout == first.stdout and heavy(later.stderr) == set()
    # A daemon of another workspace says "elsewhere": click answers, in its own process or by a daemon it starts.
    other = tmp_path / "other"
    write(other / "AGENTS.md", "# Other agents\n")
    elsewhere = fast("get", "AGENTS.md", "-w", str(other), env=off, flags=("-X", "importtime"))
    assert elsewhere.stdout == "# Other agents\n" and "click" in imported(elsewhere.stderr)
    # MEMFS_NO_DAEMON: click's, never a daemon's answer.
    no = fast("-v", "get", "AGENTS.md", "-w", ws, env={**env, "MEMFS_NO_DAEMON": "1"})
    assert "answered in this process" in no.stderr


def test_a_reader_that_went_away_ends_the_fast_path_as_it_ends_click(workspace: Path, daemon: dict[str, str]) -> None:
    outcomes = []
    for argv in ([sys.executable, "-X", "importtime", str(SCRIPT)], [sys.executable, "-c", CLICK]):
        for args in (["get", "memory/2023-05-08.md"], ["get", "nope.md"]):
            read, write_end = os.pipe()
            os.close(read)  # nobody reads what it prints
            try:
                out = subprocess.run([*argv, *args, "-w", str(workspace)], stdout=write_end, stderr=subprocess.PIPE,
                                     text=True, env=daemon, timeout=120)
            finally:
                os.close(write_end)
            if "importtime" in argv:
                assert heavy(out.stderr) == set(), heavy(out.stderr)
            outcomes.append((out.returncode, "".join(line + "\n" for line in out.stderr.splitlines()
                                                     if not line.startswith("import time:"))))
    assert outcomes[:2] == outcomes[2:] == [(1, ""), (1, "Error: nope.md: no such file in the workspace\n")]


def test_a_sync_message_goes_the_fast_path_and_to_click_when_no_daemon_answers(tmp_path: Path, workspace: Path,
                                                                              daemon: dict[str, str]) -> None:
    message = ('[CLAWGPT-SYNC] {"messages": [{"id": "quick-%d", "chatId": "c1", "chatTitle": "Quick", '
               '"role": "user", "content": "The ferry to Hydra leaves at nine", "timestamp": 1793613600000}]}')
    ws = str(workspace)
    quick = subprocess.run([sys.executable, "-X", "importtime", str(SCRIPT), "sync", "-w", ws], input=message % 1,
                           capture_output=True, text=True, env=daemon, timeout=120)
    assert quick.returncode == 0 and quick.stdout == "NO_REPLY\n", quick.stderr
    assert heavy(quick.stderr) == set(), heavy(quick.stderr)
    via_click = subprocess.run([sys.executable, "-c", CLICK, "sync", "-w", ws], input=message % 2,
                               capture_output=True, text=True, env=daemon, timeout=120)
    stderr = "".join(line + "\n" for line in quick.stderr.splitlines() if not line.startswith("import time:"))
    assert (quick.stdout, stderr.replace("quick-1", "quick-2")) == (via_click.stdout, via_click.stderr)
    # No daemon answers (on-demand off, another state folder): click gets the same message from stdin.
    off = env_for(tmp_path / "alone", MEMFS_DAEMON_ON_DEMAND="false")
    alone = subprocess.run([sys.executable, "-X", "importtime", str(SCRIPT), "sync", "--json", "-w", ws],
                           input=message % 3, capture_output=True, text=True, env=off, timeout=120)
    assert alone.returncode == 0 and "click" in imported(alone.stderr), alone.stderr
    assert '"stored": 1' in alone.stdout, alone.stdout


def test_a_time_zone_this_machine_does_not_know_is_said_by_every_command(workspace: Path,
                                                                         daemon: dict[str, str]) -> None:
    """A TZ typo (the C library takes it as UTC without a word) is named by `memfs search` and
    `memfs status` whether a daemon answers them or not; a real zone is not warned of."""
    ws = str(workspace)
    typo = {**daemon, "TZ": "America/New_Yrok"}
    for env in (typo, {**typo, "MEMFS_NO_DAEMON": "1"}):
        for args in (["search", "dentist"], ["status"]):
            out = fast(*args, "-w", ws, env=env)
            assert out.returncode == 0, out.stderr
            assert "TZ=America/New_Yrok is not a time zone this machine knows" in out.stderr, (args, out.stderr)
    fine = fast("search", "dentist", "-w", ws, env={**daemon, "TZ": "America/New_York"})
    assert fine.returncode == 0 and "TZ=" not in fine.stderr, fine.stderr
