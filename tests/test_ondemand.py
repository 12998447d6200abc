"""A warm CLI with nothing set up: a command that needs the index and finds no daemon starts
`memfs serve` on demand and asks it; later commands get the same bytes from it; it stops when
idle; --no-daemon, MEMFS_NO_DAEMON and daemon.on_demand=false start nothing; two commands at once
start one daemon; a shared-mode command's daemon never shows MEMORY.md, nor answers the main mode.
Real processes and sockets; conftest's no_daemon_left stops whatever a test leaves running."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import SECRET, write
from mounts import clean_env, wait_until

from memfs.mounttable import alive


def on_demand_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    return {**clean_env(), "MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_DAEMON_ON_DEMAND": "true", **extra}


def run(*args: str, env: dict[str, str], cwd: Path | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "memfs", *args], capture_output=True, text=True, env=env,
                          cwd=cwd, input=input, timeout=120)


def records(tmp_path: Path) -> list[dict]:
    folder = tmp_path / "state" / "run"
    return [json.loads(p.read_text()) for p in sorted(folder.glob("*.json"))] if folder.exists() else []


def started_pid(stderr: str) -> int:
    found = re.search(r"started a daemon for .* on demand \(pid (\d+)", stderr)
    assert found, stderr
    return int(found.group(1))


@pytest.fixture
def workspace(cli_workspace: Path) -> Path:
    return cli_workspace


COMMANDS = [
    ["status"], ["status", "--json"], ["get", "MEMORY.md"], ["get", "memory/2023-05-08.md", "--lines", "3"],
    ["search", "LGBTQ support group"], ["search", "medication allergy", "--json"], ["context"],
    ["get", "nope.md"],
]


def test_the_first_command_starts_a_daemon_that_answers_the_next_with_the_same_bytes(
        tmp_path: Path, workspace: Path) -> None:
    env = on_demand_env(tmp_path)
    first = run("-v", "status", "-w", str(workspace), env=env)
    assert first.returncode == 0, first.stderr
    pid = started_pid(first.stderr)
    assert f"status answered by the daemon with pid {pid}" in first.stderr
    [record] = records(tmp_path)
    assert record["pid"] == pid and record["kind"] == "on-demand" and record["idle_s"] == 600
    assert os.readlink(f"/proc/{pid}/cwd") == "/"  # it keeps no folder busy
    # Compare a settled index: the daemon embeds in the background.
    assert wait_until(lambda: json.loads(run("status", "--json", "-w", str(workspace), env=env).stdout)["pending"]
                      == 0, timeout=120)
    for args in COMMANDS:
        warm = run("-v", *args, "-w", str(workspace), env=env)
        assert f"answered by the daemon with pid {pid}" in warm.stderr and "started a daemon" not in warm.stderr, args
        quiet = run(*args, "-w", str(workspace), env=env)
        cold = run(*args, "--no-daemon", "-w", str(workspace), env=env)
        assert (quiet.stdout, quiet.stderr, quiet.returncode) == (cold.stdout, cold.stderr, cold.returncode), args
    # `memfs status` says who serves the workspace, in text and JSON.
    text = run("status", "-w", str(workspace), env=env).stdout
    assert f"served by:  pid {pid}: memfs serve, started on demand (main mode, answers commands, stops after " \
           "600 s without a request)" in text
    listed = json.loads(run("status", "--json", "-w", str(workspace), env=env).stdout)["processes"]
    assert listed == [{"pid": pid, "kind": "on-demand", "mode": "main", "mountpoint": None, "idle_s": 600.0,
                       "answers": True}]
    # With the config key off, a running daemon is still asked.
    off = run("-v", "get", "AGENTS.md", "-w", str(workspace), env={**env, "MEMFS_DAEMON_ON_DEMAND": "false"})
    assert f"answered by the daemon with pid {pid}" in off.stderr


def test_it_stops_when_idle_and_a_hand_started_serve_does_not(tmp_path: Path, workspace: Path) -> None:
    env = on_demand_env(tmp_path, MEMFS_DAEMON_IDLE_S="2")
    pid = started_pid(run("-v", "status", "-w", str(workspace), env=env).stderr)
    deadline = time.monotonic() + 4  # requests keep it up
    while time.monotonic() < deadline:
        out = run("-v", "get", "AGENTS.md", "-w", str(workspace), env=env)
        assert f"answered by the daemon with pid {pid}" in out.stderr
        time.sleep(0.5)
    assert wait_until(lambda: not alive(pid), timeout=60), "the daemon never stopped"
    assert records(tmp_path) == []
    log = next((tmp_path / "state" / "run").glob("*.log")).read_text()
    assert "no request for 2 s: stopping" in log and "Traceback" not in log
    # `memfs serve` started by hand runs until stopped, whatever daemon.idle_s says, unless --idle.
    hand = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(workspace)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    idle = subprocess.Popen([sys.executable, "-m", "memfs", "serve", "--idle", "1", "--agent", "other",
                             str(workspace)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        assert wait_until(lambda: any(r["pid"] == hand.pid for r in records(tmp_path)), timeout=90)
        _, err = idle.communicate(timeout=90)
        assert idle.returncode == 0 and "no request for 1 s: stopping" in err
        time.sleep(3)
        assert hand.poll() is None
    finally:
        hand.terminate()
        hand.wait(timeout=60)
        if idle.poll() is None:
            idle.kill()
            idle.wait()


def test_no_daemon_and_the_config_key_start_nothing(tmp_path: Path, workspace: Path) -> None:
    env = on_demand_env(tmp_path)
    for args in (["--no-daemon", "status"], ["status", "--no-daemon"], ["search", "penicillin", "--no-daemon"]):
        out = run("-v", *args, "-w", str(workspace), env=env)
        assert out.returncode == 0 and "answered in this process" in out.stderr, (args, out.stderr)
    out = run("-v", "status", "-w", str(workspace), env={**env, "MEMFS_NO_DAEMON": "1"})
    assert "answered in this process" in out.stderr
    out = run("-v", "status", "-w", str(workspace), env={**env, "MEMFS_DAEMON_ON_DEMAND": "false"})
    assert "answered in this process" in out.stderr
    write(workspace / ".memfs.toml", "[daemon]\non_demand = false\n")
    unset = {k: v for k, v in env.items() if k != "MEMFS_DAEMON_ON_DEMAND"}  # the file decides
    out = run("-v", "search", "support group", "-w", str(workspace), env=unset)
    assert out.returncode == 0 and "answered in this process" in out.stderr, out.stderr
    (workspace / ".memfs.toml").unlink()
    for args in (["--help"], ["--version"], ["config"], ["config", "--json"], ["status", "--help"],
                 ["-w", str(workspace), "config"]):
        out = run(*args, env=env, cwd=workspace)
        assert out.returncode == 0, (args, out.stderr)
    assert records(tmp_path) == [] and not list((tmp_path / "state" / "run").glob("*.log"))


def test_two_commands_at_once_start_one_daemon(tmp_path: Path, workspace: Path) -> None:
    env = on_demand_env(tmp_path)
    procs = [subprocess.Popen([sys.executable, "-m", "memfs", "-v", "get", "AGENTS.md", "-w", str(workspace)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs) and {o for o, _ in outs} == {"# Agents\nRead MEMORY.md first.\n"}
    [record] = records(tmp_path)
    for _, err in outs:
        assert f"answered by the daemon with pid {record['pid']}" in err, err
    with open(next((tmp_path / "state" / "run").glob("*.log"))) as log:
        assert log.read().count("memfs.serve.daemon: serving ") == 1

    def daemons() -> list[str]:
        return [p for p in os.listdir("/proc") if p.isdigit() and alive(int(p)) and _on_demand_in(int(p), tmp_path)]

    # The others said "taken" and are closing what they opened; on a busy machine that takes a moment.
    assert wait_until(lambda: daemons() == [str(record["pid"])], timeout=30), daemons()


def _on_demand_in(pid: int, tmp_path: Path) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as cmdline:
            argv = cmdline.read().split(b"\0")
        with open(f"/proc/{pid}/environ", "rb") as environ:
            mine = f"MEMFS_STATE_DIR={tmp_path / 'state'}".encode() in environ.read().split(b"\0")
    except OSError:
        return False
    return b"--on-demand" in argv and mine


def test_a_shared_command_starts_a_shared_daemon_that_never_shows_private_memory(
        tmp_path: Path, workspace: Path) -> None:
    env = on_demand_env(tmp_path)
    shared = run("-v", "--mode", "shared", "search", "penicillin allergy", "-w", str(workspace), env=env)
    assert shared.returncode == 0, shared.stderr
    shared_pid = started_pid(shared.stderr)
    assert f"answered by the daemon with pid {shared_pid}" in shared.stderr
    assert "penicillin" not in shared.stdout.replace("# memfs search: penicillin allergy", "") \
        and "MEMORY.md" not in shared.stdout
    [record] = records(tmp_path)
    assert record["mode"] == "shared" and record["kind"] == "on-demand"
    for args in (["get", "MEMORY.md"], ["context", "main"], ["context"], ["status"], ["status", "--json"]):
        out = run("-v", "--mode", "shared", *args, "-w", str(workspace), env=env)
        assert SECRET not in out.stdout + out.stderr, args
        assert f"answered by the daemon with pid {shared_pid}" in out.stderr, args
    # A main command is not answered by the shared daemon: it starts its own, and sees MEMORY.md.
    main = run("-v", "search", "penicillin allergy", "-w", str(workspace), env=env)
    main_pid = started_pid(main.stderr)
    assert main_pid != shared_pid and f"answered by the daemon with pid {main_pid}" in main.stderr
    assert SECRET in main.stdout
    again = run("-v", "--mode", "shared", "get", "MEMORY.md", "-w", str(workspace), env=env)
    assert again.returncode == 1 and SECRET not in again.stdout + again.stderr
    assert {(r["mode"], r["pid"]) for r in records(tmp_path)} == {("shared", shared_pid), ("main", main_pid)}


def test_a_rebuild_and_a_mount_take_over_from_a_daemon_started_on_demand(tmp_path: Path, workspace: Path) -> None:
    env = on_demand_env(tmp_path)
    pid = started_pid(run("-v", "status", "-w", str(workspace), env=env).stderr)
    rebuilt = run("index", "--rebuild", "-w", str(workspace), env=env)
    assert rebuilt.returncode == 0, rebuilt.stderr
    assert wait_until(lambda: not alive(pid), timeout=5)
    # `memfs serve` started by hand takes the socket from a daemon started on demand.
    pid = started_pid(run("-v", "status", "-w", str(workspace), env=env).stderr)
    hand = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(workspace)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        assert wait_until(lambda: [r["pid"] for r in records(tmp_path)] == [hand.pid], timeout=90)
        assert wait_until(lambda: not alive(pid), timeout=30)  # it lets go of the key, then finishes
        out = run("-v", "status", "-w", str(workspace), env=env)
        assert f"answered by the daemon with pid {hand.pid}" in out.stderr and "started a daemon" not in out.stderr
    finally:
        hand.terminate()
        hand.wait(timeout=60)


@pytest.mark.fuse
def test_a_mount_takes_over_and_unmounts_with_a_daemon_started_inside_it(tmp_path: Path, workspace: Path,
                                                                           mount_factory) -> None:
    env = on_demand_env(tmp_path)
    pid = started_pid(run("-v", "status", "-w", str(workspace), env=env).stderr)
    mounted = mount_factory(workspace)
    assert wait_until(lambda: not alive(pid), timeout=30)
    out = run("-v", "get", "MEMORY.md", cwd=mounted.mnt, env=env)
    assert f"answered by the daemon with pid {mounted.pid}" in out.stderr and SECRET in out.stdout
    text = run("status", "-w", str(workspace), env=env).stdout
    assert f"served by:  pid {mounted.pid}: mount on {mounted.mnt} (main mode, answers commands)" in text
    # A daemon started from a command inside the mount (another agent: the mount does not answer
    # it) leaves the folder it was started in, so the mount can be unmounted.
    # (Its index made first: a reading command refuses an agent no index knows, as a likely typo.)
    assert run("index", "--agent", "other", "--no-daemon", cwd=mounted.mnt / "memory", env=env).returncode == 0
    other = run("-v", "status", "--agent", "other", cwd=mounted.mnt / "memory", env=env)
    other_pid = started_pid(other.stderr)
    assert "agent:      other" in other.stdout and os.readlink(f"/proc/{other_pid}/cwd") == "/"
    out = run("umount", str(mounted.mnt), env=env)
    assert out.returncode == 0, out.stderr


def test_a_daemon_of_other_code_answers_no_command_of_a_new_install_and_gives_way(
        tmp_path: Path, workspace: Path) -> None:
    env = on_demand_env(tmp_path)
    old = run("-v", "status", "-w", str(workspace), env=env)
    pid = started_pid(old.stderr)
    # The same command from another installation (an upgrade rewrote memfs; another virtualenv).
    upgraded = subprocess.run(
        [sys.executable, "-c", "import sys; import memfs.serve.wire as w; w.CODE = 'an upgraded memfs'; "
         "from memfs.quickcli import main; sys.argv = ['memfs', *sys.argv[1:]]; main()",
         "-v", "status", "-w", str(workspace)], capture_output=True, text=True, env=env, timeout=120)
    assert upgraded.returncode == 0, upgraded.stderr
    assert f"answered by the daemon with pid {pid}" not in upgraded.stderr and "agent:      main" in upgraded.stdout
    assert wait_until(lambda: not alive(pid), timeout=30)  # it gave way: the next command starts the new code
    again = run("-v", "status", "-w", str(workspace), env=env)
    assert started_pid(again.stderr) != pid
