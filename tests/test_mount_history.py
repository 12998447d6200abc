"""history/ on a real mount: what vim, sed -i, an atomic replace, `>` and rm leave behind is
readable byte for byte, with the program that did it; restore; read-only; private on a shared
mount; nothing acknowledged is lost to kill -9; text forgotten on purpose is gone from every route
and from the history database's bytes."""

from __future__ import annotations

import base64
import errno
import json
import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import history_leaks
from mounts import clean_env, is_mounted, memfs_cli, wait_until

pytestmark = pytest.mark.fuse

SECRET = "the safe combination is PELICAN-42"


def versions_on(mnt: Path, rel: str) -> dict[str, bytes]:
    folder = mnt / "history" / rel
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def history_json(m, rel: str, *extra: str) -> dict:
    out = memfs_cli("history", rel, "--json", "-w", str(m.workspace), *extra, env={"MEMFS_STATE_DIR": str(m.state)})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def test_every_program_s_rewrite_leaves_the_earlier_content_readable(mounted) -> None:
    mnt, ws = mounted.mnt, mounted.workspace
    memory_md = mnt / "MEMORY.md"
    contents = [memory_md.read_bytes()]
    env = {**os.environ, "HOME": str(mounted.state)}
    # vim, in Ex mode (no terminal): its default save renames the file aside and writes a new one.
    subprocess.run(["vim", "-u", "NONE", "-N", "-es", "-c", "set swapfile backup writebackup backupcopy=no",
                    "-c", "%s/# Long-term Memory/# Memory (edited in vim)/", "-c", "wq", str(memory_md)],
                   check=True, env=env, timeout=30)
    contents.append(memory_md.read_bytes())
    subprocess.run(["sed", "-i", "s/edited in vim/edited by sed/", str(memory_md)], check=True, timeout=30)
    contents.append(memory_md.read_bytes())
    atomic = ("import os, sys, tempfile; p = sys.argv[1]; fd, t = tempfile.mkstemp(dir=os.path.dirname(p)); "
              "os.write(fd, b'# Memory\\n- replaced whole by python\\n'); os.fsync(fd); os.close(fd); os.replace(t, p)")
    subprocess.run([sys.executable, "-c", atomic, str(memory_md)], check=True, timeout=30)
    contents.append(memory_md.read_bytes())
    subprocess.run(["sh", "-c", f"echo '- truncated by the shell' > '{memory_md}'"], check=True, timeout=30)
    contents.append(memory_md.read_bytes())
    assert len(set(contents)) == 5 and contents[-1] == b"- truncated by the shell\n"
    subprocess.run(["rm", str(memory_md)], check=True, timeout=30)
    assert not (ws / "MEMORY.md").exists()

    kept = versions_on(mnt, "MEMORY.md")
    assert list(kept.values()) == contents  # every content, byte for byte, oldest first
    for name, data in kept.items():
        assert (mnt / "history" / "MEMORY.md" / name).stat().st_size == len(data)  # ls -l agrees with cat
    listed = history_json(mounted, "MEMORY.md")
    assert [v["version"] for v in listed["versions"]] == list(kept)
    assert listed["deleted"] is not None
    processes = [v["process"] for v in listed["versions"]]
    assert processes[1] == "vim" and processes[2] == "sed" and processes[3].startswith("python")
    assert processes[4] == "sh" and all(v["via"] == "mount" for v in listed["versions"][1:])
    assert all(v["uid"] == os.getuid() and v["pid"] for v in listed["versions"][1:])
    deleted = memfs_cli("history", "--deleted", "-w", str(ws), env={"MEMFS_STATE_DIR": str(mounted.state)})
    assert deleted.returncode == 0 and deleted.stdout.startswith("MEMORY.md\tdeleted ")
    diff = (mnt / "history" / "MEMORY.md" / "diff" / f"{listed['versions'][2]['version']}.diff").read_text()
    assert "-# Memory (edited in vim)" in diff and "+# Memory (edited by sed)" in diff

    # Restore the vim version through the mount's daemon: the file is back, searchable, and the
    # restore is itself a version.
    vim_version = listed["versions"][1]["version"]
    out = memfs_cli("restore", "MEMORY.md", vim_version, "-w", str(ws), env={"MEMFS_STATE_DIR": str(mounted.state)})
    assert out.returncode == 0, out.stderr
    assert wait_until(lambda: (mnt / "MEMORY.md").exists() and (mnt / "MEMORY.md").read_bytes() == contents[1])
    after = history_json(mounted, "MEMORY.md")
    assert after["deleted"] is None and after["versions"][-1]["via"] == "cli"
    assert after["versions"][-1]["sha256"] == listed["versions"][1]["sha256"]
    hits = mounted.search_json("edited in vim")["results"]
    assert any(r["path"] == "MEMORY.md" for r in hits)


