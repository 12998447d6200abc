"""Virtual files on a real mount: search/, context/, .memfs/status."""

from __future__ import annotations

import errno
import json
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest
from conftest import write
from mounts import memfs_cli, wait_until

pytestmark = pytest.mark.fuse


@pytest.fixture
def vmount(workspace: Path, mount_factory, locomo_day):
    locomo_day(workspace)
    write(workspace / "MEMORY.md", "# Memory\n\n- PRIVATE-MARKER-5521: the spare key is under the blue pot.\n")
    mounted = mount_factory(workspace, "main", "--set", "bundle.timezone=UTC")
    memory = mounted.memory()
    try:  # reads do not wait for vectors: these tests compare answers made after embedding
        assert wait_until(lambda: memory.pending == 0, timeout=120)
    finally:
        memory.close()
    return mounted


def run(*cmd: str, cwd: Path) -> bytes:
    return subprocess.run(cmd, cwd=cwd, capture_output=True, check=True, timeout=120).stdout


def test_search_file_matches_cli_and_every_reader(vmount) -> None:
    mnt = vmount.mnt
    q = "When did Caroline go to the LGBTQ support group?"
    path = mnt / "search" / f"{q}.md"
    body = path.read_bytes()
    text = body.decode()
    assert text.startswith(f"# memfs search: {q}\n")
    assert "memory/2023-05-08.md#L" in text and "score " in text and "```" in text
    assert "sed -n '" in text.splitlines()[-1]
    cli = memfs_cli("search", q, "-w", str(vmount.workspace), env={"MEMFS_STATE_DIR": str(vmount.state)})
    assert cli.stdout.encode() == body  # one renderer: byte-identical
    assert os.stat(path).st_size == len(body)
    assert run("cat", str(path), cwd=mnt) == body
    assert run("head", "-c", "40", str(path), cwd=mnt) == body[:40]
    assert run("wc", "-c", str(path), cwd=mnt).split()[0] == str(len(body)).encode()
    assert Path(path).read_text() == text
    shutil.copy(path, vmount.workspace.parent / "copy.md")
    assert (vmount.workspace.parent / "copy.md").read_bytes() == body
    assert b"LGBTQ" in run("grep", "-h", "LGBTQ", str(path), cwd=mnt)

    as_json = (mnt / "search" / f"{q}.json").read_text()
    cli_json = memfs_cli("search", "--json", q, "-w", str(vmount.workspace), env={"MEMFS_STATE_DIR": str(vmount.state)})
    assert as_json == cli_json.stdout
    assert json.loads(as_json)["results"][0]["path"] == "memory/2023-05-08.md"


def test_options_in_the_path(vmount) -> None:
    search = vmount.mnt / "search"
    many = json.loads((search / "n=10,min=0" / "painting.json").read_text())["results"]
    few = json.loads((search / "n=1" / "painting.json").read_text())["results"]
    assert len(few) == 1 and len(many) > 1
    none = json.loads((search / "min=1" / "painting.json").read_text())["results"]
    assert none == []
    reasons = {"n=0": "n must be from 1 to 100", "n=abc": "n is a whole number", "min=2": "min must be from 0 to 1",
               "x=1": "unknown option 'x'", "n=1,n=2": "given twice", "n=1.5": "n is a whole number",
               "min=-0.1": "min must be from 0 to 1", "n=3,": "is not an option"}
    for bad in reasons:
        with pytest.raises(OSError) as raised:
            (search / bad / "painting.md").read_text()
        assert raised.value.errno == errno.EINVAL, bad
    log = next((vmount.state / "mounts").glob("*.log")).read_text()
    for bad, reason in reasons.items():
        assert f"search/{bad}: " in log and reason in log, bad


def test_read_your_writes_and_stable_handles(vmount) -> None:
    mnt = vmount.mnt
    handle = open(mnt / "search" / "zebrafish aquarium.md", "rb")
    before = handle.read()
    assert "0 results" in before.decode()
    with open(mnt / "memory" / "2026-11-22.md", "w") as log:
        log.write("## 10:00 - Pets\nWe bought a zebrafish aquarium for the office.\n")
    after = (mnt / "search" / "zebrafish aquarium.md").read_text()
    assert "memory/2026-11-22.md#L1-L2" in after
    handle.seek(0)
    assert handle.read() == before  # the open handle keeps its snapshot
    handle.close()


