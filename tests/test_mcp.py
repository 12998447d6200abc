"""`memfs mcp` driven by the official SDK's own client over stdio: every tool, its errors, and the
same text as the CLI."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from conftest import write
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mounts import clean_env

SYNC = ('[CLAWGPT-SYNC] {"messages": [{"id": "m-9", "chatId": "c1", "chatTitle": "Trip", "role": "user", '
        '"content": "The ferry to Hydra leaves at 7:40", "timestamp": 1793613600000}]}')


def env_for(tmp_path: Path) -> dict[str, str]:
    env = clean_env()
    return {**env, "MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_NO_DAEMON": "1"}


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memfs", *args], capture_output=True, text=True, env=env, timeout=120)


def session_calls(env: dict[str, str], workspace: Path, calls: list[tuple[str, dict[str, Any]]],
                  *extra: str) -> tuple[list[str], list[tuple[bool, str]]]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "memfs", "mcp", "-w", str(workspace), *extra],
                                   env=env)
    results: list[tuple[bool, str]] = []
    names: list[str] = []

    async def main() -> None:
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write_stream):
                async with ClientSession(read, write_stream) as session:
                    await session.initialize()
                    names.extend(t.name for t in (await session.list_tools()).tools)
                    for name, arguments in calls:
                        result = await session.call_tool(name, arguments)
                        results.append((bool(result.is_error), "".join(c.text for c in result.content)))

    anyio.run(main)
    return names, results


def test_every_tool_over_stdio(tmp_path: Path, locomo_day) -> None:
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "# Memory\n\n## Health\n- The user is allergic to penicillin.\n")
    locomo_day(ws)
    env = env_for(tmp_path)
    assert cli("index", "-w", str(ws), env=env).returncode == 0
    # What the CLI prints, before the session changes anything.
    expected = cli("search", "LGBTQ support group", "-w", str(ws), env=env).stdout
    expected_shaped = cli("search", "support group", "-n", "2", "--in", "memory", "--after", "2023-01-01",
                          "-w", str(ws), env=env).stdout
    assert "memory/2023-05-08.md#L" in expected
    names, results = session_calls(env, ws, [
        ("memory_search", {"query": "LGBTQ support group"}),
        ("memory_search", {"query": "support group", "n": 2, "scope": "memory", "after": "2023-01-01"}),
        ("memory_search", {"query": "x", "n": 0}),
        ("memory_get", {"path": "MEMORY.md", "from_line": 3, "lines": 2}),
        ("memory_get", {"path": "../etc/passwd"}),
        ("memory_context", {"mode": "shared"}),
        ("memory_context", {"mode": "everything"}),
        ("memory_append", {"text": "- Prefers the window seat.", "section": "Travel"}),
        ("memory_append", {"text": "- Prefers the window seat.", "section": "Travel", "create_section": True}),
        ("memory_append", {"text": "Booked the ferry for June 3rd."}),
        ("memory_append", {"text": "   "}),
        ("memory_sync", {"message": SYNC}),
        ("memory_sync", {"message": "hello"}),
        ("memory_search", {"query": "window seat", "scope": "MEMORY.md"}),
        ("memory_history", {"path": "MEMORY.md"}),
        ("memory_history", {"path": "MEMORY.md", "diff": True}),
        ("memory_history", {}),
    ])
    assert set(names) == {"memory_search", "memory_get", "memory_context", "memory_append", "memory_sync",
                          "memory_history"}
    (search, shaped, bad_n, got, outside, shared, unknown, no_section, section, daily, empty, synced, not_sync,
     found, versions, newest, no_path) = results
    assert not search[0] and search[1] == expected
    assert not shaped[0] and shaped[1] == expected_shaped
    usage = cli("search", "x", "-n", "0", "-w", str(ws), env=env)
    assert bad_n[0] and "n=0: n must be from 1 to 100" in bad_n[1] and "-n 0: -n must be from 1 to 100" in usage.stderr
    assert not got[0] and got[1] == "## Health\n- The user is allergic to penicillin.\n"
    assert outside[0] and "outside the workspace" in outside[1]
    assert not shared[0] and "penicillin" not in shared[1]
    assert unknown[0] and "unknown context mode" in unknown[1]
    # A section that is not there is not made up on a typo: the error names those there are.
    assert no_section[0] and no_section[1].endswith("MEMORY.md has no section 'Travel': its sections are 'Health'; "
                                                    "name one of them, or pass create_section=true")
    assert not section[0] and section[1] == "appended to section 'Travel' of MEMORY.md\n"
    assert (ws / "MEMORY.md").read_text().count("window seat") == 1
    assert (ws / "MEMORY.md").read_text().endswith("## Travel\n\n- Prefers the window seat.\n")
    assert not daily[0] and daily[1].startswith("appended to memory/20")
    logged = (ws / daily[1].split()[-1]).read_text()
    assert re.search(r"^## \d\d:\d\d - note\n\nBooked the ferry for June 3rd\.\n", logged, re.M)
    assert empty[0] and "nothing to append" in empty[1]
    assert not synced[0] and "stored 1, duplicates 0" in synced[1]
    assert not_sync[0] and "not a [CLAWGPT-SYNC] message" in not_sync[1]
    assert not found[0] and "MEMORY.md#L" in found[1] and "window seat" in found[1]
    # The history, as `memfs history` shows it: the version before the append, and the append by this server.
    assert not versions[0] and versions[1].startswith("MEMORY.md: 2 versions, oldest first\n")
    assert versions[1].rstrip("\n").endswith("via mcp")
    assert not newest[0] and "+- Prefers the window seat." in newest[1]
    assert no_path[0] and "name a memory file" in no_path[1]


def test_a_shared_session_cannot_reach_private_memory(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "# Memory\n- vault combination 4-8-15\n")
    env = env_for(tmp_path)
    _, results = session_calls(env, ws, [
        ("memory_search", {"query": "vault combination", "min_score": 0}),
        ("memory_get", {"path": "MEMORY.md"}),
        ("memory_context", {"mode": "main"}),
        ("memory_append", {"text": "- overwrite", "section": "Vault"}),
        ("memory_history", {"path": "MEMORY.md"}),
        ("memory_history", {"path": "MEMORY.md", "diff": True}),
        ("memory_history", {"deleted": True}),
    ], "--mode", "shared")
    search, got, context, append, versions, diff, deleted = results
    assert not search[0] and "4-8-15" not in search[1] and "No results" in search[1]
    assert got[0] and "4-8-15" not in got[1]
    assert context[0] and "not available in shared mode" in context[1]
    assert append[0] and "4-8-15" not in append[1]
    assert "overwrite" not in (ws / "MEMORY.md").read_text()
    # MEMORY.md has a version (the server recorded it at start), which a shared reader never sees.
    assert versions[0] and "4-8-15" not in versions[1] and "no history" in versions[1]
    assert diff[0] and "4-8-15" not in diff[1]
    assert not deleted[0] and "MEMORY.md" not in deleted[1]
    main_view = cli("history", "MEMORY.md", "-w", str(ws), env=env)
    assert main_view.returncode == 0 and "MEMORY.md: 1 version" in main_view.stdout


def start_serve(ws: Path, env: dict[str, str], tmp_path: Path) -> tuple[subprocess.Popen, float]:
    """`memfs serve ws`, once its socket is announced; and the deadline the test keeps to."""
    import time

    server = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(ws)], env=env,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 90
    while not list((tmp_path / "state" / "run").glob("*.json")):
        if time.monotonic() >= deadline or server.poll() is not None:
            server.kill()
            raise AssertionError("memfs serve never came up")
        time.sleep(0.1)
    return server, deadline


def test_a_running_daemon_answers_the_tools(tmp_path: Path, locomo_day) -> None:
    import json
    import signal
    import time

    ws = tmp_path / "ws"
    locomo_day(ws)
    env = {k: v for k, v in env_for(tmp_path).items() if k != "MEMFS_NO_DAEMON"}
    server, deadline = start_serve(ws, env, tmp_path)
    try:
        while json.loads(cli("status", "--json", "-w", str(ws), env=env).stdout)["pending"]:
            assert time.monotonic() < deadline, "memfs serve never finished embedding"
            time.sleep(0.2)
        expected = cli("search", "LGBTQ support group", "-w", str(ws), env={**env, "MEMFS_NO_DAEMON": "1"}).stdout
        log = tmp_path / "mcp.log"
        params = StdioServerParameters(command=sys.executable, args=["-m", "memfs", "mcp", "-v", "-w", str(ws)],
                                       env=env)
        texts: list[str] = []

        async def main() -> None:
            with open(log, "w") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write_stream):
                    async with ClientSession(read, write_stream) as session:
                        await session.initialize()
                        result = await session.call_tool("memory_search", {"query": "LGBTQ support group"})
                        texts.append("".join(c.text for c in result.content))
                        result = await session.call_tool("memory_append", {"text": "Booked the ferry."})
                        texts.append("".join(c.text for c in result.content))
                        result = await session.call_tool("memory_history", {"path": texts[-1].split()[-1]})
                        texts.append("".join(c.text for c in result.content))

        anyio.run(main)
        logged = log.read_text()
        assert f"search answered by the daemon with pid {server.pid}" in logged
        assert f"append answered by the daemon with pid {server.pid}" in logged
        mcp_pid = int(re.search(r"memfs\[(\d+)\] INFO memfs: search answered", logged).group(1))
        # The daemon wrote it, for the MCP server: the version names the server's process.
        daily = texts[1].split()[-1]
        listed = json.loads(cli("history", daily, "--json", "-w", str(ws), env=env).stdout)
        newest = listed["versions"][-1]
        assert (newest["pid"], newest["via"]) == (mcp_pid, "mcp") and newest["process"].startswith("python")
        assert f"(pid {mcp_pid}, uid {os.getuid()}) via mcp" in texts[2]
        assert texts[0] == expected
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=60)


def minimal_env(tmp_path: Path) -> dict[str, str]:
    """What an MCP client gives the server it starts: hardly anything of the user's shell."""
    home = tmp_path / "home"
    home.mkdir(exist_ok=True)
    # PYTHONPATH passed on when set: the server must run the memfs under test (a worktree's),
    # not whichever one is installed (a real client sets none).
    kept = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    return {"PATH": os.environ["PATH"], "HOME": str(home), "MEMFS_STATE_DIR": str(tmp_path / "state"), **kept}


