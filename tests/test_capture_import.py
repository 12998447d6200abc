"""`memfs import RUNTIME PATH...`: every runtime's sessions into sessions/<runtime>/<project>/,
appending only what is new, secrets masked, bad records counted and named, a runtime's default
folder searched, memory bounded on a big export, through a mount when one serves the workspace."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import write
from mounts import clean_env, memfs_cli, wait_until

from memfs.capture import layout
from memfs.workspace import init_workspace

DATA = Path(__file__).resolve().parent / "data" / "transcripts"
FAKE_KEY = "sk-proj-FAKE0fake1FAKE2fake3FAKE4fake5FAKE6fake7FAKE8fake9"  # in the fixtures (make.py)

FORMATS = [  # (the name memfs import takes, fixture, the folder its sessions go to, sessions, a word said in it)
    ("claude-code", "claude-code.jsonl", "sessions/claude-code/src-kettle", 1, "DRY_LIMIT_C"),
    ("codex", "codex-new.jsonl", "sessions/codex/src-loom", 1, "loom"),
    ("codex", "codex-old.jsonl", "sessions/codex/no-project", 1, ""),
    ("codex", "codex-snapshot.json", "sessions/codex/no-project", 1, ""),
    ("gemini", "gemini-chat.json", "sessions/gemini", 1, ""),
    ("gemini", "gemini-chat.jsonl", "sessions/gemini", 1, ""),
    ("gemini", "gemini-checkpoint.json", "sessions/gemini", 1, ""),
    ("aider", "aider.chat.history.md", "sessions/aider/data-transcripts", 2, ""),  # where aider ran: the file's folder
    ("chatgpt", "chatgpt-conversations.json", "sessions/chatgpt/no-project", 2, ""),
    ("chatgpt", "chatgpt-export.zip", "sessions/chatgpt/no-project", 2, ""),
    ("claude", "claude-ai-conversations.json", "sessions/claude-ai/no-project", 1, ""),
]


def env_for(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"MEMFS_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path / "home"), **more}


def run_import(tmp_path: Path, ws: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    return memfs_cli("import", *args, "-w", str(ws), env=env_for(tmp_path, **env))


def session_files(ws: Path) -> dict[str, bytes]:
    return {p.relative_to(ws).as_posix(): p.read_bytes() for p in sorted((ws / "sessions").rglob("*.jsonl"))}


def records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.mark.parametrize("name,fixture,folder,sessions,word", FORMATS, ids=[f[1] for f in FORMATS])
def test_each_format_is_imported_once_masked_and_in_the_session_format(tmp_path: Path, workspace: Path, name: str,
                                                                      fixture: str, folder: str, sessions: int,
                                                                      word: str) -> None:
    first = run_import(tmp_path, workspace, name, str(DATA / fixture), "--no-index")
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith(f"imported {sessions} session"), first.stdout
    files = session_files(workspace)
    assert len(files) == sessions and all(f.startswith(folder) for f in files), files
    for rel, data in files.items():
        lines = records(workspace / rel)
        head, messages = lines[0], [r for r in lines[1:] if r["type"] == "message"]
        assert head["type"] == "session" and head["id"].startswith(head["runtime"] + ":")
        assert head["source"] == str((DATA / fixture).resolve()) and "title" in head and "cwd" in head
        assert messages and all(set(m) >= {"id", "kind", "message"} for m in messages)
        assert {m["kind"] for m in messages} <= {"prompt", "answer", "tool_call", "tool_output"}
        assert {m["message"]["role"] for m in messages} <= {"user", "assistant", "tool"}
        assert len({m["id"] for m in messages}) == len(messages)
        assert FAKE_KEY.encode() not in data and FAKE_KEY[:20].encode() not in data
        assert layout.slug_of_name(Path(rel).name) is not None
    if word:
        assert any(word.encode() in data for data in files.values())
    again = run_import(tmp_path, workspace, name, str(DATA / fixture), "--json", "--no-index")
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["messages_new"] == 0 and report["messages_already"] > 0 and report["written"] == []
    assert session_files(workspace) == files  # not a byte more


def test_a_session_that_grew_is_appended_to_and_is_searchable(tmp_path: Path, workspace: Path) -> None:
    source = tmp_path / "proj" / "s.jsonl"
    lines = (DATA / "claude-code.jsonl").read_bytes().splitlines(keepends=True)
    write(source, "")
    source.write_bytes(b"".join(lines[:8]))
    assert run_import(tmp_path, workspace, "claude-code", str(source)).returncode == 0
    before = session_files(workspace)
    (rel, old), = before.items()
    source.write_bytes(b"".join(lines[:-1]))  # the fixture's last line is half-written on purpose
    grown = run_import(tmp_path, workspace, "claude-code", str(source), "--json")
    report = json.loads(grown.stdout)
    assert report["messages_new"] > 0 and report["messages_already"] > 0, report
    new = (workspace / rel).read_bytes()
    assert new.startswith(old) and len(new) > len(old)  # appended, never rewritten
    found = memfs_cli("search", "--json", "sensor saturates at 125", "-w", str(workspace), env=env_for(tmp_path))
    assert found.returncode == 0, found.stderr
    assert any(r["path"] == rel for r in json.loads(found.stdout)["results"])


def test_bad_records_are_counted_and_named_never_fatal(tmp_path: Path, workspace: Path) -> None:
    good = (DATA / "claude-code.jsonl").read_text(encoding="utf-8").splitlines(keepends=True)
    broken = write(tmp_path / "broken.jsonl", "".join(good[:5]) + "{not json\n" + "}}}\n" + "".join(good[5:-1]))
    export = json.loads((DATA / "chatgpt-conversations.json").read_text(encoding="utf-8"))
    first, second = (json.dumps(c, ensure_ascii=False) for c in export)
    # A stray item between the conversations, and a last one cut off (a download that broke off).
    bad_export = write(tmp_path / "conversations.json", f'[{first}, 42, {second}, {{"id": "conv-3", "mapping": {{"a"')
    out = run_import(tmp_path, workspace, "claude-code", str(broken), "--no-index")
    assert out.returncode == 0, out.stderr
    assert f"skipped: 2 bad records in {broken}" in out.stdout, out.stdout
    out = run_import(tmp_path, workspace, "chatgpt", str(bad_export), "--no-index")
    assert out.returncode == 0, out.stderr
    assert "imported 2 sessions" in out.stdout and f"2 bad records in {bad_export}" in out.stdout, out.stdout


def test_a_file_of_another_runtime_is_refused_by_name(tmp_path: Path, workspace: Path) -> None:
    out = run_import(tmp_path, workspace, "claude-code", str(DATA / "codex-new.jsonl"))
    assert out.returncode == 1
    assert "this is a codex file: memfs import codex" in out.stderr
    assert not (workspace / "sessions").exists()
    missing = run_import(tmp_path, workspace, "codex", str(tmp_path / "nope.jsonl"))
    assert missing.returncode == 1 and "no such file or folder" in missing.stderr


def test_the_runtimes_own_folder_is_searched_when_no_path_is_given(tmp_path: Path, workspace: Path) -> None:
    projects = tmp_path / "home" / ".claude" / "projects"
    write(projects / "-home-ada-src-kettle" / "5b0c.jsonl", (DATA / "claude-code.jsonl").read_text(encoding="utf-8"))
    write(projects / "-home-ada-src-kettle" / "notes.jsonl", '{"hello": "world"}\n')
    write(projects / "elsewhere" / "codex.jsonl", (DATA / "codex-new.jsonl").read_text(encoding="utf-8"))
    out = run_import(tmp_path, workspace, "claude-code", "--json", "--no-index")
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["sessions"] == 1 and report["other_files"] == 2
    codex_home = tmp_path / "codex-home"
    write(codex_home / "sessions" / "2025" / "10" / "20" / "rollout-x.jsonl",
          (DATA / "codex-new.jsonl").read_text(encoding="utf-8"))
    out = run_import(tmp_path, workspace, "codex", "--no-index", CODEX_HOME=str(codex_home))
    assert out.returncode == 0 and out.stdout.startswith("imported 1 session"), out.stdout + out.stderr
    aider = tmp_path / "repo" / "sub"
    write(aider / ".aider.chat.history.md", (DATA / "aider.chat.history.md").read_text(encoding="utf-8"))
    out = subprocess.run([sys.executable, "-m", "memfs", "import", "aider", "-w", str(workspace), "--no-index"],
                         check=False, capture_output=True, text=True, cwd=tmp_path / "repo",
                         env={**clean_env(), **env_for(tmp_path)}, timeout=120)
    assert out.returncode == 0 and out.stdout.startswith("imported 2 sessions"), out.stdout + out.stderr
    assert list((workspace / "sessions" / "aider" / "repo-sub").glob("*.jsonl"))
    nothing = run_import(tmp_path, workspace, "gemini")
    assert nothing.returncode == 1 and ".gemini/tmp does not exist" in nothing.stderr


def _export(path: Path, conversations: int) -> int:
    """A ChatGPT export of ``conversations`` made-up conversations, written a piece at a time."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive, archive.open("conversations.json", "w") as out:
        out.write(b"[")
        for n in range(conversations):
            mapping = {"root": {"id": "root", "message": None, "parent": None, "children": ["m0"]}}
            for i in range(20):
                role = "user" if i % 2 == 0 else "assistant"
                text = f"conversation {n} message {i}: " + " ".join(f"word{(n * 31 + i * 7 + k) % 997}" for k in range(150))
                mapping[f"m{i}"] = {"id": f"m{i}", "parent": "root" if i == 0 else f"m{i - 1}",
                                    "children": [f"m{i + 1}"] if i < 19 else [],
                                    "message": {"id": f"c{n}-m{i}", "author": {"role": role}, "create_time": 1.7e9 + n,
                                                "content": {"content_type": "text", "parts": [text]},
                                                "recipient": "all", "metadata": {}}}
            conv = {"id": f"conv-{n}", "title": f"Chat {n}", "create_time": 1.7e9 + n, "update_time": 1.7e9 + n,
                    "current_node": "m19", "mapping": mapping}
            out.write((b"," if n else b"") + json.dumps(conv).encode())
        out.write(b"]")
    with zipfile.ZipFile(path) as archive:
        return archive.getinfo("conversations.json").file_size