def test_a_fresh_append_is_cited_by_just_the_appended_lines(vmount) -> None:
    mnt = vmount.mnt
    day = mnt / "memory" / "2026-11-23.md"
    day.write_text("".join(f"## 0{h}:00 - Chores\nWashed the car and watered the plants.\n\n" for h in range(1, 8)))
    before = len(day.read_text().split("\n")) - 1
    subprocess.run(f"echo '## 09:00 - Travel' >> '{day}' && echo 'Booked a night train to Vienna for the conference.' >> '{day}'",
                   shell=True, check=True, cwd=mnt)
    hit = json.loads((mnt / "search" / "night train to Vienna.json").read_text())["results"][0]
    assert (hit["path"], hit["start_line"], hit["end_line"]) == ("memory/2026-11-23.md", before + 1, before + 2)
    shown = run("sed", "-n", f"{hit['start_line']},{hit['end_line']}p", str(day), cwd=mnt).decode()
    assert shown == "## 09:00 - Travel\nBooked a night train to Vienna for the conference.\n"
    assert f"memory/2026-11-23.md#L{before + 1}-L{before + 2}" in (mnt / "search" / "night train to Vienna.md").read_text()

    (mnt / "sessions").mkdir(exist_ok=True)
    session = mnt / "sessions" / "chat.jsonl"
    lines = [json.dumps({"type": "message", "message": {"role": "user", "content": f"note {i}: the weather is mild"}})
             for i in range(40)]
    session.write_text("\n".join(lines) + "\n")
    with open(session, "a") as out:
        out.write(json.dumps({"type": "message", "message": {"role": "assistant",
                                                            "content": "Your locker code is 4417."}}) + "\n")
    hit = json.loads((mnt / "search" / "in=sessions" / "locker code.json").read_text())["results"][0]
    assert (hit["path"], hit["start_line"], hit["end_line"]) == ("sessions/chat.jsonl", 41, 41)


def test_names_errors_and_listing(vmount) -> None:
    search = vmount.mnt / "search"
    for query in ['say "hello"', "café naïve 数据库", "..", "a AND OR NOT b*", "$(rm -rf ~); `x` | & ; > out", "NEAR(x y)"]:
        text = (search / f"{query}.md").read_text()
        assert text.startswith(f"# memfs search: {query}\n")
    with pytest.raises(OSError) as long_name:
        (search / ("q" * 300 + ".md")).read_text()
    assert long_name.value.errno == errno.ENAMETOOLONG
    with pytest.raises(FileNotFoundError):
        (search / ".md").read_text()  # an empty query
    for malformed in ("noextension", "x.txt"):
        with pytest.raises(OSError) as raised:
            (search / malformed).read_text()
        assert raised.value.errno == errno.EINVAL, malformed
    log = next((vmount.state / "mounts").glob("*.log")).read_text()
    assert "search/noextension: a query is a file ending in .md or .json" in log
    listing = os.listdir(search)
    assert "café naïve 数据库.md" in listing and 'say "hello".md' in listing
    with pytest.raises(OSError) as raised:
        os.mkdir(search / "dir")
    assert raised.value.errno == errno.EINVAL  # the kernel's lookup first: "dir" is no query name
    for name in ("dir.md", "link.md"):  # every query name exists, so making one is EEXIST
        with pytest.raises(FileExistsError):
            os.mkdir(search / name) if name == "dir.md" else os.symlink("x", search / name)
    for attempt in (lambda: (search / "new.md").write_text("x"),
                    lambda: os.unlink(search / 'say "hello".md'),
                    lambda: os.rename(search / 'say "hello".md', search / "other.md"),
                    lambda: os.rename(vmount.mnt / "MEMORY.md", search / "m.md"),
                    lambda: (vmount.mnt / "context" / "main.md").write_text("x"),
                    lambda: os.rmdir(vmount.mnt / "context"),
                    lambda: os.truncate(vmount.mnt / ".memfs" / "status", 0),
                    lambda: os.chmod(vmount.mnt / "search", 0o777)):
        with pytest.raises(OSError) as raised:
            attempt()
        assert raised.value.errno == errno.EROFS
    assert (vmount.workspace / "MEMORY.md").exists()  # nothing was lost on the way


