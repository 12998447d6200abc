"""`memfs hook RUNTIME EVENT`, driven as the runtimes drive it: their JSON on stdin (Codex's notify:
as the last argument), the exit status, a second at most, nothing printed but the context added.
Session start adds the bundle (a shared mode's without MEMORY.md); a prompt gets recall only
when recall.on_prompt is on; compaction, turn ends and session ends capture the transcript's new
part, searchable at once (through a mount within a second); problems show in `memfs status`."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import SECRET, write
from mounts import clean_env, memfs_cli, wait_until

from memfs.index.text import tokens

DATA = Path(__file__).resolve().parent / "data" / "transcripts"
LIMIT_S = 1.0
SID = "5b0c5e2e-8f5e-4d57-9a51-2d7e3f0c1a01"  # the Claude Code fixture's session


def env_for(tmp_path: Path, **more: str) -> dict[str, str]:
    return {**clean_env(), "MEMFS_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path / "home"), **more}


def hook(tmp_path: Path, ws: Path, runtime: str, event: str, payload: object = None, *args: str,
         env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, float]:
    """Run the hook as a runtime does; (the process, its wall time)."""
    data = payload if isinstance(payload, bytes) else b"" if payload is None else json.dumps(payload).encode()
    began = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "memfs", "hook", runtime, event, *args, "-w", str(ws)],
                          check=False, input=data, capture_output=True, env=env or env_for(tmp_path), timeout=30)
    return done, time.monotonic() - began


def added(done: subprocess.CompletedProcess, event: str) -> str:
    """The context a hook added ("" for none), checking the output is the one form runtimes read."""
    assert done.returncode == 0 and done.stderr == b"", done.stderr
    if not done.stdout:
        return ""
    out = json.loads(done.stdout)
    assert set(out) == {"hookSpecificOutput"} and out["hookSpecificOutput"]["hookEventName"] == event
    return out["hookSpecificOutput"]["additionalContext"]


def hook_notes(tmp_path: Path, ws: Path) -> dict:
    out = memfs_cli("status", "--json", "-w", str(ws), env=env_for(tmp_path))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout).get("hooks") or {}


def ran(tmp_path: Path, ws: Path, name: str, since: str) -> dict | None:
    """The note of hook ``name`` from a run at or after ``since`` (an ISO time), once its worker is done."""
    found = hook_notes(tmp_path, ws).get("runs", {}).get(name)
    return found if found and found["at"] >= since else None


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 1))


@pytest.fixture
def ws(cli_workspace: Path) -> Path:
    return cli_workspace


@pytest.fixture
def daemon(tmp_path: Path, ws: Path) -> Iterator[subprocess.Popen]:
    """`memfs serve` for the workspace, up and answering; stopped by its pid after the test."""
    proc = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(ws)], env=env_for(tmp_path),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: memfs_cli("status", "-w", str(ws), env=env_for(tmp_path)).stdout.count(
            f"pid {proc.pid}") > 0, timeout=120)
        yield proc
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def transcript(path: Path, *turns: tuple[str, str], tail: str = "", start: int = 0) -> None:
    """A Claude Code transcript of (prompt, answer) turns, in its real record shape."""
    lines = []
    for n, (prompt, answer) in enumerate(turns, start):
        base = {"parentUuid": None, "isSidechain": False, "userType": "external", "cwd": "/home/ada/src/kettle",
                "sessionId": SID, "version": "2.0.31", "gitBranch": "main"}
        lines.append({**base, "type": "user", "uuid": f"u-{n}", "timestamp": f"2025-11-03T10:{n:02d}:00.000Z",
                      "message": {"role": "user", "content": prompt}})
        lines.append({**base, "type": "assistant", "uuid": f"a-{n}", "timestamp": f"2025-11-03T10:{n:02d}:30.000Z",
                      "message": {"id": f"msg-{n}", "type": "message", "role": "assistant", "model": "claude",
                                  "content": [{"type": "text", "text": answer}]}})
    with open(path, "a", encoding="utf-8") as out:
        out.write("".join(json.dumps(r) + "\n" for r in lines) + tail)


def payload(path: Path, event: str, **more: str) -> dict:
    return {"session_id": SID, "transcript_path": str(path), "cwd": "/home/ada/src/kettle",
            "hook_event_name": event, **more}


def search(tmp_path: Path, ws: Path, query: str) -> list[dict]:
    out = memfs_cli("search", "--json", query, "-w", str(ws), env=env_for(tmp_path))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["results"]


# --- session start -----------------------------------------------------------------------------

def test_session_start_adds_the_bundle_in_time_from_a_daemon(tmp_path: Path, ws: Path, daemon) -> None:
    for source in ("startup", "compact"):
        done, took = hook(tmp_path, ws, "claude-code", "SessionStart", {"session_id": SID, "source": source,
                                                                          "hook_event_name": "SessionStart"})
        context = added(done, "SessionStart")
        assert took < LIMIT_S, took
        assert SECRET in context and "Read MEMORY.md first." in context and "memfs search" in context
        assert ("--in sessions/claude-code" in context) == (source == "compact")
    for runtime, event in (("codex", "SessionStart"), ("gemini", "SessionStart")):
        done, took = hook(tmp_path, ws, runtime, event, {"session_id": "s", "source": "startup"})
        assert SECRET in added(done, event) and took < LIMIT_S


def test_a_shared_mode_hook_adds_nothing_from_memory_md(tmp_path: Path, ws: Path, daemon) -> None:
    done, took = hook(tmp_path, ws, "claude-code", "SessionStart", {"source": "startup"}, "--mode", "shared")
    context = added(done, "SessionStart")
    assert "Read MEMORY.md first." in context and SECRET not in context and took < LIMIT_S


def test_with_no_daemon_it_still_exits_in_time_and_says_why_nothing_came(tmp_path: Path, ws: Path) -> None:
    since = now()
    done, took = hook(tmp_path, ws, "claude-code", "SessionStart", {"source": "startup"})
    assert done.returncode == 0 and took < LIMIT_S, took
    context = added(done, "SessionStart")  # none, or (a fast machine) the whole bundle: never half
    assert context == "" or SECRET in context
    assert wait_until(lambda: ran(tmp_path, ws, "claude-code SessionStart", since), timeout=60)
    note = ran(tmp_path, ws, "claude-code SessionStart", since)
    if not context:
        assert "ready after the hook had exited" in note["problem"]
        status = memfs_cli("status", "-w", str(ws), env=env_for(tmp_path)).stdout
        assert "problem:    hook claude-code SessionStart at" in status


# --- bad input ---------------------------------------------------------------------------------

@pytest.mark.parametrize("data", [b"", b"{", b"not json at all", b"[1, 2]", b'{"session_id": "x", "transcript_pa',
                                  b"\xff\xfe\x00garbage" * 1000, b"{" * (5 << 20)],
                         ids=["empty", "brace", "text", "array", "half-written", "binary", "5 MB"])
def test_bad_input_never_breaks_the_agent(tmp_path: Path, ws: Path, data: bytes) -> None:
    for event in ("PreCompact", "Stop"):
        done, took = hook(tmp_path, ws, "claude-code", event, data)
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"") and took < LIMIT_S, took


def test_unknown_events_and_missing_workspaces_are_noted_not_raised(tmp_path: Path, ws: Path) -> None:
    since = now()
    done, took = hook(tmp_path, ws, "claude-code", "PostToolUse", {"tool_name": "Bash"})
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"") and took < LIMIT_S
    assert wait_until(lambda: any("has no hook event 'PostToolUse'" in p["problem"]
                                  for p in hook_notes(tmp_path, ws).get("problems", [])), timeout=60)
    gone = tmp_path / "no-such-ws"
    done, took = hook(tmp_path, gone, "claude-code", "SessionStart", {"source": "startup"})
    assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"") and took < LIMIT_S
    note = tmp_path / "state" / "hooks.json"
    assert wait_until(lambda: note.exists() and f"workspace {gone} does not exist" in note.read_text(), timeout=60)
    assert since


# --- capture -----------------------------------------------------------------------------------

def test_a_growing_session_is_searchable_after_each_compaction(tmp_path: Path, ws: Path, daemon) -> None:
    path = tmp_path / "home" / ".claude" / "projects" / "-home-ada-src-kettle" / f"{SID}.jsonl"
    path.parent.mkdir(parents=True)
    steps = [("Where does the kettle firmware keep the boil-dry cutoff?",
              "The cutoff constant DRY_LIMIT_C sits in firmware/thermal.c and is set to 140 degrees."),
             ("Which thermistor does the base board use?",
              "The base board carries an NTC thermistor, part number KTY-8812, read on ADC channel 3."),
             ("How long does the descaling cycle run?",
              "The descaling cycle pumps citric solution for exactly 17 minutes before it rinses twice.")]
    queries = ["boil-dry cutoff constant", "thermistor part number", "descaling cycle minutes"]
    facts = ["DRY_LIMIT_C", "KTY-8812", "17 minutes"]
    kept = b""
    for n, step in enumerate(steps):
        # Each step ends with the next record half-written, as a runtime leaves it mid-write.
        half = '{"parentUuid": null, "type": "user", "uuid": "half'
        text = path.read_text() if path.exists() else ""
        path.write_text(text.removesuffix(half))
        transcript(path, step, tail=half, start=n)
        done, took = hook(tmp_path, ws, "claude-code", "PreCompact", payload(path, "PreCompact", trigger="auto"))
        assert (done.returncode, done.stdout, done.stderr) == (0, b"", b"") and took < LIMIT_S, took
        files = list((ws / "sessions" / "claude-code" / "src-kettle").glob("*.jsonl"))
        assert len(files) == 1
        data = files[0].read_bytes()
        assert data.startswith(kept)  # only ever appended to
        kept = data
        for query, fact in zip(queries[: n + 1], facts[: n + 1]):
            assert fact.encode() in data
            assert any(fact in r["snippet"] for r in search(tmp_path, ws, query)), (query, n)
    # Fired again with nothing new: nothing is added.
    done, _ = hook(tmp_path, ws, "claude-code", "Stop", payload(path, "Stop"))
    time.sleep(0.5)
    assert files[0].read_bytes() == kept
    assert wait_until(lambda: "had not changed" in str(hook_notes(tmp_path, ws)["runs"].get("claude-code Stop")),
                      timeout=30)


def test_a_5_mb_tool_output_is_captured_as_its_head_in_time(tmp_path: Path, ws: Path, daemon) -> None:
    path = tmp_path / "s.jsonl"
    transcript(path, ("Run the soak test and show me the log", "Running it now."))
    huge = "x" * (5 << 20)
    record = {"parentUuid": None, "isSidechain": False, "type": "user", "uuid": "u-out", "sessionId": SID,
              "cwd": "/home/ada/src/kettle", "timestamp": "2025-11-03T10:05:00.000Z",
              "message": {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
                                                       "content": "soak test passed 4000 cycles\n" + huge}]}}
    with open(path, "a") as out:
        out.write(json.dumps(record) + "\n")
    done, took = hook(tmp_path, ws, "claude-code", "PreCompact", payload(path, "PreCompact"))
    assert (done.returncode, done.stdout) == (0, b"") and took < LIMIT_S, took
    assert wait_until(lambda: list((ws / "sessions").rglob("*.jsonl")), timeout=30)
    (file,) = (ws / "sessions").rglob("*.jsonl")
    assert wait_until(lambda: b"soak test passed 4000 cycles" in file.read_bytes(), timeout=30)
    assert file.stat().st_size < 20_000


def test_turn_ends_are_captured_without_a_daemon_after_the_hook_returns(tmp_path: Path, ws: Path) -> None:
    path = tmp_path / "s.jsonl"
    transcript(path, ("Note that the spare gasket is in drawer nine", "Noted: the spare gasket is in drawer nine."))
    done, took = hook(tmp_path, ws, "claude-code", "Stop", payload(path, "Stop"))
    assert (done.returncode, done.stdout) == (0, b"") and took < 0.6, took  # a turn's end is not waited for
    assert wait_until(lambda: list((ws / "sessions").rglob("*.jsonl")), timeout=60)
    assert wait_until(lambda: any("drawer nine" in r["snippet"] for r in search(tmp_path, ws, "spare gasket drawer")),
                      timeout=60)


def test_codex_notify_finds_its_rollout_by_thread_id(tmp_path: Path, ws: Path, daemon) -> None:
    codex_home = tmp_path / "codex"
    thread = "0199aa00-1111-7222-8333-944455556666"  # the Codex fixture's session
    write(codex_home / "sessions" / "2025" / "10" / "20" / f"rollout-2025-10-20T09-00-00-{thread}.jsonl",
          (DATA / "codex-new.jsonl").read_text(encoding="utf-8"))
    env = env_for(tmp_path, CODEX_HOME=str(codex_home))
    other = json.dumps({"type": "approval-requested", "thread-id": thread})
    done, took = hook(tmp_path, ws, "codex", "notify", None, other, env=env)
    assert (done.returncode, done.stdout) == (0, b"") and took < LIMIT_S
    turn = json.dumps({"type": "agent-turn-complete", "thread-id": thread, "turn-id": "t1", "cwd": "/home/ada/src/loom",
                       "input-messages": ["hi"], "last-assistant-message": "done"})
    done, took = hook(tmp_path, ws, "codex", "notify", None, turn, env=env)
    assert (done.returncode, done.stdout) == (0, b"") and took < LIMIT_S
    assert wait_until(lambda: list((ws / "sessions" / "codex").rglob("*.jsonl")), timeout=30)
    assert len(list((ws / "sessions" / "codex").rglob("*.jsonl"))) == 1


def test_gemini_captures_its_jsonl_chat_after_a_turn(tmp_path: Path, ws: Path, daemon) -> None:
    chat = write(tmp_path / "home" / ".gemini" / "tmp" / "p" / "chats" / "session-1.jsonl",
                 (DATA / "gemini-chat.jsonl").read_text(encoding="utf-8"))
    done, took = hook(tmp_path, ws, "gemini", "AfterAgent", {"session_id": "s", "transcript_path": str(chat),
                                                              "cwd": "/x", "hook_event_name": "AfterAgent"})
    assert (done.returncode, done.stdout) == (0, b"") and took < LIMIT_S
    assert wait_until(lambda: list((ws / "sessions" / "gemini").rglob("*.jsonl")), timeout=30)


def test_through_a_mount_each_step_is_found_within_a_second(tmp_path: Path, ws: Path, mount_factory) -> None:
    mounted = mount_factory(ws)
    env = {**clean_env(), "MEMFS_STATE_DIR": str(mounted.state)}  # the mount's own HOME: it answers the hook
    path = tmp_path / "s.jsonl"
    steps = [(("Which courier takes the kettle returns?", "Returns go with the courier Brightpost from dock 4."),
              "Brightpost"),
             (("What voltage does the heating element take?", "The element is rated for 230 volts at 2.2 kilowatts."),
              "2.2 kilowatts")]
    for n, (turn, fact) in enumerate(steps):
        transcript(path, turn, start=n)
        done, took = hook(tmp_path, ws, "claude-code", "PreCompact", payload(path, "PreCompact"), env=env)
        assert (done.returncode, done.stdout) == (0, b"") and took < LIMIT_S, took
        began = time.monotonic()
        query = mounted.mnt / "search" / f"{turn[0].rstrip('?')}.md"
        assert wait_until(lambda q=query, f=fact: f in q.read_text(), timeout=1.0), query.read_text()
        assert time.monotonic() - began <= 1.2
    notes = json.loads((next((mounted.state / "workspaces").glob("*/hooks.json"))).read_text())
    assert notes["runs"]["claude-code PreCompact"]["seconds"] < 0.5  # answered by the mount, in time


# --- recall on a prompt ------------------------------------------------------------------------

def test_recall_is_off_until_switched_on_then_adds_what_passes_within_its_budget(tmp_path: Path, ws: Path) -> None:
    def serve() -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(ws)], env=env_for(tmp_path),
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_until(lambda: f"pid {proc.pid}" in memfs_cli("status", "-w", str(ws), env=env_for(tmp_path)).stdout,
                          timeout=120)
        return proc

    def stop(proc: subprocess.Popen) -> None:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)

    asked = {"session_id": SID, "hook_event_name": "UserPromptSubmit", "prompt": "What is the user allergic to?"}
    proc = serve()
    try:
        done, took = hook(tmp_path, ws, "claude-code", "UserPromptSubmit", asked)
        assert added(done, "UserPromptSubmit") == "" and took < LIMIT_S
    finally:
        stop(proc)
    write(tmp_path / "home" / ".config" / "memfs" / "config.toml", "[recall]\non_prompt = true\nmax_tokens = 120\n")
    proc = serve()
    try:
        # The daemon's first search loads the embedding model (a second or two): a daemon that has
        # been answering has it loaded.  (The first recall of a new daemon comes too late, and says so.)
        search(tmp_path, ws, "warm up")
        for _ in range(3):  # on a loaded machine a search may still miss the budget once: it then says so
            done, took = hook(tmp_path, ws, "claude-code", "UserPromptSubmit", asked)
            context = added(done, "UserPromptSubmit")
            assert took < LIMIT_S
            if context:
                break
            assert wait_until(lambda: "ready after the hook had exited" in str(
                hook_notes(tmp_path, ws).get("runs", {}).get("claude-code UserPromptSubmit")), timeout=30)
        assert SECRET in context and "MEMORY.md#L" in context, context
        assert tokens.count(context) <= 120
        unrelated = {**asked, "prompt": "Translate 'good morning' into Portuguese and Basque"}
        done, _ = hook(tmp_path, ws, "claude-code", "UserPromptSubmit", unrelated)
        assert added(done, "UserPromptSubmit") == ""
        done, _ = hook(tmp_path, ws, "gemini", "BeforeAgent", asked, "--mode", "shared")
        assert SECRET not in added(done, "BeforeAgent")
        done, _ = hook(tmp_path, ws, "claude-code", "UserPromptSubmit", {**asked, "prompt": "yes"})
        assert added(done, "UserPromptSubmit") == ""
    finally:
        stop(proc)
