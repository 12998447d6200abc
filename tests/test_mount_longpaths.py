"""Memory files past PATH_MAX on a real mount: a note written through the mount at a relative
path of 4,089 bytes (the daemon's own path to it, workspace + path, is longer than the kernel
takes) is indexed, searched, read with `memfs get` and has its history, as a short one does; and
`memfs status` names every memory file it could not index, with the reason."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest
from conftest import write_deep
from mounts import memfs_cli, wait_until

pytestmark = pytest.mark.fuse

WORD = "pangolinquartz"


def deep_note() -> tuple[list[str], str, str]:
    """Folders of NAME_MAX-ish names under memory/ and a daily-log-like name: a relative path
    of exactly 4,089 bytes (the issue's), a note (memory/**/*.md) as far as memfs is concerned."""
    folders = ["memory"] + [f"{i:03d}" + "d" * 252 for i in range(15)]
    name = "2026-11-20-" + "n" * (4089 - 3847 - 11 - 3) + ".md"
    rel = "/".join([*folders, name])
    assert len(rel.encode()) == 4089
    return folders, name, rel


def test_a_note_past_path_max_is_indexed_read_and_versioned(mounted) -> None:
    m = mounted
    folders, name, rel = deep_note()
    assert len(str(m.workspace / rel).encode()) > 4095  # the daemon cannot name it in one call
    text = f"# deep note\n\nThe {WORD} sleeps at the bottom of the folders.\n"
    write_deep(m.mnt, folders, name, text.encode())
    env = {"MEMFS_STATE_DIR": str(m.state)}
    ws = ["-w", str(m.workspace)]

    found = m.search_json(WORD)  # close() returned: the keyword side knows at once
    assert [r["path"] for r in found["results"]] == [rel]
    listing = (m.mnt / "search" / f"{WORD}.md").read_text()
    hit = found["results"][0]
    assert f"## 1. {rel}#L{hit['start_line']}-L{hit['end_line']}\n" in listing and WORD in listing

    got = memfs_cli("get", rel, *ws, env=env)
    assert got.returncode == 0 and got.stdout == text, got.stderr

    history = memfs_cli("history", rel, "--json", *ws, env=env)
    assert history.returncode == 0, history.stderr
    versions = json.loads(history.stdout)["versions"]
    assert len(versions) == 1 and versions[0]["size"] == len(text.encode())
    shown = memfs_cli("history", rel, versions[0]["version"], *ws, env=env)
    assert shown.returncode == 0 and shown.stdout == text, shown.stderr
    write_deep(m.mnt, folders, name, b"overwritten by mistake\n")
    restored = memfs_cli("restore", rel, versions[0]["version"], *ws, env=env)
    assert restored.returncode == 0, restored.stderr
    assert memfs_cli("get", rel, *ws, env=env).stdout == text

    status = json.loads(memfs_cli("status", "--json", *ws, env=env).stdout)
    assert rel not in {p["path"] for p in status["problems"]} and status["skipped"] == 0
    subprocess.run(["rm", "-rf", folders[1]], cwd=m.mnt / "memory", check=True)
    assert wait_until(lambda: not m.search_json(WORD)["results"])


def test_a_note_past_path_max_made_beside_the_mount_is_found_by_memfs_index(workspace: Path, mount_factory) -> None:
    """Written while nothing watched: the walk of `memfs index` (and of a mount's start) finds
    it; os.walk stopped at the first folder it could not name whole."""
    folders, name, rel = deep_note()
    write_deep(workspace, folders, name, f"the {WORD} was here before the mount\n".encode())
    m = mount_factory(workspace)
    assert [r["path"] for r in m.search_json(WORD)["results"]] == [rel]


def test_status_names_each_memory_file_it_could_not_index(workspace: Path, mount_factory) -> None:
    """A name that is not UTF-8 cannot be indexed (nor stored, nor cited): status lists it,
    with why, and counts it; `memfs index` goes on with the other files."""
    odd = os.fsencode(workspace / "memory") + b"/caf\xe9.md"
    with open(odd, "wb") as out:
        out.write(b"latin-1 name\n")
    Path(workspace / "memory" / "2026-11-21.md").write_text(f"the {WORD} is fine here\n")
    m = mount_factory(workspace)
    env = {"MEMFS_STATE_DIR": str(m.state)}
    ws = ["-w", str(m.workspace)]
    indexed = memfs_cli("index", *ws, env=env)
    assert indexed.returncode == 0, indexed.stderr
    status = memfs_cli("status", *ws, env=env)
    assert status.returncode == 0, status.stderr
    assert "(1 skipped)" in status.stdout
    assert "skipped:    memory/caf\\xe9.md: its name is not valid UTF-8" in status.stdout
    info = json.loads(memfs_cli("status", "--json", *ws, env=env).stdout)
    assert {"path": "memory/caf\\xe9.md", "not_indexed": "skipped: its name is not valid UTF-8 (rename it to "
            "index it)", "warning": ""} in info["problems"]
    assert [r["path"] for r in m.search_json(WORD)["results"]] == ["memory/2026-11-21.md"]