def test_virtual_roots_answer_by_name_but_stay_out_of_tree_walks(vmount) -> None:
    root = os.listdir(vmount.mnt)
    assert "MEMORY.md" in root
    assert not {"search", "context", ".memfs"} & set(root)
    assert all((vmount.mnt / name).is_dir() for name in ("search", "context", ".memfs"))
    (vmount.mnt / "search" / "pineapple.md").read_text()  # a recent query exists under search/
    marker = "walkmarker-7f3a"
    with open(vmount.mnt / "MEMORY.md", "a") as handle:
        handle.write(f"- {marker}\n")
    assert marker in (vmount.mnt / "context" / "main.md").read_text()
    grep = subprocess.run(["grep", "-rl", marker, "."], cwd=vmount.mnt, capture_output=True, text=True)
    assert grep.stdout.split() == ["./MEMORY.md"]  # not again through context/main.md


def test_context_files(vmount) -> None:
    ctx = vmount.mnt / "context"
    main = (ctx / "main.md").read_bytes()
    shared = (ctx / "shared.md").read_bytes()
    assert b"PRIVATE-MARKER-5521" in main and b"PRIVATE-MARKER-5521" not in shared
    assert os.stat(ctx / "main.md").st_size == len(main)
    cli = memfs_cli("context", "main", "-w", str(vmount.workspace), "--set", "bundle.timezone=UTC",
                    env={"MEMFS_STATE_DIR": str(vmount.state)})
    assert cli.stdout.encode() == main
    assert sorted(os.listdir(ctx)) == ["main.md", "shared.md"]
    for unknown in ("MAIN.md", "private.md", "main.txt"):
        with pytest.raises(FileNotFoundError):
            (ctx / unknown).read_text()


def test_context_follows_a_time_zone_changed_in_memfs_toml_under_the_mount(workspace: Path, mount_factory) -> None:
    # The two zones are 26 hours apart: "today" is always another day in each.
    zones = ("Etc/GMT+12", "Pacific/Kiritimati")
    write(workspace / ".memfs.toml", f'[bundle]\ntimezone = "{zones[0]}"\n')
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    env = {"MEMFS_STATE_DIR": str(m.state)}

    def day_in(zone: str) -> str:
        import datetime as dt
        import zoneinfo
        return dt.datetime.now(zoneinfo.ZoneInfo(zone)).date().isoformat()

    def first_line(text: str) -> str:
        return text.splitlines()[0]

    assert first_line((m.mnt / "context" / "main.md").read_text()) == f"# memfs context: main ({day_in(zones[0])})"
    (m.mnt / ".memfs.toml").write_text(f'[bundle]\ntimezone = "{zones[1]}"\n')  # through the mount
    assert first_line((m.mnt / "context" / "main.md").read_text()) == f"# memfs context: main ({day_in(zones[1])})"
    write(workspace / ".memfs.toml", f'[bundle]\ntimezone = "{zones[0]}"\n')  # beside it: the watcher
    expected = f"# memfs context: main ({day_in(zones[0])})"
    assert wait_until(lambda: first_line((m.mnt / "context" / "main.md").read_text()) == expected, timeout=20)
    cli = memfs_cli("context", "main", "-w", str(workspace), env=env)
    assert cli.returncode == 0 and cli.stdout == (m.mnt / "context" / "main.md").read_text()
    # Taken when close() returns (at FLUSH), not when the kernel's RELEASE comes later: a second
    # descriptor of the same open file keeps RELEASE back, as a busy machine may (a CI failure).
    fd = os.open(m.mnt / ".memfs.toml", os.O_WRONLY | os.O_TRUNC)
    os.write(fd, f'[bundle]\ntimezone = "{zones[1]}"\n'.encode())
    kept = os.dup(fd)
    try:
        os.close(fd)
        assert first_line((m.mnt / "context" / "main.md").read_text()) == \
            f"# memfs context: main ({day_in(zones[1])})"
    finally:
        os.close(kept)
    log = next((m.state / "mounts").glob("*.log")).read_text()
    assert ".memfs.toml changed bundle.timezone: context/ follows it now" in log
    assert "keeps what it was mounted with" not in log


