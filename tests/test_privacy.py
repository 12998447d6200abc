"""Private stays private: which paths are private, and that no `--mode shared` command (or a
mode that is not main) ever prints a planted secret, while main mode finds it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from conftest import write
from mounts import clean_env, memfs_cli

from memfs.config import load_config
from memfs.privacy import Privacy, read_visible

SECRET = "SECRET-PELICAN-4242"
# The tests that open a Memory (make_memory) run on both index backends.
index_backend = pytest.fixture(lambda both_backends: both_backends, name="index_backend")


def test_private_paths_match_paths_folders_and_globs(tmp_path: Path) -> None:
    privacy = Privacy(["MEMORY.md", "private", "notes/*.secret.md"], "shared")
    assert privacy.hides("MEMORY.md") and privacy.hides("memory.md")  # one long-term file, two spellings
    assert privacy.hides("private") and privacy.hides("private/a/b.md")
    assert privacy.hides("notes/x.secret.md") and not privacy.hides("notes/x.md")
    assert not privacy.hides("memory/2026-11-22.md") and not privacy.hides("MEMORY.mdx")
    for derived in (".MEMORY.md.swp", "MEMORY.md~", "#MEMORY.md#", ".#MEMORY.md", "MEMORY.md.bak", "sub/.memory.md.swo"):
        assert privacy.hides(derived), derived  # what editors and tools make of a private file
    assert privacy.hides("sessions/2026-11-20.jsonl") is False  # only the default list has it
    assert Privacy(["sessions"], "shared").hides("sessions/a.jsonl")
    deep = Privacy(["notes/*.secret.md", "**/diary"], "shared")
    assert deep.hides("notes/a.secret.md") and not deep.hides("other/notes/a.secret.md")
    assert deep.hides("diary/x.md") and deep.hides("a/b/diary/x.md")
    assert Privacy([], "shared").hides("MEMORY.md")  # the long-term file is private whatever the list says
    assert not Privacy(["MEMORY.md"], "main").hides("MEMORY.md")
    write(tmp_path / "MEMORY.md", "x")
    (tmp_path / "alias.md").symlink_to("MEMORY.md")
    (tmp_path / "absolute.md").symlink_to(tmp_path / "MEMORY.md")
    os.link(tmp_path / "MEMORY.md", tmp_path / "hard.md")
    write(tmp_path / "plain.md", "y")
    for name in ("alias.md", "absolute.md", "hard.md"):
        assert privacy.hides_entry(tmp_path, name, os.lstat(tmp_path / name)) and not privacy.hides(name), name
        with pytest.raises(FileNotFoundError):
            read_visible(tmp_path, name, privacy)  # what is opened is judged, not the name
        assert read_visible(tmp_path, name, Privacy([], "main")) == b"x"
    assert not privacy.hides_entry(tmp_path, "plain.md", os.lstat(tmp_path / "plain.md"))
    assert read_visible(tmp_path, "plain.md", privacy) == b"y"


def test_unknown_modes_are_shared(tmp_path: Path) -> None:
    for given in ("shared", "group", "mian", "SHARED"):
        assert load_config(workspace=tmp_path, env={}, mode=given).mode == "shared"
    assert load_config(workspace=tmp_path, env={"MEMFS_MODE": "group"}).mode == "shared"
    assert load_config(workspace=tmp_path, env={}, mode="Main").mode == "main"


@pytest.fixture
def secret_ws(tmp_path: Path, locomo_day) -> tuple[Path, dict[str, str]]:
    ws = tmp_path / "ws"
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_BUNDLE_TIMEZONE": "UTC"}
    assert memfs_cli("init", str(ws), env=env).returncode == 0
    locomo_day(ws)
    write(ws / "MEMORY.md", f"# Memory\n\n- {SECRET}: the spare key is under the blue flower pot.\n")
    write(ws / "memory" / "notes.md", "- Shopping list: flour, eggs.\n")
    (ws / "memory" / "alias.md").symlink_to("../MEMORY.md")  # a link to private text
    out = memfs_cli("index", "-w", str(ws), env=env)
    assert out.returncode == 0, out.stderr
    return ws, env


QUERIES = ("spare key blue flower pot", SECRET, "where is the spare key", "pelican")


def _commands(ws: Path) -> list[list[str]]:
    w = ["-w", str(ws)]
    commands = []
    for query in QUERIES:
        commands += [["search", query, *w], ["search", "--json", query, *w], ["search", "-n", "20", "--min-score", "0", query, *w]]
    commands += [["context", *w], ["context", "shared", *w], ["get", "MEMORY.md", *w], ["get", "memory.md", *w],
                 ["get", "memory/alias.md", *w], ["get", str(ws / "MEMORY.md"), *w], ["status", *w],
                 ["status", "--json", *w], ["index", *w], ["index", "--json", *w]]
    return commands


@pytest.mark.parametrize("how", ["flag", "flag-before", "env", "unknown-mode"])
def test_no_shared_command_prints_private_text(secret_ws, how: str) -> None:
    ws, env = secret_ws
    commands = _commands(ws)
    if how != "flag":  # every route once with --mode; the other ways of choosing a mode on a few
        commands = [c for c in commands if c[0] in ("context", "get") or c[1] in ("--json",)][:8]
    for command in commands:
        if how == "flag":
            args, extra = [*command, "--mode", "shared"], {}
        elif how == "flag-before":
            args, extra = ["--mode", "shared", *command], {}
        elif how == "env":
            args, extra = command, {"MEMFS_MODE": "shared"}
        else:
            args, extra = [*command, "--mode", "groupchat"], {}
        out = memfs_cli(*args, env={**env, **extra})
        assert "Traceback" not in out.stderr, (args, out.stderr)
        # Only the memory's own words count (a search echoes its query, which may name the secret).
        assert "4242: the spare" not in out.stdout + out.stderr, args
        assert "is under the blue" not in out.stdout + out.stderr, args
    main_context = memfs_cli("context", "main", "-w", str(ws), "--mode", "shared", env=env)
    assert main_context.returncode == 1 and "not available in shared mode" in main_context.stderr
    hidden = memfs_cli("get", "MEMORY.md", "-w", str(ws), "--mode", "shared", env=env)
    assert hidden.returncode == 1 and "no such file" in hidden.stderr


def test_main_mode_does_find_it(secret_ws) -> None:
    """The control: the same commands in main mode do print the secret, so the test above can fail."""
    ws, env = secret_ws
    found = [memfs_cli(*command, env=env).stdout for command in _commands(ws)]
    assert sum("4242: the spare" in out for out in found) >= 6
    results = json.loads(memfs_cli("search", "--json", SECRET, "-w", str(ws), env=env).stdout)["results"]
    assert results[0]["path"] == "MEMORY.md"


def test_shared_status_counts_only_what_it_may_see(secret_ws) -> None:
    ws, env = secret_ws
    main = json.loads(memfs_cli("status", "--json", "-w", str(ws), env=env).stdout)
    shared = json.loads(memfs_cli("status", "--json", "-w", str(ws), "--mode", "shared", env=env).stdout)
    assert shared["mode"] == "shared" and main["mode"] == "main"
    assert shared["files"] < main["files"] and shared["chunks"] < main["chunks"]


def test_a_symlink_to_private_text_is_not_indexed(secret_ws) -> None:
    ws, env = secret_ws
    out = json.loads(memfs_cli("index", "--json", "-w", str(ws), env=env).stdout)
    assert out["summary"] == {"unchanged": 3, "skipped": 1}
    assert out["skipped"] == [{"path": "memory/alias.md", "reason": "skipped: a symlink to MEMORY.md, which is "
                                                                   "indexed under its own name"}]
    results = json.loads(memfs_cli("search", "--json", "-n", "20", "--min-score", "0", SECRET, "-w", str(ws),
                                   env=env).stdout)["results"]
    assert {r["path"] for r in results if SECRET in r["snippet"]} == {"MEMORY.md"}


def _scores(ws: Path, make_memory, memory_text: str, query: str) -> list[tuple[str, float]]:
    write(ws / "MEMORY.md", memory_text)
    memory = make_memory(ws, embedding__provider="none")
    memory.index()
    return [(r.path, r.score) for r in memory.search(query, mode="shared", min_score=0).results]


def test_shared_scores_do_not_depend_on_private_text(tmp_path: Path, make_memory) -> None:
    """BM25 statistics of a shared search come from public chunks only: a planted probe cannot
    tell whether a word occurs in MEMORY.md by how its own score moves."""
    ws = tmp_path / "ws"
    write(ws / "memory" / "a.md", "- alarm test on Monday, picnic on Sunday\n" + "- filler line\n" * 30)
    write(ws / "memory" / "b.md", "- picnic basket and blanket\n")
    without = _scores(ws, make_memory, "- nothing to see\n", "alarm picnic")
    with_word = _scores(ws, make_memory, "- alarm alarm alarm: the code is 5519\n" * 5, "alarm picnic")
    assert without == with_word and {p for p, _ in without} == {"memory/a.md", "memory/b.md"}


def test_results_follow_the_current_private_paths(tmp_path: Path, make_memory) -> None:
    """A path made private after it was indexed (the index still has it public) stays hidden."""
    ws = tmp_path / "ws"
    write(ws / "notes" / "plan.md", "- NEWLY-PRIVATE plan: surprise party\n")
    write(ws / "memory" / "2026-11-20.md", "- public plan: team lunch\n")
    make_memory(ws, embedding__provider="none", index__extra_paths="notes/*.md").index()
    later = make_memory(ws, embedding__provider="none", index__extra_paths="notes/*.md",
                        privacy__private_paths="notes")
    assert not [r for r in later.search("surprise party plan", mode="shared", min_score=0).results
                if r.path.startswith("notes/")]
    assert later.search("surprise party plan", min_score=0).results[0].path == "notes/plan.md"


def test_many_private_chunks_do_not_break_a_shared_search(tmp_path: Path, make_memory) -> None:
    ws = tmp_path / "ws"
    write(ws / "memory" / "2026-11-20.md", "- the boat is called Wren\n")
    memory = make_memory(ws)
    memory.index()
    vector = memory.provider.embed(["boat name"])[0]
    assert memory.store.vector_candidates(vector, 5000, include_private=False)  # k above sqlite-vec's 4096
    assert memory.search("boat name", mode="shared").results[0].path == "memory/2026-11-20.md"


def test_links_are_resolved_inside_the_workspace_only(tmp_path: Path) -> None:
    from memfs.privacy import resolve_within
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", "x")
    write(ws / "memory" / "a.md", "y")
    (ws / "memory" / "up").symlink_to("..")
    (ws / "memory" / "m.md").symlink_to("up/MEMORY.md")
    (ws / "memory" / "abs.md").symlink_to(ws / "memory" / "a.md")
    (ws / "memory" / "out.md").symlink_to("/etc/hostname")
    (ws / "memory" / "loop").symlink_to("loop")
    (ws / "memory" / "into-a-mount.md").symlink_to(tmp_path / "some-mount" / "MEMORY.md")
    assert resolve_within(ws, "memory/m.md") == "MEMORY.md"
    assert resolve_within(ws, "memory/abs.md") == "memory/a.md"
    assert resolve_within(ws, "memory/new/../a.md") == "memory/a.md"
    for leaving in ("memory/out.md", "memory/loop", "memory/into-a-mount.md", "../x", "memory/../../x"):
        assert resolve_within(ws, leaving) is None, leaving
    privacy = Privacy([], "shared")
    assert privacy.hides_entry(ws, "memory/m.md", os.lstat(ws / "memory" / "m.md"))
    assert privacy.hides_entry(ws, "memory/out.md", os.lstat(ws / "memory" / "out.md"))
    assert not privacy.hides_entry(ws, "memory/abs.md", os.lstat(ws / "memory" / "abs.md"))
    os.mkfifo(ws / "memory" / "fifo.md")
    with pytest.raises(FileNotFoundError):
        read_visible(ws, "memory/fifo.md", Privacy([], "main"))  # never waited on
    with pytest.raises(FileNotFoundError):
        read_visible(ws, "secret-folder", Privacy(["secret-folder"], "shared"))  # no "is a folder" oracle


def test_derived_names_are_private_in_every_component() -> None:
    privacy = Privacy(["people"], "shared")
    for rel in ("people.bak/alice.md", "memory/.people.swp", "MEMORY.md.AB12CD", ".MEMORY.md123456",
                "notes/MEMORY.md___jb_tmp___", ".git/config", "sub/.git/HEAD", "people-old/x.md"):
        assert privacy.hides(rel), rel
    for rel in ("peoples-court.md", "memory/2026-11-20.md", ".github/workflows/ci.yml", "MEMORY-notes.md"):
        assert not privacy.hides(rel), rel


def test_a_shared_sync_neither_writes_to_nor_learns_from_private_day_files(tmp_path: Path, make_memory) -> None:
    import json as _json

    from memfs.sync.protocol import SyncError
    ws = tmp_path / "ws"
    (ws / "clawgpt-memory").mkdir(parents=True)
    stamp = 1767614400000  # 2026-01-05
    private = {"id": "m-secret-1", "chatId": "c", "chatTitle": "t", "role": "user", "content": "PIN 9911",
               "timestamp": stamp}
    memory = make_memory(ws, embedding__provider="none", privacy__private_paths="clawgpt-memory/2026-01-*")
    memory.ingest_sync(_json.dumps(private).encode())  # the main mode stores it
    with pytest.raises(SyncError, match="is private"):
        memory.ingest_sync(_json.dumps({**private, "id": "m-new"}).encode(), mode="shared")
    today = {**private, "timestamp": 1795000000000}
    result = memory.ingest_sync(_json.dumps(today).encode(), mode="shared")  # an id only a private file has
    assert result.stored == 1  # stored like any new id: nothing tells that a private file holds it


def test_concurrent_starts_on_an_outdated_index_all_succeed(tmp_path: Path, locomo_day) -> None:
    import subprocess
    import sys

    from memfs.config import load_config
    from memfs.memory import Memory
    ws = tmp_path / "ws"
    locomo_day(ws)
    state = tmp_path / "state"
    memory = Memory(load_config(workspace=ws, env={}, overrides=[("state_dir", str(state)),
                                                                 ("embedding.provider", "none")]))
    memory.index()
    memory.store.set_meta("schema", "2")  # as an index of the previous version
    memory.close()
    env = {**clean_env(),
           "MEMFS_STATE_DIR": str(state), "MEMFS_EMBEDDING_PROVIDER": "none"}
    procs = [subprocess.Popen([sys.executable, "-m", "memfs", "status", "--json", "-w", str(ws)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs), [err for _, err in outs]
    assert all(json.loads(out)["files"] == 1 for out, _ in outs)


def test_a_rejected_rewrite_of_staged_lines_is_undone_whole(tmp_path: Path, make_memory) -> None:
    import errno as _errno
    import json as _json
    from types import SimpleNamespace

    from pyfuse3 import FUSEError

    from memfs.fs import syncfiles
    memory = make_memory(tmp_path / "ws", embedding__provider="none")
    line = lambda i: (_json.dumps({"id": f"m{i}", "chatId": "c", "chatTitle": "t", "role": "user",  # noqa: E731
                                   "content": "hi", "timestamp": 1795000000000}) + "\n").encode()
    handle = SimpleNamespace(staged=bytearray(), staged_base=0, checked=0, checked_lines=0, parsed=[],
                             path="clawgpt-memory/x")
    offset = 0
    for i in range(3):
        offset += syncfiles.stage(handle, offset, line(i), memory)
    before = bytes(handle.staged)
    with pytest.raises(FUSEError) as raised:
        syncfiles.stage(handle, 0, b'{"id": "broken", "oops": 1}\n', memory)  # rewrites line 1 badly
    assert raised.value.errno == _errno.EINVAL
    assert bytes(handle.staged) == before and handle.checked == len(before)  # nothing acknowledged is lost
    assert [m.id for m in handle.parsed] == ["m0", "m1", "m2"]  # nor the messages validated with them