def _peak_kib(cmd: list[str], env: dict[str, str]) -> tuple[int, subprocess.CompletedProcess]:
    """The peak resident size of one child process (wait4's rusage: this child alone)."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    out, err = proc.stdout.read(), proc.stderr.read()  # type: ignore[union-attr]
    proc.stdout.close(), proc.stderr.close()  # type: ignore[union-attr]
    return usage.ru_maxrss, subprocess.CompletedProcess(cmd, os.waitstatus_to_exitcode(status), out, err)


def test_a_big_export_is_read_in_bounded_memory(tmp_path: Path, workspace: Path) -> None:
    small, big = tmp_path / "small.zip", tmp_path / "big.zip"
    _export(small, 2)
    size = _export(big, 1500)
    assert size > 40 << 20
    env = {**clean_env(), **env_for(tmp_path)}
    base = [sys.executable, "-m", "memfs", "import", "chatgpt", "--no-index", "-w"]
    small_kib, out = _peak_kib([*base, str(workspace), str(small)], env)
    assert out.returncode == 0, out.stderr
    other = tmp_path / "ws2"
    init_workspace(other)
    big_kib, out = _peak_kib([*base, str(other), str(big)], env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(b"imported 1,500 sessions, 30,000 messages new"), out.stdout
    # Reading the export whole would hold its 40+ MB of text several times over as Python objects.
    assert big_kib - small_kib < 40 << 10, (small_kib, big_kib)
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss > 0


def test_an_import_beside_a_mount_goes_through_it_and_is_found_at_once(tmp_path: Path, workspace: Path,
                                                                       mount_factory) -> None:
    mounted = mount_factory(workspace)
    out = memfs_cli("import", "claude-code", str(DATA / "claude-code.jsonl"), "-w", str(workspace),
                    env={"MEMFS_STATE_DIR": str(mounted.state), "HOME": str(tmp_path / "home")})
    assert out.returncode == 0, out.stderr
    assert f"indexed by the mount on {mounted.mnt}" in out.stderr
    (rel,) = session_files(workspace)
    history = memfs_cli("history", rel, "-w", str(workspace), env={"MEMFS_STATE_DIR": str(mounted.state)})
    assert "via mount" in history.stdout, history.stdout  # written through the mount, not beside it
    query = mounted.mnt / "search" / "boil dry cutoff DRY_LIMIT_C.md"
    assert wait_until(lambda: rel in query.read_text(), timeout=5)


def test_an_import_beside_a_daemon_has_it_index_them(tmp_path: Path, workspace: Path) -> None:
    import signal

    env = {**clean_env(), **env_for(tmp_path)}
    proc = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(workspace)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: f"pid {proc.pid}" in memfs_cli("status", "-w", str(workspace),
                                                                 env=env_for(tmp_path)).stdout, timeout=120)
        out = run_import(tmp_path, workspace, "codex", str(DATA / "codex-new.jsonl"), "--json")
        assert out.returncode == 0, out.stderr
        assert json.loads(out.stdout)["index"]["by"] == f"the daemon with pid {proc.pid}"
        (rel,) = session_files(workspace)
        found = memfs_cli("search", "--json", "loom", "--in", "sessions/codex", "-w", str(workspace),
                          env=env_for(tmp_path))
        assert any(r["path"] == rel for r in json.loads(found.stdout)["results"]), found.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
