"""Runtime transcripts as memory: a Claude Code, Codex or Gemini CLI session file copied into
sessions/ as it is is recognised by its content, indexed as its messages (prompts, answers, each
tool call as one line, a tool's output cut), shown with its session (title, runtime, project,
date), read back by `memfs get --messages`; a file of no known format is said, not silent; a
credential is masked in the index, its snippets and the bundle, never in the file."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from conftest import write
from mounts import memfs_cli

DATA = Path(__file__).parent / "data" / "transcripts"
ENV_NONE = {"MEMFS_EMBEDDING_PROVIDER": "none"}  # keyword search: what is indexed, not how it ranks


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {"MEMFS_STATE_DIR": str(tmp_path / "state"), **extra}


def _search(ws: Path, env: dict[str, str], query: str, *flags: str) -> dict:
    out = memfs_cli("search", "--json", query, "-w", str(ws), "--min-score", "0", *flags, env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.fixture
def sessions_ws(workspace: Path) -> Path:
    (workspace / "sessions" / "codex").mkdir(parents=True)
    shutil.copy(DATA / "claude-code.jsonl", workspace / "sessions" / "kettle.jsonl")
    shutil.copy(DATA / "codex-new.jsonl", workspace / "sessions" / "codex" / "rollout-loom.jsonl")
    shutil.copy(DATA / "gemini-chat.json", workspace / "sessions" / "gemini-dashboard.json")
    return workspace


def test_runtime_transcripts_copied_as_they_are_are_indexed(sessions_ws: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, **ENV_NONE)
    out = memfs_cli("index", "-w", str(sessions_ws), env=env)
    assert out.returncode == 0, out.stderr
    # Claude Code: an answer's fact, under its session's title with runtime, project and day.
    found = _search(sessions_ws, env, "DRY_LIMIT_C sensor saturates")["results"]
    top = found[0]
    assert top["path"] == "sessions/kettle.jsonl" and "sensor saturates at 125" in top["snippet"]
    assert top["chat_title"] == "Kettle firmware: fix the boil-dry cutoff (claude-code, src/kettle, 2025-11-03)"
    assert top["session"] == {"runtime": "claude-code", "title": "Kettle firmware: fix the boil-dry cutoff",
                              "project": "/home/ada/src/kettle", "started": "2025-11-03T09:00:00+00:00"}
    # A tool call is one line; a thinking block's signature never reaches the index.
    calls = _search(sessions_ws, env, "Grep DRY_LIMIT_C firmware")["results"]
    assert any("Tool call: Grep: DRY_LIMIT_C in firmware" in r["snippet"] for r in calls)
    raw = (sessions_ws / "sessions" / "kettle.jsonl").read_text()
    assert '"signature"' in raw
    every = json.dumps(_search(sessions_ws, env, "kettle thermal cutoff", "-n", "100"))
    assert '"signature"' not in every and "signature" not in every.lower().replace("signatures", "")
    # Codex, filed in a folder of its own (how memfs import files it: `in=` scopes to it).
    codex = _search(sessions_ws, env, "tie-break equal deadlines", "--in", "sessions/codex")["results"]
    assert codex and all(r["path"].startswith("sessions/codex/") for r in codex)
    assert codex[0]["session"]["runtime"] == "codex" and codex[0]["session"]["project"] == "/home/ada/src/loom"
    # Gemini CLI's saved chat: one JSON document.
    gemini = _search(sessions_ws, env, "build time dashboard")["results"]
    assert any(r["path"] == "sessions/gemini-dashboard.json" for r in gemini)
    status = memfs_cli("status", "--json", "-w", str(sessions_ws), env=env)
    assert json.loads(status.stdout)["problems"] == []


def test_codex_twins_are_indexed_once(sessions_ws: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, **ENV_NONE)
    assert memfs_cli("index", "-w", str(sessions_ws), env=env).returncode == 0
    got = memfs_cli("get", "sessions/codex/rollout-loom.jsonl", "--messages", "-w", str(sessions_ws), env=env)
    assert got.returncode == 0, got.stderr
    assert got.stdout.count("Tests pass: 41 passed.") == 1  # a response_item and its event_msg twin
    assert got.stdout.startswith("# The loom scheduler drops jobs")
    assert "(codex, src/loom, 2025-10-20)" in got.stdout.splitlines()[0]


def test_get_messages_reads_a_cited_span_of_a_runtime_file(sessions_ws: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, **ENV_NONE)
    assert memfs_cli("index", "-w", str(sessions_ws), env=env).returncode == 0
    top = _search(sessions_ws, env, "DRY_LIMIT_C sensor saturates")["results"][0]
    got = memfs_cli("get", top["path"], "--from", str(top["chunk_start_line"]), "--lines",
                    str(top["chunk_end_line"] - top["chunk_start_line"] + 1), "--messages", "-w", str(sessions_ws),
                    env=env)
    assert got.returncode == 0, got.stderr
    assert "Assistant: Found it: DRY_LIMIT_C is 140" in got.stdout and '"type"' not in got.stdout


def test_a_session_file_of_no_known_format_is_said(workspace: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, **ENV_NONE)
    write(workspace / "sessions" / "notes.jsonl", '{"kind": "note", "body": "not a transcript"}\n')
    out = memfs_cli("index", "-w", str(workspace), env=env)
    assert out.returncode == 0 and "no messages read" in out.stderr
    problems = json.loads(memfs_cli("status", "--json", "-w", str(workspace), env=env).stdout)["problems"]
    assert [p["path"] for p in problems] == ["sessions/notes.jsonl"] and "no messages read" in problems[0]["warning"]


def test_the_import_format_names_its_session(workspace: Path, tmp_path: Path) -> None:
    """What memfs import and the hooks write: OpenClaw's JSONL with the session named in its header."""
    env = _env(tmp_path, **ENV_NONE)
    rows = [{"type": "session", "id": "claude-code:abc", "timestamp": "2026-11-20T10:00:00Z",
             "title": "Rotate the staging certificates", "cwd": "/home/ada/src/infra", "runtime": "claude-code"},
            {"type": "message", "id": "m1", "timestamp": "2026-11-20T10:00:05Z", "kind": "prompt",
             "message": {"role": "user", "content": "The staging certificate expires Friday; rotate it."}},
            {"type": "message", "id": "m2", "timestamp": "2026-11-20T10:01:00Z", "kind": "tool_call",
             "message": {"role": "assistant", "content": "Bash: certbot renew --cert-name staging"}}]
    write(workspace / "sessions" / "claude-code" / "src-infra" / "2026-11-20-abc.jsonl",
          "".join(json.dumps(r) + "\n" for r in rows))
    assert memfs_cli("index", "-w", str(workspace), env=env).returncode == 0
    found = _search(workspace, env, "certbot renew staging")["results"]
    assert found[0]["chat_title"] == "Rotate the staging certificates (claude-code, src/infra, 2026-11-20)"
    assert "Tool call: Bash: certbot renew --cert-name staging" in found[0]["snippet"]
    assert found[0]["session"]["project"] == "/home/ada/src/infra"


