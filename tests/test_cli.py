"""The command line, run as a real program."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import write


def memfs(*args: str, env: dict[str, str] | None = None, input: str | None = None, cwd: Path | None = None):
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")}
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
    assert set(first) == {"path", "start_line", "end_line", "score", "vector_score", "text_score", "snippet"}
    assert first["path"] == "memory/2023-05-08.md"

    markdown = memfs("search", "LGBTQ support group", cwd=ws / "memory", env=env)  # workspace found from cwd
    assert markdown.returncode == 0 and "memory/2023-05-08.md#L" in markdown.stdout

    lines = memfs("search", "--json", "-n", "2", "-", input="support group\n\npainting sunrise\n",
                  env={**env, "MEMFS_WORKSPACE": str(ws)})
    rows = [json.loads(line) for line in lines.stdout.splitlines()]
    assert [r["query"] for r in rows] == ["support group", "painting sunrise"]
    assert all(len(r["results"]) <= 2 for r in rows)

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
    empty = memfs("search", "  ", "-w", str(tmp_path), env={"MEMFS_STATE_DIR": str(tmp_path / "s")})
    assert empty.returncode != 0 and "empty" in empty.stderr