async def poll_search(session: ClientSession, query: str, wanted: str, timeout: float = 90) -> str:
    """memory_search until its answer holds ``wanted`` from a reconciled index (the last answer
    either way)."""
    deadline = anyio.current_time() + timeout
    while True:
        result = await session.call_tool("memory_search", {"query": query})
        text = "".join(c.text for c in result.content)
        if (wanted in text and "not been indexed" not in text) or anyio.current_time() > deadline:
            return text
        await anyio.sleep(0.3)


def test_mcp_alone_keeps_its_index_current(tmp_path: Path) -> None:
    """No mount, no `memfs serve`, never `memfs index`: the MCP server reconciles at start and
    sees what is written beside it while it runs."""
    ws = tmp_path / "ws"
    write(ws / "memory" / "2026-01-01.md", "# 2026-01-01\n\nThe spare key hangs behind the barometer.\n")
    env = minimal_env(tmp_path)
    params = StdioServerParameters(command=sys.executable, args=["-m", "memfs", "mcp", "-w", str(ws)], env=env)
    answers: list[str] = []

    async def main() -> None:
        with open(tmp_path / "mcp.log", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write_stream):
                async with ClientSession(read, write_stream) as session:
                    await session.initialize()
                    answers.append(await poll_search(session, "spare key barometer", "2026-01-01.md#L"))
                    write(ws / "memory" / "2026-01-02.md", "# 2026-01-02\n\nThe zeppelin hangar opens at dawn.\n")
                    answers.append(await poll_search(session, "zeppelin hangar", "2026-01-02.md#L"))
                    (ws / "memory" / "2026-01-01.md").unlink()
                    answers.append(await poll_search(session, "spare key barometer", "No results"))

    anyio.run(main)
    before, edited, removed = answers
    assert "memory/2026-01-01.md#L" in before and "barometer" in before and "not been indexed" not in before
    assert "memory/2026-01-02.md#L" in edited and "zeppelin hangar" in edited
    assert "No results" in removed and "2026-01-01.md" not in removed