def test_history_is_read_only_hidden_from_the_root_and_answers_missing_names(mounted) -> None:
    mnt = mounted.mnt
    (mnt / "memory" / "2026-11-22.md").write_text("- one\n")
    with open(mnt / "memory" / "2026-11-22.md", "a") as log:
        log.write("- two\n")
    assert "history" not in os.listdir(mnt)
    folder = mnt / "history" / "memory" / "2026-11-22.md"
    assert sorted(os.listdir(mnt / "history" / "memory")) == ["2026-11-22.md"]
    names = sorted(p for p in os.listdir(folder) if p != "diff")
    assert [(folder / n).read_text() for n in names] == ["- one\n", "- one\n- two\n"]
    version = folder / names[0]
    for attempt in (lambda: version.write_text("x"), lambda: os.unlink(version), lambda: (folder / "new").touch(),
                    lambda: os.mkdir(folder / "d"), lambda: os.rename(version, folder / "other.md"),
                    lambda: os.chmod(version, 0o644), lambda: os.truncate(version, 0)):
        with pytest.raises(OSError) as refused:
            attempt()
        assert refused.value.errno == errno.EROFS
    for missing in (mnt / "history" / "nothere.md", folder / "2020-01-01T00-00-00Z.md", folder / "diff" / "x.diff"):
        with pytest.raises(FileNotFoundError):
            missing.stat()
    assert (folder / "diff" / f"{names[1]}.diff").read_text().endswith("+- two\n")


def test_a_shared_mount_has_no_history_of_private_files(workspace: Path, tmp_path: Path, mount_factory) -> None:
    (workspace / "MEMORY.md").write_text(f"# Memory\n- {SECRET}\n")
    main = mount_factory(workspace)
    shared = mount_factory(workspace, "main", "--mode", "shared", mnt=tmp_path / "shared")
    (main.mnt / "MEMORY.md").write_text("# Memory\n- rewritten\n")
    (main.mnt / "memory" / "2026-11-22.md").write_text("- public note\n")
    assert SECRET.encode() in b"".join(versions_on(main.mnt, "MEMORY.md").values())
    assert wait_until(lambda: (shared.mnt / "history" / "memory" / "2026-11-22.md").exists())
    assert "MEMORY.md" not in os.listdir(shared.mnt / "history")
    with pytest.raises(FileNotFoundError):
        os.stat(shared.mnt / "history" / "MEMORY.md")
    grep = subprocess.run(["grep", "-r", "PELICAN", str(shared.mnt / "history")], capture_output=True, text=True)
    assert grep.returncode == 1 and SECRET not in grep.stdout
    env = {"MEMFS_STATE_DIR": str(shared.state)}
    for args in (["history", "MEMORY.md"], ["history", "MEMORY.md", "--json"], ["history", "--deleted", "--json"]):
        out = memfs_cli("--mode", "shared", *args, "-w", str(workspace), env=env)
        assert "PELICAN" not in out.stdout + out.stderr and "MEMORY.md" not in out.stdout, args
    status = memfs_cli("--mode", "shared", "status", "--json", "-w", str(workspace), env=env)
    assert "history" not in status.stdout


