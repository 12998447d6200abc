"""`memfs connect RUNTIME`: merged into realistic settings files changing nothing else, a backup
kept, idempotent, --dry-run a diff that writes nothing, --remove giving back the same bytes; and
the hook commands it writes run as the runtime would run them."""

from __future__ import annotations

import json
import subprocess
import tomllib
from pathlib import Path

import pytest
from conftest import write
from mounts import clean_env, memfs_cli

from memfs.capture import jsonedit

CLAUDE_SETTINGS = """{
  "$schema": "https://json.schemastore.org/claude-code-settings.json",
  "permissions": {
    "allow": [
      "Bash(npm run lint)",
      "Bash(git diff:*)"
    ],
    "deny": ["Read(./.env)"]
  },
  "env": {"CLAUDE_CODE_ENABLE_TELEMETRY": "0", "EDITOR": "vim"},
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [{"type": "command", "command": "~/.claude/guard.sh", "timeout": 5}]
      }
    ],
    "Stop": [
      {"hooks": [{"type": "command", "command": "notify-send 'Claude is done'"}]}
    ]
  },
  "statusLine": {"type": "command", "command": "~/.claude/status.sh"},
  "model": "opus",
  "includeCoAuthoredBy": false
}
"""
CLAUDE_JSON = ('{"numStartups": 41, "installMethod": "native", "autoUpdates": true, "tipsHistory": {"new-user-warmup": 1}, '
               '"mcpServers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/"}}, '
               '"projects": {"/home/ada/src/kettle": {"allowedTools": [], "mcpServers": {}, "hasTrustDialogAccepted": true, '
               '"lastCost": 0.42}}, "userID": "f00d", "hasCompletedOnboarding": true}')
CLAUDE_MD = "# My preferences\n\n- Answer in British English.\n- Never run `git push` without asking."  # no newline at the end
CODEX_TOML = '''# Codex settings
model = "gpt-5-codex"
model_reasoning_effort = "high"
approval_policy = "on-request"

[profiles.fast]
model = "gpt-5-mini"

[mcp_servers.docs]
command = "npx"
args = ["-y", "mcp-docs"]
env = { "DOCS_TOKEN" = "x" }

[projects."/home/ada/src/kettle"]
trust_level = "trusted"
'''
CODEX_AGENTS = "# Global rules\n\nUse conventional commits.\n"
GEMINI_SETTINGS = """{
  // Gemini CLI settings (comments are allowed here)
  "general": {
    "preferredEditor": "vim",
    "vimMode": true,
  },
  "ui": {"theme": "GitHub"},
  "mcpServers": {
    "sqlite": {
      "command": "uvx",
      "args": ["mcp-server-sqlite", "--db-path", "/home/ada/data.db"]
    }
  },
  "hooks": {
    "BeforeTool": [{"matcher": "run_shell_command", "hooks": [{"name": "audit", "type": "command", "command": "audit.sh"}]}]
  }
}"""

EXISTING = {
    "claude-code": {".claude/settings.json": CLAUDE_SETTINGS, ".claude.json": CLAUDE_JSON, ".claude/CLAUDE.md": CLAUDE_MD},
    "codex": {".codex/config.toml": CODEX_TOML, ".codex/AGENTS.md": CODEX_AGENTS},
    "gemini": {".gemini/settings.json": GEMINI_SETTINGS},
}
MADE = {  # files connect makes where none were
    "claude-code": [],
    "codex": [".codex/hooks.json"],
    "gemini": [".gemini/GEMINI.md"],
}


def env_for(tmp_path: Path) -> dict[str, str]:
    return {"MEMFS_STATE_DIR": str(tmp_path / "state"), "HOME": str(tmp_path / "home")}


def connect(tmp_path: Path, ws: Path, runtime: str, *args: str) -> subprocess.CompletedProcess:
    return memfs_cli("connect", runtime, "-w", str(ws), *args, env=env_for(tmp_path))