def test_mcp_defers_to_a_daemon_and_takes_over_when_it_stops(tmp_path: Path) -> None:
    import json
    import signal

    ws = tmp_path / "ws"
    write(ws / "memory" / "2026-01-01.md", "# 2026-01-01\n\nThe spare key hangs behind the barometer.\n")
    env = minimal_env(tmp_path)
    server, deadline = start_serve(ws, env, tmp_path)
    try:
        log = tmp_path / "mcp.log"
        params = StdioServerParameters(command=sys.executable, args=["-m", "memfs", "mcp", "-v", "-w", str(ws)],
                                       env=env)
        answers: list[str] = []
        records: list[dict] = []

        async def main() -> None:
            with open(log, "w") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write_stream):
                    async with ClientSession(read, write_stream) as session:
                        await session.initialize()
                        answers.append(await poll_search(session, "spare key barometer", "2026-01-01.md#L"))
                        server.send_signal(signal.SIGTERM)
                        server.wait(timeout=60)
                        write(ws / "memory" / "2026-01-02.md", "# 2026-01-02\n\nThe zeppelin hangar opens at dawn.\n")
                        answers.append(await poll_search(session, "zeppelin hangar", "2026-01-02.md#L"))
                        records.extend(json.loads(p.read_text()) for p in (tmp_path / "state" / "run").glob("*.json"))

        anyio.run(main)
        text = log.read_text()
        assert f"search answered by the daemon with pid {server.pid}" in text
        assert "a daemon serves" in text and "this MCP server keeps its index current" in text
        assert "2026-01-01.md#L" in answers[0]
        assert "2026-01-02.md#L" in answers[1]
        # It answers the CLI in the daemon's place, and withdrew when it stopped.
        assert [r["pid"] for r in records] != [server.pid] and len(records) == 1
        assert not list((tmp_path / "state" / "run").glob("*.json"))
    finally:
        if server.poll() is None:
            server.send_signal(signal.SIGTERM)
            server.wait(timeout=60)