def test_changes_beside_the_mount_are_kept_by_the_watcher(mounted) -> None:
    ws = mounted.workspace
    before = (ws / "MEMORY.md").read_bytes()
    (ws / "MEMORY.md").write_text("# Memory\n- edited beside the mount\n")
    assert wait_until(lambda: len(versions_on(mounted.mnt, "MEMORY.md")) == 2)
    kept = list(versions_on(mounted.mnt, "MEMORY.md").values())
    assert kept == [before, b"# Memory\n- edited beside the mount\n"]
    assert history_json(mounted, "MEMORY.md")["versions"][-1]["via"] == "watcher"


def test_retention_prunes_oldest_first_while_mounted_and_at_mount_but_never_the_newest(
        workspace: Path, mount_factory) -> None:
    from mounts import unmount

    m = mount_factory(workspace, "main", "--set", "history.max_mb=0.02")  # 20 KiB, about 10 of the rewrites
    for i in range(80):  # more than a prune's interval (64 versions); stored compressed, so random text
        (m.mnt / "MEMORY.md").write_bytes(f"# Memory\n- rewrite {i:03d}\n".encode() + base64.b64encode(os.urandom(1500)))
    kept = versions_on(m.mnt, "MEMORY.md")
    assert 5 <= len(kept) < 40, len(kept)
    assert list(kept.values())[-1] == (m.mnt / "MEMORY.md").read_bytes()
    assert list(kept.values())[0].startswith(b"# Memory\n- rewrite 0")  # the oldest went first
    status = memfs_cli("status", "--json", "-w", str(workspace), env={"MEMFS_STATE_DIR": str(m.state)})
    info = json.loads(status.stdout)
    assert info["history_versions"] == len(kept)
    assert info["history_bytes"] < 2 << 20  # the database and a write-ahead log cut back to 1 MiB
    assert "history:" in memfs_cli("status", "-w", str(workspace), env={"MEMFS_STATE_DIR": str(m.state)}).stdout
    (m.mnt / "memory" / "2026-11-22.md").write_text("- a log with one version\n")
    unmount(m)
    m = mount_factory(workspace, "main", "--set", "history.keep_days=0", mnt=m.mnt)
    assert list(versions_on(m.mnt, "MEMORY.md").values()) == [(workspace / "MEMORY.md").read_bytes()]
    assert list(versions_on(m.mnt, "memory/2026-11-22.md").values()) == [b"- a log with one version\n"]


def test_the_cli_finds_a_deleted_file_from_where_the_caller_stands(mounted) -> None:
    mnt = mounted.mnt
    env = {"MEMFS_STATE_DIR": str(mounted.state)}
    (mnt / "memory" / "draft.md").write_text("- a draft\n")
    os.unlink(mnt / "memory" / "draft.md")
    out = memfs_cli("history", "draft.md", "--json", env=env, cwd=mnt / "memory")  # gone, yet relative to here
    assert out.returncode == 0, out.stderr
    name = json.loads(out.stdout)["versions"][0]["version"]
    assert json.loads(out.stdout)["path"] == "memory/draft.md"
    inside = mnt / "history" / "MEMORY.md"
    for spelled in (".", "../../MEMORY.md"):  # inside history/, a file's folder stands for the file
        out = memfs_cli("history", spelled, "--json", env=env, cwd=inside)
        assert out.returncode == 0 and json.loads(out.stdout)["path"] == "MEMORY.md", (spelled, out.stderr)
    restored = memfs_cli("restore", "draft.md", name.removesuffix(".md"), env=env, cwd=mnt / "memory")
    assert restored.returncode == 0, restored.stderr  # the extension may be left off
    assert (mnt / "memory" / "draft.md").read_text() == "- a draft\n"