def snapshot(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def plain_json(path: Path) -> dict:
    return jsonedit.plain(path.read_text())


@pytest.mark.parametrize("runtime", ["claude-code", "codex", "gemini"])
def test_connect_merges_is_idempotent_and_remove_gives_back_the_same_bytes(tmp_path: Path, workspace: Path,
                                                                          runtime: str) -> None:
    home = tmp_path / "home"
    for rel, text in EXISTING[runtime].items():
        write(home / rel, text)
    before = snapshot(home)

    dry = connect(tmp_path, workspace, runtime, "--dry-run")
    assert dry.returncode == 0, dry.stderr
    assert dry.stdout.startswith("--- ") and "+++ " in dry.stdout and f"hook {runtime} SessionStart" in dry.stdout
    assert snapshot(home) == before  # --dry-run writes nothing

    first = connect(tmp_path, workspace, runtime)
    assert first.returncode == 0, first.stderr
    after = snapshot(home)
    for rel in EXISTING[runtime]:
        assert (home / (rel + ".bak-memfs")).read_bytes() == before[rel]
    for rel in MADE[runtime]:
        assert rel in after
    _check_merged(runtime, home, workspace)

    second = connect(tmp_path, workspace, runtime)
    assert second.returncode == 0 and "unchanged" in second.stdout, second.stdout
    assert snapshot(home) == after  # idempotent: not a byte changes

    removed = connect(tmp_path, workspace, runtime, "--remove")
    assert removed.returncode == 0, removed.stderr
    assert snapshot(home) == before  # the same bytes; backups and the files it made gone


def _check_merged(runtime: str, home: Path, ws: Path) -> None:
    """Ours is there, and everything that was there still says what it said."""
    if runtime == "claude-code":
        settings = plain_json(home / ".claude" / "settings.json")
        old = jsonedit.plain(CLAUDE_SETTINGS)
        assert {k: v for k, v in settings.items() if k != "hooks"} == {k: v for k, v in old.items() if k != "hooks"}
        assert settings["hooks"]["PreToolUse"] == old["hooks"]["PreToolUse"]
        assert settings["hooks"]["Stop"][0] == old["hooks"]["Stop"][0] and len(settings["hooks"]["Stop"]) == 2
        for event in ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SessionEnd"):
            assert f"hook claude-code {event} -w {ws}" in settings["hooks"][event][-1]["hooks"][0]["command"]
        claude = plain_json(home / ".claude.json")
        assert claude["mcpServers"]["github"] == jsonedit.plain(CLAUDE_JSON)["mcpServers"]["github"]
        assert claude["mcpServers"]["memfs"]["args"][-3:] == ["mcp", "-w", str(ws)]
        assert claude["projects"] == jsonedit.plain(CLAUDE_JSON)["projects"]
        md = (home / ".claude" / "CLAUDE.md").read_text()
        assert md.startswith(CLAUDE_MD + "\n\n<!-- memfs:begin") and md.rstrip().endswith("<!-- memfs:end -->")
        assert "memory_search" in md and f"memfs search \"<question>\" -w {ws}" in md
    elif runtime == "codex":
        config = tomllib.loads((home / ".codex" / "config.toml").read_text())
        old = tomllib.loads(CODEX_TOML)
        assert config["mcp_servers"]["docs"] == old["mcp_servers"]["docs"] and config["profiles"] == old["profiles"]
        assert config["mcp_servers"]["memfs"]["args"][-3:] == ["mcp", "-w", str(ws)]
        assert config["notify"][-5:] == ["hook", "codex", "notify", "-w", str(ws)]
        hooks = plain_json(home / ".codex" / "hooks.json")["hooks"]
        assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreCompact", "Stop"}
        assert (home / ".codex" / "AGENTS.md").read_text().startswith(CODEX_AGENTS + "\n<!-- memfs:begin")
    else:
        settings = plain_json(home / ".gemini" / "settings.json")
        old = jsonedit.plain(GEMINI_SETTINGS)
        assert settings["general"] == old["general"] and settings["mcpServers"]["sqlite"] == old["mcpServers"]["sqlite"]
        assert settings["hooks"]["BeforeTool"] == old["hooks"]["BeforeTool"]
        assert {"SessionStart", "BeforeAgent", "PreCompress", "AfterAgent", "SessionEnd"} <= set(settings["hooks"])
        assert "// Gemini CLI settings (comments are allowed here)" in (home / ".gemini" / "settings.json").read_text()


def test_connect_for_a_project_and_the_hooks_it_writes_run(tmp_path: Path, workspace: Path) -> None:
    project = tmp_path / "proj"
    project.mkdir()
    done = connect(tmp_path, workspace, "claude-code", "--project", str(project))
    assert done.returncode == 0, done.stderr
    assert not (tmp_path / "home").exists()  # the user's own settings untouched
    servers = plain_json(project / ".mcp.json")["mcpServers"]
    assert servers["memfs"]["type"] == "stdio"
    hooks = plain_json(project / ".claude" / "settings.local.json")["hooks"]
    assert "<!-- memfs:begin" in (project / "CLAUDE.md").read_text()
    # The command as Claude Code runs it: through a shell, its JSON on stdin, in the project.
    command = hooks["SessionStart"][0]["hooks"][0]["command"]
    ran = subprocess.run(command, shell=True, check=False, input=b'{"session_id": "s", "source": "startup"}', capture_output=True,
                         cwd=project, env={**clean_env(), **env_for(tmp_path)}, timeout=30)
    assert ran.returncode == 0 and ran.stderr == b""
    assert ran.stdout == b"" or json.loads(ran.stdout)["hookSpecificOutput"]["hookEventName"] == "SessionStart"
    removed = connect(tmp_path, workspace, "claude-code", "--project", str(project), "--remove")
    assert removed.returncode == 0 and snapshot(project) == {}


def test_a_notify_of_the_users_own_is_left_alone(tmp_path: Path, workspace: Path) -> None:
    home = tmp_path / "home"
    text = 'notify = ["notify-send", "Codex"]\n' + CODEX_TOML
    write(home / ".codex" / "config.toml", text)
    assert connect(tmp_path, workspace, "codex").returncode == 0
    config = tomllib.loads((home / ".codex" / "config.toml").read_text())
    assert config["notify"] == ["notify-send", "Codex"] and "memfs" in config["mcp_servers"]
    assert "Stop" in plain_json(home / ".codex" / "hooks.json")["hooks"]  # turn ends still captured
    assert connect(tmp_path, workspace, "codex", "--remove").returncode == 0
    assert (home / ".codex" / "config.toml").read_text() == text


@pytest.mark.parametrize("rel,text,says", [
    (".codex/config.toml", CODEX_TOML + '\n[mcp_servers.memfs]\ncommand = "mine"\n', "[mcp_servers.memfs] table of its own"),
    (".claude/settings.json", '{"hooks": {"Stop": [}', "line 1"),
    (".claude/settings.json", '{"hooks": []}', "hooks is not a JSON object"),
    (".codex/config.toml", 'model = "x"\n[broken\n', "not TOML"),
])
def test_a_file_that_cannot_be_merged_is_left_as_it_is(tmp_path: Path, workspace: Path, rel: str, text: str,
                                                       says: str) -> None:
    home = tmp_path / "home"
    write(home / rel, text)
    before = snapshot(home)
    runtime = "codex" if "codex" in rel else "claude-code"
    done = connect(tmp_path, workspace, runtime)
    assert done.returncode == 1 and says in done.stderr and "nothing was changed" in done.stderr, done.stderr
    assert snapshot(home) == before


def test_connect_again_for_another_workspace_moves_its_entries(tmp_path: Path, workspace: Path) -> None:
    other = tmp_path / "ws2"
    other.mkdir()
    (other / "MEMORY.md").write_text("# Memory\n")
    assert connect(tmp_path, workspace, "gemini").returncode == 0
    assert connect(tmp_path, other, "gemini").returncode == 0
    settings = (tmp_path / "home" / ".gemini" / "settings.json").read_text()
    assert str(other) in settings and f"-w {workspace} " not in settings and f'"{workspace}"' not in settings
    hooks = jsonedit.plain(settings)["hooks"]
    assert all(len(groups) == 1 for groups in hooks.values())
