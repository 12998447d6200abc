"""The command line, run as a real program."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write
from mounts import clean_env


def memfs(*args: str, env: dict[str, str] | None = None, input: str | None = None, cwd: Path | None = None):
    full_env = clean_env()
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "memfs", *args], capture_output=True, text=True,
                          env=full_env, input=input, cwd=cwd, timeout=120)


def test_init_index_search_get_status(tmp_path: Path, locomo_day) -> None:
    ws = tmp_path / "ws"
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state")}
    out = memfs("init", str(ws), env=env)
    assert out.returncode == 0 and "created AGENTS.md" in out.stdout
    again = memfs("init", str(ws), env=env)
    assert "kept    AGENTS.md" in again.stdout
    locomo_day(ws)
    indexed = memfs("index", "--workspace", str(ws), env=env)
    assert indexed.returncode == 0, indexed.stderr
    assert "indexed" in indexed.stdout and "0 pending" in indexed.stdout

    found = memfs("search", "--json", "LGBTQ support group", env={**env, "MEMFS_WORKSPACE": str(ws)})
    payload = json.loads(found.stdout)
    assert payload["query"] == "LGBTQ support group"
    first = payload["results"][0]
    assert set(first) == {"path", "start_line", "end_line", "score", "vector_score", "text_score", "snippet",
                          "chunk_start_line", "chunk_end_line", "chat_title", "chat_id"}
    assert first["chat_title"] == first["chat_id"] == ""  # a daily log is not a chat
    assert first["path"] == "memory/2023-05-08.md"

    markdown = memfs("search", "LGBTQ support group", cwd=ws / "memory", env=env)  # workspace found from cwd
    assert markdown.returncode == 0 and "memory/2023-05-08.md#L" in markdown.stdout

    lines = memfs("search", "--json", "-n", "2", "-", input="support group\n\npainting sunrise\n",
                  env={**env, "MEMFS_WORKSPACE": str(ws)})
    rows = [json.loads(line) for line in lines.stdout.splitlines()]
    assert [r["query"] for r in rows] == ["support group", "", "painting sunrise"]  # one answer per line
    assert all(len(r["results"]) <= 2 for r in rows) and rows[1]["results"] == []
    assert rows[1]["warnings"] == ["the query is empty"]

    part = memfs("get", "memory/2023-05-08.md", "--from", "3", "--lines", "2", "-w", str(ws), env=env)
    assert part.stdout == "## 13:56 - Caroline\n\n" and "--from 5" in part.stderr
    outside = memfs("get", "../../etc/passwd", "-w", str(ws), env=env)
    assert outside.returncode != 0 and "outside the workspace" in outside.stderr

    status = json.loads(memfs("status", "--json", "-w", str(ws), env=env).stdout)
    assert status["files"] == 2 and status["chunks"] >= 3 and status["pending"] == 0
    index = Path(status["index_path"])
    assert index.name == "main.sqlite" and index.parent.parent == (tmp_path / "state" / "workspaces").resolve()


def test_config_shows_sources(tmp_path: Path) -> None:
    write(tmp_path / ".memfs.toml", "[search]\nmax_results = 9\n")
    out = memfs("config", "-w", str(tmp_path), "--set", "search.min_score=0.2",
                env={"MEMFS_CHUNKING_TOKENS": "300"})
    assert out.returncode == 0
    assert "search.min_score" in out.stdout and "(flag search.min_score)" in out.stdout
    assert "(env MEMFS_CHUNKING_TOKENS)" in out.stdout and ".memfs.toml)" in out.stdout
    bad = memfs("config", "-w", str(tmp_path), "--set", "search.min_score=high")
    assert bad.returncode != 0 and "search.min_score" in bad.stderr


def test_clear_errors(tmp_path: Path) -> None:
    missing = memfs("search", "x", "-w", str(tmp_path / "nope"), env={"MEMFS_STATE_DIR": str(tmp_path / "s")})
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    (tmp_path / "ws").mkdir()
    empty = memfs("search", "  ", "-w", str(tmp_path / "ws"), env={"MEMFS_STATE_DIR": str(tmp_path / "s")})
    assert empty.returncode != 0 and "empty" in empty.stderr
    inside = memfs("status", "-w", str(tmp_path), env={"MEMFS_STATE_DIR": str(tmp_path / "s")})
    assert inside.returncode == 1 and "is inside the workspace" in inside.stderr  # the index would show through


def test_global_options_work_before_and_after_the_command(tmp_path: Path, locomo_day) -> None:
    ws = tmp_path / "ws"
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}
    assert memfs("init", str(ws), env=env).returncode == 0
    locomo_day(ws)
    before = memfs("--workspace", str(ws), "--set", "search.max_results=2", "index", env=env)
    assert before.returncode == 0, before.stderr
    after = memfs("status", "--json", "--workspace", str(ws), env=env)
    both = memfs("-w", str(ws), "--agent", "other", "status", "--json", "--agent", "main", env=env)
    assert json.loads(after.stdout) == json.loads(both.stdout)
    limited = memfs("--set", "search.max_results=1", "search", "--json", "support group", "-w", str(ws), env=env)
    assert len(json.loads(limited.stdout)["results"]) == 1


def test_get_past_the_end_says_how_long_the_file_is(tmp_path: Path) -> None:
    write(tmp_path / "ws" / "memory" / "2026-11-22.md", "one\ntwo\nthree\n")
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}
    out = memfs("get", "memory/2026-11-22.md", "--from", "999", "-w", str(tmp_path / "ws"), env=env)
    assert out.returncode == 1 and "has 3 lines: --from 999 is past its end" in out.stderr
    last = memfs("get", "memory/2026-11-22.md", "--from", "3", "-w", str(tmp_path / "ws"), env=env)
    assert last.returncode == 0 and last.stdout == "three\n"


def test_a_workspace_never_indexed_says_so(tmp_path: Path) -> None:
    write(tmp_path / "ws" / "MEMORY.md", "- The cat is called Miso.\n")
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}
    out = memfs("search", "cat name", "-w", str(tmp_path / "ws"), env=env)
    assert out.returncode == 0 and "has not been indexed yet" in out.stdout and "memfs index" in out.stdout
    as_json = json.loads(memfs("search", "--json", "cat name", "-w", str(tmp_path / "ws"), env=env).stdout)
    assert any("not been indexed" in w for w in as_json["warnings"])
    memfs("index", "-w", str(tmp_path / "ws"), env=env)
    after = memfs("search", "cat called Miso", "-w", str(tmp_path / "ws"), env=env)
    assert "not been indexed" not in after.stdout and "MEMORY.md#L1" in after.stdout


@pytest.mark.parametrize("setting,message", [
    ("bundle.timezone=Mars/Olympus", "unknown time zone 'Mars/Olympus'"),
    ("sync.timezone=Nowhere/Land", "unknown time zone 'Nowhere/Land'"),
    ("search.min_score=5", "search.min_score = '5': Input should be less than or equal to 1"),
    ("search.max_results=0", "search.max_results"),
    ("mount.busy_poll_us=-1", "mount.busy_poll_us"),
    ("search.min_scor=0.2", "did you mean 'search.min_score'?"),
])
def test_bad_settings_are_one_line_errors(tmp_path: Path, setting: str, message: str) -> None:
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state")}
    (tmp_path / "mnt").mkdir()
    for command in (["context"], ["status"], ["config"], ["mount", str(tmp_path), str(tmp_path / "mnt")]):
        out = memfs(*command, "-w", str(tmp_path), "--set", setting, env=env)
        assert out.returncode == 1, (command, out.stdout)
        assert out.stderr.startswith("Error: config: ") and message in out.stderr, out.stderr
        assert "Traceback" not in out.stderr and len(out.stderr.splitlines()) == 1
    assert not os.listdir(tmp_path / "mnt")  # nothing was mounted


def test_option_typos_exit_2(tmp_path: Path) -> None:
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state")}
    for args in (["search", "x", "-n", "0"], ["search", "x", "--min-score", "2"], ["search", "x", "--max-resluts", "3"]):
        out = memfs(*args, "-w", str(tmp_path), env=env)
        assert out.returncode == 2 and "Traceback" not in out.stderr, args


def test_what_the_last_newcomer_walk_hit(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none",
           "MEMFS_NO_DAEMON": "1"}
    write(ws / "memory" / "2026-11-20.md", "one\ntwo\n")
    # An option's error speaks of the flag typed, not of a search file's name.
    bad = memfs("search", "x", "--min-score", "2", "-w", str(ws), env=env)
    assert bad.returncode == 2 and "Error: --min-score 2: --min-score must be from 0 to 1" in bad.stderr
    dates = memfs("search", "x", "--after", "2021-01-01", "--before", "2020-01-01", "-w", str(ws), env=env)
    assert "--after 2021-01-01 is not before --before 2020-01-01" in dates.stderr
    # A mistyped start of a long option still finds it.
    typo = memfs("search", "x", "--mni", "0.2", "-w", str(ws), env=env)
    assert typo.returncode == 2 and "Did you mean '--min-score'?" in typo.stderr
    # An empty query is a usage error, as no query is.
    empty = memfs("search", "", "-w", str(ws), env=env)
    assert empty.returncode == 2 and "the query is empty" in empty.stderr
    # A --workspace that does not exist: exit 2 as for one that is a file, without "pass --workspace".
    missing = memfs("status", "-w", str(tmp_path / "nope"), env=env)
    assert missing.returncode == 2 and "does not exist" in missing.stderr and "pass --workspace" not in missing.stderr
    # A reading command for an agent that has no index while others do is a typo, not a new agent.
    assert memfs("index", "-w", str(ws), "--agent", "bob", env=env).returncode == 0
    typo_agent = memfs("search", "one", "-w", str(ws), "--agent", "bbo", env=env)
    assert typo_agent.returncode == 1 and "no index for the agent 'bbo' (it has: bob, main)" in typo_agent.stderr
    assert not list((tmp_path / "state").glob("workspaces/*/bbo.sqlite"))
    assert memfs("search", "one", "-w", str(ws), "--agent", "bob", env=env).returncode == 0


def test_what_a_new_user_hit_on_the_command_line(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}
    write(ws / "memory" / "2026-11-20.md", "one\ntwo\n")
    empty = memfs("sync", "-w", str(ws), env=env, input="")
    assert empty.returncode == 1 and "no sync message on stdin" in empty.stderr and "NO_REPLY" not in empty.stdout
    (tmp_path / "mnt").mkdir()
    twice = memfs("-w", str(tmp_path / "other"), "mount", str(ws), str(tmp_path / "mnt"), env=env)
    assert twice.returncode == 2 and "two workspaces given" in twice.stderr
    for args in (["--from", "0"], ["--lines", "0"]):
        out = memfs("get", "memory/2026-11-20.md", *args, "-w", str(ws), env=env)
        assert out.returncode == 2, args
    folder = memfs("get", "memory", "-w", str(ws), env=env)
    assert folder.returncode == 1 and "is a folder, not a file" in folder.stderr
    here = memfs("get", "2026-11-20.md", cwd=ws / "memory", env=env)  # relative to where you are
    assert here.returncode == 0 and here.stdout == "one\ntwo\n"
    shown = memfs("config", "-w", str(ws), env=env).stdout
    assert re.search(r"^mount\.watch +true +\(default\)$", shown, re.M) and re.search(r"^mount\.xattrs +false ", shown, re.M)
    status = memfs("status", "-w", str(ws), env=env)
    assert "has not been indexed yet" in status.stderr
    context = memfs("context", "Main", "-w", str(ws), env=env)
    assert context.returncode == 0 and context.stdout.startswith("# memfs context: main")


def test_watch_stops_on_ctrl_c_without_a_traceback(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "- fact\n")
    env = {**clean_env(),
           "MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}
    proc = subprocess.Popen([sys.executable, "-m", "memfs", "watch", str(ws)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (tmp_path / "state" / "workspaces").exists():
        time.sleep(0.1)
    time.sleep(1.5)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=30)
    assert "Traceback" not in err and "stopped serving" in err  # watch is serve's earlier name


@pytest.mark.parametrize("verbose", [(), ("-v",)], ids=["fast path", "click"])
def test_index_stopped_by_ctrl_c_says_nothing_is_lost(tmp_path: Path, fake_daemon, verbose: tuple[str, ...]) -> None:
    # Ctrl-C of `memfs index` said click's "Aborted!" only: whether the embedding done was kept
    # was the user's guess.
    from memfs.serve.progress import ABORTED

    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "- fact\n")
    daemon = fake_daemon(ws)  # a mount waiting on its backlog: the command waits with it
    env = {**clean_env(), "MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}
    # As from a terminal: a test run started in the background (CI's, say) passes SIGINT on ignored,
    # and Python then leaves it ignored (no KeyboardInterrupt, Ctrl-C does nothing).
    proc = subprocess.Popen([sys.executable, "-m", "memfs", *verbose, "index", "-w", str(ws)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        assert daemon.indexing.wait(60), "the command never asked the daemon"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 1 and "Traceback" not in err, err
    assert err.splitlines()[-1] == ABORTED, err


def test_stray_bytes_read_the_same_everywhere_and_never_reach_a_prompt(tmp_path: Path) -> None:
    """Random bytes appended to MEMORY.md: get shows the text (marks for the bad bytes, and says
    how many), the bundle holds no control character but newline and tab and says what it left
    out, and b"\\xff\\xfe" looks the same in a snippet, in get and in the bundle."""
    import random

    ws, env = tmp_path / "ws", {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_NO_DAEMON": "1"}
    memfs("init", str(ws), env=env)
    noise = random.Random(7).randbytes(2000)
    with open(ws / "MEMORY.md", "ab") as f:
        f.write(b"\n- Locker code is 4417 \xff\xfe and \x1b[31mred\x1b[0m and \xc2\x9b2J here.\n" + noise + b"\n")
    assert memfs("index", "-w", str(ws), env=env).returncode == 0
    # the undecodable bytes are one mark; the terminal sequences (ESC [ and the C1 CSI) go whole
    shown = "Locker code is 4417 \ufffd and red and  here."

    got = memfs("get", "MEMORY.md", "-w", str(ws), env=env)
    assert got.returncode == 0, got.stderr
    assert shown in got.stdout and "bytes are not text" in got.stderr
    payload = json.loads(memfs("get", "MEMORY.md", "--json", "-w", str(ws), env=env).stdout)
    assert any("not text" in w for w in payload["warnings"])

    context = memfs("context", "main", "-w", str(ws), env=env)
    assert context.returncode == 0 and shown in context.stdout
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f]", context.stdout), "a control character reached the bundle"
    assert re.search(r"\[… memfs: \d+ bytes are not text \(shown as \ufffd\); left out of this text …\]", context.stdout)

    found = json.loads(memfs("search", "--json", "locker code", "-w", str(ws), env=env).stdout)
    assert any(shown in r["snippet"] for r in found["results"]), found
    for out in (got.stdout, context.stdout, json.dumps(found)):
        assert "\x1b" not in out

    # Noise glued to a fact (appended without a newline) drops the noise, not the fact.
    with open(ws / "MEMORY.md", "ab") as f:
        f.write(b"- Garage door code is 5521 " + random.Random(8).randbytes(40) + b"\n")
    memfs("index", "-w", str(ws), env=env)
    got = memfs("get", "MEMORY.md", "-w", str(ws), env=env).stdout
    assert re.search("^- Garage door code is 5521 .*\ufffd$", got, re.M), got
    garage = json.loads(memfs("search", "--json", "garage door code", "-w", str(ws), env=env).stdout)
    assert "Garage door code is 5521" in garage["results"][0]["snippet"], garage


def test_an_old_index_held_by_a_running_mount_is_a_clear_error(tmp_path: Path) -> None:
    """After an upgrade, an index of the earlier memfs still open in its mount cannot be rebuilt:
    a command says so in one line, with no traceback."""
    import fcntl

    import apsw

    ws, state = tmp_path / "ws", tmp_path / "state"
    env = {"MEMFS_STATE_DIR": str(state), "MEMFS_NO_DAEMON": "1"}
    memfs("init", str(ws), env=env)
    assert memfs("index", "-w", str(ws), env=env).returncode == 0
    index = next(state.glob("workspaces/*/main.sqlite"))
    conn = apsw.Connection(str(index))
    conn.execute("UPDATE meta SET value = '4' WHERE key = 'schema'")  # as an earlier memfs left it
    conn.close()
    with open(f"{index}.lock", "a") as held:  # what that earlier mount holds while it runs
        fcntl.flock(held, fcntl.LOCK_SH)
        out = memfs("search", "anything", "-w", str(ws), env=env)
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    last = out.stderr.splitlines()[-1]
    assert last.startswith("Error: ") and "earlier memfs" in last and "in use" in last


def test_reading_commands_do_not_wait_on_a_writer(tmp_path: Path) -> None:
    """A daemon stopped (kill -STOP) in the middle of a write holds SQLite's write lock: status,
    search and get open the index and the history without taking it."""
    import apsw

    ws, state = tmp_path / "ws", tmp_path / "state"
    env = {"MEMFS_STATE_DIR": str(state), "MEMFS_NO_DAEMON": "1"}
    memfs("init", str(ws), env=env)
    assert memfs("index", "-w", str(ws), env=env).returncode == 0
    writers = []
    for db in (next(state.glob("workspaces/*/main.sqlite")), next(state.glob("workspaces/*/main.history.sqlite"))):
        conn = apsw.Connection(str(db))
        conn.execute("BEGIN IMMEDIATE")
        writers.append(conn)
    try:
        for args in (["status"], ["search", "memory"], ["get", "MEMORY.md"]):
            started = time.monotonic()
            out = memfs(*args, "-w", str(ws), env=env)
            assert out.returncode == 0, (args, out.stderr)
            assert time.monotonic() - started < 8, args  # the busy timeout is 10 s
    finally:
        for conn in writers:
            conn.execute("ROLLBACK")
            conn.close()