def test_a_pasted_key_is_masked_in_the_index_and_the_bundle(workspace: Path, tmp_path: Path) -> None:
    env = _env(tmp_path, **ENV_NONE, MEMFS_BUNDLE_TIMEZONE="UTC")
    key = "sk-proj-" + "Q7fX2mLp9RtV4sZ8kWn3bYc6" + "Hj1Ud5Ge0Ta"
    import datetime as dt

    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    note = f"# {today}\n\n- Deploy notes: set OPENAI_API_KEY={key} on the staging box.\n"
    write(workspace / "memory" / f"{today}.md", note)
    assert memfs_cli("index", "-w", str(workspace), env=env).returncode == 0
    found = _search(workspace, env, "deploy notes staging box OPENAI_API_KEY")["results"]
    assert found and key not in json.dumps(found) and "sk-proj-…[masked]" in found[0]["snippet"]
    bundle = memfs_cli("context", "main", "-w", str(workspace), env=env)
    assert bundle.returncode == 0 and key not in bundle.stdout and "Deploy notes" in bundle.stdout
    assert (workspace / "memory" / f"{today}.md").read_text() == note  # the file stays as written
    got = memfs_cli("get", f"memory/{today}.md", "-w", str(workspace), env=env)
    assert key in got.stdout  # `memfs get` reads the file itself
