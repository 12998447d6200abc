"""Mounting, unmounting, crashes and recovery, agents side by side."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write
from mounts import clean_env, is_mounted, memfs_cli, wait_until

pytestmark = pytest.mark.fuse


def test_preflight_errors_mount_nothing(workspace: Path, tmp_path: Path) -> None:
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state")}
    full = tmp_path / "full"
    full.mkdir()
    (full / "x").write_text("x")
    cases = [
        ((str(workspace), str(tmp_path / "missing")), "does not exist"),
        ((str(workspace), str(full)), "not empty"),
        ((str(tmp_path / "no-ws"), str(tmp_path)), "workspace"),
        ((str(workspace), str(workspace / "memory")), "inside it"),
        ((str(workspace), str(workspace)), "is the workspace or inside it"),
    ]
    (workspace / "memory" / ".keep").unlink(missing_ok=True)
    for args, message in cases:
        out = memfs_cli("mount", *args, env=env)
        assert out.returncode != 0 and message in out.stderr, (args, out.stderr)
    assert not any(is_mounted(Path(a[1])) for a, _ in cases)


def test_sigterm_unmounts_cleanly(mounted) -> None:
    pid = mounted.pid
    os.kill(pid, signal.SIGTERM)
    assert wait_until(lambda: not is_mounted(mounted.mnt))
    assert wait_until(lambda: mounted.pid is None)


def test_stale_mount_is_detected_and_forced(workspace: Path, mount_factory) -> None:
    first = mount_factory(workspace)
    os.stat(first.mnt)  # the kernel now caches the root's attributes for mount.attr_timeout_s
    pid = first.pid
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not os.path.exists(f"/proc/{pid}"))
    env = {"MEMFS_STATE_DIR": str(first.state)}
    again = memfs_cli("mount", str(workspace), str(first.mnt), env=env)
    assert again.returncode != 0 and "stale mount" in again.stderr and "--force" in again.stderr
    started = time.monotonic()
    mount_factory(workspace, "main", "--force", mnt=first.mnt)  # at once, not after the cache expires
    assert time.monotonic() - started < 8 and (first.mnt / "AGENTS.md").exists()


def _stat_errno(path: Path) -> int:
    try:
        os.stat(path)
    except OSError as exc:
        return exc.errno
    return 0


def test_umount_clears_a_stale_mount(workspace: Path, mount_factory) -> None:
    m = mount_factory(workspace)
    os.kill(m.pid, signal.SIGKILL)
    assert wait_until(lambda: _stat_errno(m.mnt) == errno.ENOTCONN)
    out = memfs_cli("umount", str(m.mnt), env={"MEMFS_STATE_DIR": str(m.state)})
    assert out.returncode == 0 and not is_mounted(m.mnt)


WRITER = r"""
import os, sys
path = sys.argv[1]
fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
for i in range(100000):
    os.write(fd, f"- acknowledged record {i:06d}\n".encode())
    os.fsync(fd)
    print(i, flush=True)