GIFT = "\n".join([
    '{"id": "g-1", "chatId": "c7", "chatTitle": "Presents", "role": "user", "content": "What should I give my '
    'sister as a birthday gift? She loves gardening.", "timestamp": 1793613600000}',
    '{"id": "g-2", "chatId": "c7", "chatTitle": "Presents", "role": "assistant", "content": "A Japanese pruning '
    'saw or a kneeling pad: both are presents a gardener uses every week.", "timestamp": 1793613660000}',
]) + "\n"


@pytest.mark.fuse
def test_the_mount_the_cli_and_mcp_answer_a_question_alike(tmp_path: Path, mount_factory, locomo_day) -> None:
    """One set of search settings for every front end: the workspace's own, whoever asks and from
    wherever (an MCP server started from / with a minimal environment included)."""
    import json
    import time

    ws = tmp_path / "ws"
    locomo_day(ws)
    write(ws / "clawgpt-memory" / "2026-11-03.jsonl", GIFT)
    write(ws / ".memfs.toml", "[search]\nmin_score = 0.3\nmax_results = 3\nsnippet_chars = 400\n")
    mounted = mount_factory(ws)
    env = {**minimal_env(tmp_path), "MEMFS_STATE_DIR": str(mounted.state)}
    deadline = time.monotonic() + 120
    while json.loads(cli("status", "--json", "-w", str(ws), env=env).stdout)["pending"]:
        assert time.monotonic() < deadline, "the mount never finished embedding"
        time.sleep(0.3)
    through_mount = (mounted.mnt / "search" / "gift.md").read_text()
    alone = cli("search", "gift", "-w", str(ws), env={**env, "MEMFS_NO_DAEMON": "1"}).stdout
    answers: list[str] = []
    for extra in ({}, {"MEMFS_NO_DAEMON": "1"}):  # asking the mount, and answering in its own process
        params = StdioServerParameters(command=sys.executable, args=["-m", "memfs", "mcp", "-w", str(ws)],
                                       env={**env, **extra}, cwd="/")

        async def main() -> None:
            with open(os.devnull, "w") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write_stream):
                    async with ClientSession(read, write_stream) as session:
                        await session.initialize()
                        result = await session.call_tool("memory_search", {"query": "gift"})
                        answers.append("".join(c.text for c in result.content))

        anyio.run(main)
    # The question, with its answer when the two read alike (late chunking pools both in one chunk).
    assert re.search(r"clawgpt-memory/2026-11-03\.jsonl#L1-L[12]\b", through_mount), through_mount
    assert "birthday gift" in through_mount
    assert alone == through_mount
    assert answers == [through_mount, through_mount]