def test_status_file(vmount) -> None:
    status = (vmount.mnt / ".memfs" / "status").read_text()
    assert "files:      2" in status and f"mount:      {vmount.mnt}" in status
    assert "provider:   local" in status and "/workspaces/ws-" in status
    # Who serves the workspace, as `memfs status` says it.
    assert f"served by:  pid {vmount.pid}: mount on {vmount.mnt} (main mode, answers commands)\n" in status
    cli = memfs_cli("status", "-w", str(vmount.workspace), env={"MEMFS_STATE_DIR": str(vmount.state)}).stdout
    assert [line for line in status.splitlines() if line.startswith("served by:")] == \
        [line for line in cli.splitlines() if line.startswith("served by:")]


def test_context_fairness_on_the_mount(workspace: Path, mount_factory) -> None:
    write(workspace / "AGENTS.md", "".join(f"rule {i}: " + "always double-check " * 25 + "\n" for i in range(4000)))
    write(workspace / "MEMORY.md", "- LONGTERM-MARKER-8812 lives here.\n")
    m = mount_factory(workspace, "main", "--set", "bundle.total_tokens=3000", "--set", "bundle.per_file_tokens=100000")
    main = (m.mnt / "context" / "main.md").read_text()
    assert "LONGTERM-MARKER-8812" in main and "SOUL.md — who you are" in main
    agents = main.split("\n## source: AGENTS.md\n", 1)[1].split("\n## source: SOUL.md\n", 1)[0]
    assert "tokens cut here" in agents and "memfs get AGENTS.md --from" in agents
    assert "| AGENTS.md |" in main and "| yes |" in main
    assert "LONGTERM-MARKER-8812" not in (m.mnt / "context" / "shared.md").read_text()


def test_ls_a_lists_dot_and_dotdot(vmount) -> None:
    for folder in (vmount.mnt, vmount.mnt / "memory", vmount.mnt / "search", vmount.mnt / "context"):
        names = subprocess.run(["ls", "-a"], cwd=folder, capture_output=True, text=True, check=True).stdout.split()
        assert names[:2] == [".", ".."], folder
    assert os.stat(vmount.mnt / "memory" / ".").st_ino == os.stat(vmount.mnt / "memory").st_ino


def test_real_search_and_context_folders_are_reachable_with_a_prefix(workspace: Path, mount_factory) -> None:
    write(workspace / "search" / "engines.md", "- REAL-SEARCH-FOLDER: compare search engines\n")
    write(workspace / "context" / "notes.md", "- REAL-CONTEXT-FOLDER\n")
    write(workspace / "memory" / "2026-11-22.md", "- Compared three search engines for the docs site.\n")
    plain = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    log = next((plain.state / "mounts").glob("*.log")).read_text()
    assert "the workspace has a real 'search' folder, which the mount's virtual 'search' hides" in log
    assert (plain.mnt / "search" / "engines.md").read_text().startswith("# memfs search: engines")  # not the file
    # The warning also reaches the terminal of whoever mounted it.
    assert "warning: the workspace has a real 'context' folder" in plain.output and "mount.virtual_prefix" in plain.output

    prefixed = mount_factory(workspace, "main", "--set", "embedding.provider=none",
                             "--set", "mount.virtual_prefix=.memfs/")
    mnt = prefixed.mnt
    assert "REAL-SEARCH-FOLDER" in (mnt / "search" / "engines.md").read_text()
    assert "REAL-CONTEXT-FOLDER" in (mnt / "context" / "notes.md").read_text()
    assert "memory/2026-11-22.md#L1" in (mnt / ".memfs" / "search" / "compared search engines.md").read_text()
    assert (mnt / ".memfs" / "context" / "main.md").read_text().startswith("# memfs context: main")
    assert "agent:      main" in (mnt / ".memfs" / "status").read_text()
    assert ".memfs" not in os.listdir(mnt) and "search" in os.listdir(mnt)
    with pytest.raises(OSError) as raised:
        (mnt / ".memfs" / "search" / "x.md").write_text("no")
    assert raised.value.errno == errno.EROFS