def test_concurrent_appenders_leave_a_history_that_only_grows(mounted) -> None:
    log = mounted.mnt / "memory" / "2026-11-17.md"
    script = f"for i in $(seq 40); do echo \"- w$W $i\" >> '{log}'; done"
    writers = [subprocess.Popen(["bash", "-c", script], env={**os.environ, "W": str(w)}) for w in range(4)]
    for writer in writers:
        assert writer.wait(timeout=60) == 0
    time.sleep(0.5)  # the watcher has seen the echoes
    kept = list(versions_on(mounted.mnt, "memory/2026-11-17.md").values())
    assert kept[-1] == log.read_bytes() and len(log.read_bytes().splitlines()) == 160
    for older, newer in zip(kept, kept[1:]):  # each version is an earlier state of the log: a prefix
        assert newer.startswith(older) and newer != older
    vias = [v["via"] for v in history_json(mounted, "memory/2026-11-17.md")["versions"]]
    assert set(vias) == {"mount"}, f"{vias.count('watcher')} of {len(vias)} credited to the watcher"


SLOW_WRITER = r"""
import sys, time
with open(sys.argv[1], sys.argv[2]) as f:
    time.sleep(0.4)  # long enough for a watcher beside it to look
    f.write("- written slowly\n"); f.flush()
    time.sleep(0.4)
"""


def test_a_slow_write_through_one_mount_is_not_versioned_half_done_by_another(
        workspace: Path, tmp_path: Path, mount_factory) -> None:
    main = mount_factory(workspace)
    mount_factory(workspace, "main", "--mode", "shared", mnt=tmp_path / "shared")  # its watcher sees main's writes
    log = main.mnt / "memory" / "2026-11-19.md"
    log.write_text("- original\n")
    for mode in ("w", "a"):  # `>`: truncated, then written a moment later; `>>`
        subprocess.run([sys.executable, "-c", SLOW_WRITER, str(log), mode], check=True, timeout=30)
    time.sleep(0.3)
    versions = history_json(main, "memory/2026-11-19.md")["versions"]
    assert [v["size"] for v in versions] == [11, 17, 34], [(v["size"], v.get("via"), v.get("process")) for v in versions]  # never the empty file between
    assert {v["via"] for v in versions} == {"mount"} and versions[-1]["process"].startswith("python")


REWRITER = r"""
import os, sys
path, start = sys.argv[1], int(sys.argv[2])
for i in range(start, start + 100000):
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    os.write(fd, (f"# Memory\n- rewrite {i:06d}\n" + "- filler line to make it longer\n" * (i % 7)).encode())
    os.fsync(fd)
    os.close(fd)
    print(i, flush=True)
"""


def rewrite_content(i: int) -> bytes:
    return (f"# Memory\n- rewrite {i:06d}\n" + "- filler line to make it longer\n" * (i % 7)).encode()