"""


def test_sigkill_during_writes_loses_no_acknowledged_byte(workspace: Path, mount_factory) -> None:
    m = mount_factory(workspace)
    target = m.mnt / "memory" / "2026-11-22.md"
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(target)], stdout=subprocess.PIPE, text=True)
    acked = -1
    while acked < 200:
        line = writer.stdout.readline()
        if not line:
            break
        acked = int(line)
    os.kill(m.pid, signal.SIGKILL)
    for line in writer.stdout:  # records fsynced before the kill may still be reported
        acked = int(line)
    writer.wait(timeout=30)
    content = (workspace / "memory" / "2026-11-22.md").read_text()
    for i in range(acked + 1):
        assert f"- acknowledged record {i:06d}\n" in content
    memfs_cli("umount", str(m.mnt), env={"MEMFS_STATE_DIR": str(m.state)})
    healed = mount_factory(workspace, mnt=m.mnt)
    memory = healed.memory(**{"embedding.provider": "local"})
    try:
        hits = memory.search(f"acknowledged record {acked:06d}", max_results=20, min_score=0).results
        assert any(f"{acked:06d}" in r.snippet for r in hits)
        assert memory.store.check() == "ok"
    finally:
        memory.close()


def test_edits_made_while_unmounted_are_reconciled(workspace: Path, mount_factory) -> None:
    write(workspace / "MEMORY.md", "- The cat is called Biscuit.\n")
    m = mount_factory(workspace)
    assert m.search_json("cat name Biscuit")["results"]
    memfs_cli("umount", str(m.mnt), env={"MEMFS_STATE_DIR": str(m.state)})
    write(workspace / "MEMORY.md", "- The cat is called Pretzel.\n")
    write(workspace / "memory" / "2026-11-21.md", "- Adopted a second cat named Waffles.\n")
    m2 = mount_factory(workspace, mnt=m.mnt)
    assert any("Pretzel" in r["snippet"] for r in m2.search_json("cat name Pretzel")["results"])
    assert not any("Biscuit" in r["snippet"] for r in m2.search_json("Biscuit")["results"])
    assert m2.search_json("Waffles")["results"]


def test_second_agent_has_its_own_index(tmp_path: Path, mount_factory) -> None:
    main_ws, work_ws = tmp_path / "home-ws", tmp_path / "work-ws"
    write(main_ws / "MEMORY.md", "- Private: the safe combination is PELICAN-42.\n")
    write(work_ws / "MEMORY.md", "- Work: standup is at nine.\n")
    main = mount_factory(main_ws, "main")
    work = mount_factory(work_ws, "work")
    (work.mnt / "memory").mkdir()
    (work.mnt / "memory" / "2026-11-22.md").write_text("- Sprint review moved to Friday.\n")
    assert main.search_json("PELICAN-42")["results"]
    assert not work.search_json("PELICAN-42 safe combination")["results"]
    assert not main.search_json("sprint review Friday")["results"]
    assert work.search_json("sprint review Friday")["results"]
    indexes = {p.name for p in (tmp_path / "state" / "workspaces").glob("*/*.sqlite")}
    assert indexes == {"main.sqlite", "work.sqlite", "main.history.sqlite", "work.history.sqlite"}
    folders = {p.parent for p in (tmp_path / "state" / "workspaces").glob("*/*.history.sqlite")}
    assert len(folders) == 2  # each workspace's versions beside its own index


def cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat_file:
        fields = stat_file.read().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def test_daemon_stops_polling_once_requests_stop(mounted) -> None:
    """Busy polling after requests must end with them: an idle mount uses no CPU."""
    pid = mounted.pid
    assert pid is not None
    plain = mounted.mnt / "notes.txt"
    plain.write_text("x\n")
    started = time.monotonic()
    while time.monotonic() - started < 1.0:  # a burst of back-to-back requests
        os.stat(plain)
        with open(plain, "a") as handle:
            handle.write("y\n")
    busy_before = cpu_seconds(pid)
    time.sleep(0.3)  # the poller's window is 1 ms; let the watcher's last batch settle
    idle_start = cpu_seconds(pid)
    time.sleep(2.0)
    idle = cpu_seconds(pid) - idle_start
    assert busy_before > 0.2  # the daemon did serve the burst
    assert idle < 0.3, f"the daemon used {idle:.2f} s of CPU in 2 s with no requests"


@pytest.mark.skipif(os.geteuid() != 0, reason="only root may set a mount's read-ahead")
def test_mount_raises_its_read_ahead(workspace: Path, mount_factory, tmp_path: Path) -> None:
    m = mount_factory(workspace, mnt=tmp_path / "mount point")  # a space: escaped in /proc's tables
    device = os.stat(m.mnt).st_dev
    setting = Path(f"/sys/class/bdi/{os.major(device)}:{os.minor(device)}/read_ahead_kb")
    assert setting.read_text().strip() == "1024"
    data = os.urandom(5 << 20)
    (m.mnt / "big.bin").write_bytes(data)
    assert (m.mnt / "big.bin").read_bytes() == data
    assert (workspace / "big.bin").read_bytes() == data


def test_commands_run_inside_a_mount_use_its_workspace_and_mode(workspace: Path, mount_factory) -> None:
    write(workspace / "memory" / "2026-11-20.md", "- We adopted a greyhound called Pixel.\n")
    write(workspace / "MEMORY.md", "- INSIDE-SECRET-2291: the safe is behind the painting.\n")
    main = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    shared = mount_factory(workspace, "main", "--mode", "shared", "--set", "embedding.provider=none",
                           mnt=workspace.parent / "shared-mnt")
    env = {"MEMFS_STATE_DIR": str(main.state), "MEMFS_EMBEDDING_PROVIDER": "none"}
    here = subprocess.run([sys.executable, "-m", "memfs", "search", "greyhound Pixel"], cwd=main.mnt / "memory",
                          capture_output=True, text=True, env={**clean_env(), **env}, timeout=120)
    assert "memory/2026-11-20.md#L1" in here.stdout and "not been indexed" not in here.stdout
    status = subprocess.run([sys.executable, "-m", "memfs", "status", "--json"], cwd=main.mnt,
                            capture_output=True, text=True, env={**clean_env(), **env}, timeout=120)
    assert json.loads(status.stdout)["workspace"] == str(workspace)
    from_shared = subprocess.run([sys.executable, "-m", "memfs", "search", "INSIDE-SECRET-2291 safe"],
                                 cwd=shared.mnt, capture_output=True, text=True, env={**clean_env(), **env},
                                 timeout=120)
    assert "behind the painting" not in from_shared.stdout  # the shared mount's mode came along
    assert "behind the painting" in subprocess.run(
        [sys.executable, "-m", "memfs", "search", "INSIDE-SECRET-2291 safe"], cwd=main.mnt, capture_output=True,
        text=True, env={**clean_env(), **env}, timeout=120).stdout


def test_the_daemon_runs_this_memfs_not_one_in_the_callers_folder(workspace: Path, tmp_path: Path) -> None:
    """`python -m` puts the current folder first on sys.path: a `memfs` folder where the user
    stands (another checkout, a planted one) must not become the daemon."""
    from mounts import Mounted, unmount

    shadow = tmp_path / "shadow"
    (shadow / "memfs").mkdir(parents=True)
    marker = tmp_path / "shadow-ran"
    (shadow / "memfs" / "__init__.py").write_text("")
    (shadow / "memfs" / "__main__.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\nraise SystemExit(3)\n")
    mnt, state = tmp_path / "mnt", tmp_path / "state"
    mnt.mkdir()
    console = Path(sys.executable).parent / "memfs"
    out = subprocess.run([str(console), "mount", str(workspace), str(mnt)], cwd=shadow, capture_output=True,
                         text=True, env={**clean_env(), "MEMFS_STATE_DIR": str(state)}, timeout=120)
    try:
        assert out.returncode == 0, out.stderr
        assert is_mounted(mnt) and not marker.exists()
    finally:
        unmount(Mounted(workspace, mnt, state, "main"))


def test_a_mount_inside_a_memfs_mount_is_refused(mounted) -> None:
    """`cd MNT; memfs mount . sub` would show the workspace inside itself."""
    (mounted.mnt / "sub").mkdir()
    out = subprocess.run([sys.executable, "-m", "memfs", "mount", ".", "sub"], cwd=mounted.mnt, capture_output=True,
                         text=True, env={**clean_env(), "MEMFS_STATE_DIR": str(mounted.state)}, timeout=120)
    try:
        assert out.returncode != 0 and "inside the memfs mount" in out.stderr, out.stderr
        assert not is_mounted(mounted.mnt / "sub")
    finally:
        if is_mounted(mounted.mnt / "sub"):
            subprocess.run(["fusermount3", "-u", "-z", str(mounted.mnt / "sub")], capture_output=True)


def test_a_time_zone_this_machine_does_not_know_is_said_on_the_terminal_at_mount(
        workspace: Path, mount_factory, monkeypatch) -> None:
    monkeypatch.setenv("TZ", "America/New_Yrok")  # a typo: the C library takes it as UTC without a word
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    assert "memfs: warning: TZ=America/New_Yrok is not a time zone this machine knows" in m.output, m.output
    monkeypatch.setenv("TZ", "America/New_York")
    assert "TZ=" not in mount_factory(workspace, "other", "--set", "embedding.provider=none").output


def test_a_mount_that_fails_to_start_shows_its_own_log_lines_not_an_earlier_failures(tmp_path: Path) -> None:
    from memfs.config import load_config
    from memfs.fs.mount import MountError, start_background

    (tmp_path / "ws").mkdir()
    cfg = load_config(workspace=tmp_path / "ws", overrides=[("state_dir", str(tmp_path / "state"))])
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    for attempt in ("first", "second"):
        fail = [sys.executable, "-c", f"import sys; print('{attempt} attempt: cannot mount'); sys.exit(3)"]
        with pytest.raises(MountError) as failed:
            start_background(cfg, mnt, fail, timeout=30)
        assert f"{attempt} attempt: cannot mount" in str(failed.value)
    assert "first attempt" not in str(failed.value), str(failed.value)


def test_a_mount_started_inside_another_mount_does_not_keep_it_busy(workspace: Path, mount_factory,
                                                                    tmp_path: Path) -> None:
    """`cd MNT1; memfs mount --mode shared WS MNT2`: the second mount's process must not stand in
    MNT1 (MNT1 could then not be unmounted), and the paths it was given relative to MNT1 are
    kept as they were meant (its settings are loaded again when .memfs.toml changes)."""
    from mounts import Mounted, unmount

    first = mount_factory(workspace)
    second = Mounted(workspace, tmp_path / "shared-mnt", first.state, "main")
    second.mnt.mkdir()
    write(tmp_path / "settings.toml", "[search]\nmin_score = 0.0\n")
    env = {**clean_env(), "MEMFS_STATE_DIR": str(first.state)}
    out = subprocess.run([sys.executable, "-m", "memfs", "mount", "--mode", "shared", "--config", "../settings.toml",
                          str(workspace), str(second.mnt)], cwd=first.mnt, capture_output=True, text=True, env=env,
                         timeout=120)
    try:
        assert out.returncode == 0, out.stderr
        gone = subprocess.run([sys.executable, "-m", "memfs", "umount", str(first.mnt)], capture_output=True,
                              text=True, env=env, timeout=120)
        assert gone.returncode == 0 and not is_mounted(first.mnt), gone.stderr
        assert os.readlink(f"/proc/{second.pid}/cwd") == "/"
        assert (second.mnt / "memory").is_dir()  # the second mount goes on
        records = [json.loads(r.read_text()) for r in (first.state / "mounts").glob("*.json")]
        assert [r["config_file"] for r in records if r["mountpoint"] == str(second.mnt)] == \
            [str(tmp_path / "settings.toml")]
    finally:
        unmount(second)


def test_umount_refused_for_a_memfs_process_inside_the_mount_names_it(tmp_path: Path, mounted) -> None:
    """An MCP host starts `memfs mcp -w OTHER` in MNT (an MCP server stays where it was started:
    its tools read paths relative to it), and it keeps OTHER's index current itself: the refusal
    says it is memfs's own daemon, not just "python".  (`memfs serve` leaves its folder.)"""
    workspace = write(tmp_path / "other" / "MEMORY.md", "# Memory\n").parent
    env = {**clean_env(), "MEMFS_STATE_DIR": str(mounted.state), "MEMFS_EMBEDDING_PROVIDER": "none"}
    daemon = subprocess.Popen([sys.executable, "-m", "memfs", "mcp", "-w", str(workspace)], cwd=mounted.mnt,
                              stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    try:
        from memfs.serve.listing import serving

        assert wait_until(lambda: daemon.pid in [p["pid"] for p in serving(mounted.state, workspace, "main")]
                          or daemon.poll() is not None, timeout=60), list((mounted.state / "run").iterdir())
        assert daemon.poll() is None, daemon.stderr.read() if daemon.stderr else ""
        out = memfs_cli("umount", str(mounted.mnt), env={"MEMFS_STATE_DIR": str(mounted.state)})
        assert out.returncode == 1 and is_mounted(mounted.mnt), out.stdout
        assert f"is busy: `memfs mcp` (pid {daemon.pid}) has {mounted.mnt};" in out.stderr, out.stderr
    finally:
        daemon.terminate()
        daemon.wait(timeout=60)
        if daemon.stdin is not None:
            daemon.stdin.close()