def test_a_rendered_file_s_time_moves_when_its_content_does(mounted) -> None:
    bundle = mounted.mnt / "context" / "main.md"
    before = os.stat(bundle).st_mtime_ns
    assert os.stat(bundle).st_mtime_ns == before  # nothing changed: the same time
    time.sleep(0.05)
    with open(mounted.mnt / "MEMORY.md", "a") as memory_md:
        memory_md.write("- the spare key is under the blue flowerpot\n")
    after = os.stat(bundle)
    assert after.st_mtime_ns > before and b"blue flowerpot" in bundle.read_bytes()


def test_every_documented_options_folder(vmount) -> None:
    """README and AGENTS.md document in=MEMORY.md: a component that parses as options is a
    folder whatever its values end in; only the last component is the query file."""
    search, env = vmount.mnt / "search", {"MEMFS_STATE_DIR": str(vmount.state)}

    def paths(folder: str, query: str) -> set[str]:
        return {r["path"] for r in json.loads((search / folder / f"{query}.json").read_text())["results"]}

    assert paths("in=MEMORY.md", "spare key") == {"MEMORY.md"}
    assert (search / "in=MEMORY.md" / "spare key.md").read_text().count("PRIVATE-MARKER-5521") == 1
    assert paths("n=10,in=MEMORY.md,min=0", "spare key") == {"MEMORY.md"}
    assert paths("in=memory", "painting") == {"memory/2023-05-08.md"}
    assert paths("in=memory:2023-05-08.md", "painting") == {"memory/2023-05-08.md"}
    assert paths("n=10,in=memory,after=2023-05-01", "painting") == {"memory/2023-05-08.md"}
    assert paths("n=10", "painting") and paths("min=0.2", "painting") and paths("n=10,min=0.2", "painting")
    assert paths("in=sessions", "painting") == set() and paths("in=sync", "painting") == set()
    assert (search / "in=MEMORY.md").is_dir()
    with pytest.raises(IsADirectoryError):
        (search / "in=MEMORY.md").read_text()  # a folder, not a search for "in=MEMORY"
    os.listdir(search / "in=MEMORY.md")  # a folder lists
    # A name that does not parse as options is still a query, "=" and all.
    assert json.loads((search / "x=1 or y.json").read_text())["query"] == "x=1 or y"
    # The CLI takes the same scopes.
    for scope, expected in (("MEMORY.md", {"MEMORY.md"}), ("memory", set())):
        cli = memfs_cli("search", "--json", "--in", scope, "spare key", "-w", str(vmount.workspace), env=env)
        assert {r["path"] for r in json.loads(cli.stdout)["results"]} == expected, (scope, cli.stderr)


def test_a_scope_that_holds_nothing_says_so(vmount) -> None:
    env = {"MEMFS_STATE_DIR": str(vmount.state)}
    cli = memfs_cli("search", "--json", "--in", "nothere", "painting", "-w", str(vmount.workspace), env=env)
    payload = json.loads(cli.stdout)
    assert payload["results"] == [] and any("in=nothere" in w and "no indexed file" in w for w in payload["warnings"])
    text = (vmount.mnt / "search" / "in=nothere" / "painting.md").read_text()
    assert "in=nothere: no indexed file is there" in text
    # A scope that holds files but no match is just "No results", without that warning.
    quiet = (vmount.mnt / "search" / "in=MEMORY.md" / "painting sunrise lake.md").read_text()
    assert "no indexed file" not in quiet
    undated = (vmount.mnt / "search" / "in=MEMORY.md,after=2026-11-01" / "spare key.md").read_text()
    assert "No results" in undated and "holds no dates" in undated