def test_kill_9_loses_neither_the_old_nor_an_acknowledged_new_version(workspace: Path, mount_factory) -> None:
    original = (workspace / "MEMORY.md").read_bytes()
    acked: list[int] = []
    m = None
    for round_ in range(3):
        m = mount_factory(workspace, mnt=m.mnt if m else None)
        writer = subprocess.Popen([sys.executable, "-c", REWRITER, str(m.mnt / "MEMORY.md"), str(round_ * 100000)],
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        target = 40 + 25 * round_  # a different moment in each round
        seen = 0
        while seen < target:
            line = writer.stdout.readline()
            if not line:
                break
            acked.append(int(line))
            seen += 1
        os.kill(m.pid, signal.SIGKILL)
        for line in writer.stdout:  # fsynced before the kill, reported after
            acked.append(int(line))
        writer.wait(timeout=30)
        memfs_cli("umount", str(m.mnt), env={"MEMFS_STATE_DIR": str(m.state)})
        assert not is_mounted(m.mnt)
    final = mount_factory(workspace, mnt=m.mnt)  # reconciliation keeps what the last kill left in the file
    kept = set(versions_on(final.mnt, "MEMORY.md").values())
    assert original in kept
    missing = [i for i in acked if rewrite_content(i) not in kept]
    assert not missing, f"{len(missing)} acknowledged rewrites lost, first {missing[:5]}"
    assert (workspace / "MEMORY.md").read_bytes() in kept


MISTAKE = "the alarm code is KESTREL-5150"


def all_versions(mnt: Path) -> dict[str, bytes]:
    """Every version on the mount's history/, by path/name (diffs left out)."""
    out = {}
    for folder, dirs, files in os.walk(mnt / "history"):
        dirs[:] = [d for d in dirs if d != "diff"]
        for name in files:
            out[os.path.relpath(os.path.join(folder, name), mnt / "history")] = Path(folder, name).read_bytes()
    return out


def answer_prompt(argv: list[str], env: dict[str, str], reply: bytes) -> tuple[int, str]:
    """Run ``memfs argv`` on a terminal, answer its question with ``reply``; (exit code, output)."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: nothing of pytest may run here
        os.execve(sys.executable, [sys.executable, "-m", "memfs", *argv], {**clean_env(), **env})
    seen = b""
    try:
        while b"Forget them?" not in seen:
            seen += os.read(fd, 4096)
        os.write(fd, reply)
        while chunk := os.read(fd, 4096):
            seen += chunk
    except OSError:  # EIO: the child has closed the terminal
        pass
    finally:
        os.close(fd)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]), seen.decode(errors="replace")


def test_text_appended_by_mistake_and_forgotten_is_on_no_route_and_not_in_the_history_file(
        workspace: Path, tmp_path: Path, mount_factory) -> None:
    (workspace / "MEMORY.md").write_text(f"# Memory\n- {MISTAKE}\n")
    main = mount_factory(workspace)
    shared = mount_factory(workspace, "main", "--mode", "shared", mnt=tmp_path / "shared")
    env = {"MEMFS_STATE_DIR": str(main.state)}
    rel = "memory/2026-11-22.md"
    (main.mnt / rel).write_text("- 08:00 coffee\n")
    subprocess.run(["sh", "-c", f"cat MEMORY.md >> {rel}"], cwd=main.mnt, check=True, timeout=30)  # the mistake
    assert MISTAKE in (main.mnt / rel).read_text()
    subprocess.run(["sh", "-c", f"printf -- '- 08:00 coffee\\n' > {rel}"], cwd=main.mnt, check=True, timeout=30)
    subprocess.run(["sh", "-c", f"echo '- 09:00 standup' >> {rel}"], cwd=main.mnt, check=True, timeout=30)
    assert (main.mnt / rel).read_text() == "- 08:00 coffee\n- 09:00 standup\n"
    # Undone, yet kept: a shared mount's history/ shows MEMORY.md's text under the log's name.
    assert wait_until(lambda: any(MISTAKE.encode() in v for v in versions_on(shared.mnt, rel).values()))
    before = all_versions(main.mnt)
    holding = sorted(k for k, v in before.items() if MISTAKE.encode() in v)
    assert {k.rpartition("/")[0] for k in holding} == {"MEMORY.md", rel}
    kept = {k: v for k, v in before.items() if MISTAKE.encode() not in v}
    assert len(kept) >= 3

    (db,) = (main.state / "workspaces").glob("*/main.history.sqlite")
    assert history_leaks(db, MISTAKE.encode())  # compressed, so only the zlib scan sees it
    argv = ["history", "forget", "--containing", MISTAKE, "-w", str(workspace)]
    # Without a terminal and without --yes: listed, refused, nothing forgotten.
    piped = memfs_cli(*argv, env=env, input="y\n")
    assert piped.returncode == 1 and "pass --yes" in piped.stderr
    # On a terminal: the list (paths and version names, never the text), then y/N; "n" keeps all.
    code, shown = answer_prompt(argv, env, b"n\n")
    assert code == 1 and "nothing was forgotten" in shown, shown
    assert all(k.rpartition("/")[2] in shown for k in holding) and "KESTREL" not in shown
    assert all_versions(main.mnt) == before
    # A shared caller can neither forget nor learn whether any version holds the text.
    refused = memfs_cli("--mode", "shared", *argv, "--yes", env={"MEMFS_STATE_DIR": str(shared.state)})
    assert refused.returncode == 1 and "may not forget" in refused.stderr and "MEMORY.md" not in refused.stdout

    done = memfs_cli(*argv, "--yes", env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(f"forgot {len(holding)} versions of 2 files") and "KESTREL" not in done.stdout
    assert "note: MEMORY.md holds that text now" in done.stderr and "warning" not in done.stderr

    # No route shows it: the shared mount's history/ (versions and diffs), the main one, the CLI.
    for mnt in (shared.mnt, main.mnt):
        grep = subprocess.run(["grep", "-r", "KESTREL", str(mnt / "history")], capture_output=True, text=True)
        assert grep.returncode == 1, grep.stdout
    for key in holding:
        with pytest.raises(FileNotFoundError):
            (shared.mnt / "history" / key).read_bytes()
    listed = history_json(main, rel)
    forgotten = [k.rpartition("/")[2] for k in holding if k.startswith(rel + "/")]
    assert [f["version"] for f in listed["forgotten"]] == forgotten and listed["forgotten"][0]["via"] == "cli"
    assert not set(forgotten) & {v["version"] for v in listed["versions"]}
    shared_env = {"MEMFS_STATE_DIR": str(shared.state)}
    for version in forgotten:
        out = memfs_cli("--mode", "shared", "history", rel, version, "-w", str(workspace), env=shared_env)
        assert out.returncode == 1 and "KESTREL" not in out.stdout
    out = memfs_cli("history", rel, "-w", str(workspace), env=env)
    # Names are padded to the longest (a version taken in the same second as another has a suffix).
    assert "KESTREL" not in out.stdout and re.search(rf"^{re.escape(forgotten[0])} +forgotten ", out.stdout, re.M), \
        out.stdout
    # Not in the history database's bytes (the file, its write-ahead log, its shared memory).
    assert history_leaks(db, MISTAKE.encode()) == []
    # Everything else reads back byte for byte; the files themselves are untouched.
    assert all_versions(main.mnt) == kept
    assert MISTAKE in (main.mnt / "MEMORY.md").read_text()
    assert (main.mnt / rel).read_text() == "- 08:00 coffee\n- 09:00 standup\n"


def test_forget_refused_inside_a_shared_mount_says_where_it_can_be_run(workspace: Path, tmp_path: Path,
                                                                      mount_factory) -> None:
    """Inside a shared mount `--mode main` is refused: the refusal must point to what works."""
    main = mount_factory(workspace)
    shared = mount_factory(workspace, "main", "--mode", "shared", mnt=tmp_path / "shared")
    rel = "memory/2026-11-22.md"
    (main.mnt / rel).write_text("- 08:00 coffee with FALCON-77\n")
    (main.mnt / rel).write_text("- 08:00 coffee\n")
    env = {**clean_env(), "MEMFS_STATE_DIR": str(main.state)}
    argv = [sys.executable, "-m", "memfs", "history", "forget", "--containing", "FALCON-77", "--yes"]
    refused = subprocess.run(argv, cwd=shared.mnt / "memory", capture_output=True, text=True, env=env, timeout=120)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert refused.stderr == (f"Error: shared mode may not forget versions: only the main mode, which sees every "
                              f"version, may: {shared.mnt / 'memory'} is inside the shared-mode mount {shared.mnt}, "
                              "where the main mode is not available; run it from a folder outside any shared-mode "
                              f"mount with --mode main -w {workspace}\n")
    # What it says works, from outside (here: the main mount), MEMFS_MODE=shared notwithstanding.
    done = subprocess.run([*argv, "--mode", "main", "-w", str(workspace)], cwd=main.mnt, capture_output=True,
                          text=True, env={**env, "MEMFS_MODE": "shared"}, timeout=120)
    assert done.returncode == 0 and done.stdout.startswith("forgot 1 version of 1 file"), done.stdout + done.stderr
