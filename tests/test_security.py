"""A security review's reproductions, run the way it ran them: as root and as a second,
unprivileged local user, through real mounts and through the CLI.  Each must fail to get in.

- a mount answers its owner: without --allow-other nobody else reaches it; with it, real files keep
  their modes and nothing derived from them (search/, context/, history/, .memfs/) answers others;
- a workspace's .memfs.toml sets preferences only (no URL, credential, model, state folder), and a
  workspace is never found inside a folder a shared-mode writer could have made;
- a state folder of another user's is refused, with nothing written; every state file is 0600;
- the context bundle, like `memfs get`, never follows a symlink out of the workspace;
- a shared mount refuses hard links (a file with two names vanishes from the shared view).

The tests that act as another user create one (``memfs-probe``) when run as root, as CI is, and
skip with the reason elsewhere.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import stat
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import write
from mounts import clean_env, memfs_cli, wait_until
from openai_server import EmbeddingServer

from memfs.state import WorkspaceIdentity, folder_name
from memfs.workspace import init_workspace

OTHER_USER = "memfs-probe"
SECRET = "SECRET-OSPREY-4471"
as_root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root to create and act as a second local user")


@pytest.fixture(scope="session")
def other_user() -> pwd.struct_passwd:
    """A second, unprivileged local user (created once when missing, as tests/pg.py does)."""
    if os.geteuid() != 0:
        pytest.skip("needs root to create and act as a second local user")
    try:
        return pwd.getpwnam(OTHER_USER)
    except KeyError:
        made = subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", OTHER_USER],
                              capture_output=True, text=True)
        if made.returncode != 0 and "already exists" not in made.stderr:
            pytest.skip(f"cannot create a second user: {made.stderr.strip()}")
        return pwd.getpwnam(OTHER_USER)


def as_user(user: pwd.struct_passwd, *cmd: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``cmd`` run as ``user`` (no supplementary groups, a minimal environment)."""

    def drop() -> None:
        os.setgroups([])
        os.setgid(user.pw_gid)
        os.setuid(user.pw_uid)

    env = {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/nonexistent", "LC_ALL": "C"}
    return subprocess.run(cmd, preexec_fn=drop, capture_output=True, text=True, env=env, cwd=cwd, timeout=60)


@pytest.fixture
def world_dir() -> Iterator[Path]:
    """A folder other users may traverse (pytest's folders are root's alone); requested before
    mount_factory, so it is removed after the mounts are gone."""
    base = Path(tempfile.mkdtemp(prefix="memfs-sec-"))
    os.chmod(base, 0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


def _secret_workspace(base: Path) -> Path:
    ws = base / "ws"
    init_workspace(ws)
    os.chmod(ws, 0o755)
    write(ws / "MEMORY.md", f"# Memory\n\n- {SECRET}: the vault combination is 31-07-66.\n")
    os.chmod(ws / "MEMORY.md", 0o600)
    os.chmod(ws / "AGENTS.md", 0o644)
    return ws


def _mount_log(state: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in (state / "mounts").glob("*.log"))


@as_root_only
def test_a_default_mount_answers_its_owner_alone(other_user, world_dir: Path, mount_factory) -> None:
    ws = _secret_workspace(world_dir)
    m = mount_factory(ws, mnt=world_dir / "mnt")
    assert SECRET in (m.mnt / "search" / "vault combination.md").read_text()  # the owner
    for cmd in (["cat", str(m.mnt / "AGENTS.md")], ["ls", str(m.mnt)],
                ["cat", str(m.mnt / "search" / "vault combination.md")],
                ["grep", "-r", SECRET, str(m.mnt)]):
        out = as_user(other_user, *cmd)
        assert out.returncode != 0 and SECRET not in out.stdout, cmd
        assert "Permission denied" in out.stderr, (cmd, out.stderr)


@as_root_only
def test_with_allow_other_nothing_derived_is_more_readable_than_its_file(other_user, world_dir: Path,
                                                                         mount_factory) -> None:
    ws = _secret_workspace(world_dir)
    m = mount_factory(ws, "main", "--allow-other", mnt=world_dir / "mnt")
    # A new version of MEMORY.md through the mount: history/ has it.
    with open(m.mnt / "MEMORY.md", "a") as memory:
        memory.write(f"- {SECRET}: the spare key is under the blue pot.\n")
    assert os.stat(ws / "MEMORY.md").st_mode & 0o777 == 0o600
    versions = sorted(p.name for p in (m.mnt / "history" / "MEMORY.md").iterdir() if p.name != "diff")
    assert versions, "no version of MEMORY.md was kept"
    assert SECRET in (m.mnt / "search" / "vault combination.md").read_text()  # the owner reads it
    assert SECRET in (m.mnt / "context" / "main.md").read_text()

    # Real files keep their modes: the kernel lets the other user read what the file's mode allows.
    public = as_user(other_user, "cat", str(m.mnt / "AGENTS.md"))
    assert public.returncode == 0 and public.stdout == (ws / "AGENTS.md").read_text()
    attempts = {
        "MEMORY.md": ["cat", str(m.mnt / "MEMORY.md")],
        "a search": ["cat", str(m.mnt / "search" / "vault.md")],
        "a search by JSON": ["cat", str(m.mnt / "search" / "n=10,min=0" / "vault combination.json")],
        "the main bundle": ["grep", SECRET, str(m.mnt / "context" / "main.md")],
        "the shared bundle": ["cat", str(m.mnt / "context" / "shared.md")],
        "a version": ["grep", SECRET, str(m.mnt / "history" / "MEMORY.md" / versions[-1])],
        "the history's listing": ["ls", str(m.mnt / "history" / "MEMORY.md")],
        "the recent queries": ["ls", str(m.mnt / "search")],
        "status": ["cat", str(m.mnt / ".memfs" / "status")],
        "a stat of search/": ["stat", str(m.mnt / "search")],
        "grep -r": ["grep", "-r", SECRET, str(m.mnt)],
    }
    for what, cmd in attempts.items():
        out = as_user(other_user, *cmd)
        assert out.returncode != 0 and SECRET not in out.stdout and "vault" not in out.stdout, what
        assert "Permission denied" in out.stderr, (what, out.stderr)
    # The handlers refuse too (not the kernel's check of the modes alone), and say so.
    assert wait_until(lambda: f"refused: uid {other_user.pw_uid} asked for virtual" in _mount_log(m.state))
    st = os.stat(m.mnt / "search")
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o500)
    st = os.stat(m.mnt / "context" / "main.md")
    assert (st.st_uid, stat.S_IMODE(st.st_mode)) == (os.geteuid(), 0o400)


PLANTED_TOML = """state_dir = "{evil}"
[embedding]
provider = "openai"
base_url = "{url}"
api_key_env = "SECRET_TOKEN_VAR"
"""


def test_a_workspace_file_sends_nothing_anywhere(tmp_path: Path) -> None:
    """`memfs index` with a workspace .memfs.toml that names a server, a key's variable and a state
    folder: the review saw MEMORY.md posted with the variable's value as the bearer token."""
    ws = tmp_path / "ws"
    init_workspace(ws)
    write(ws / "MEMORY.md", f"# Memory\n\n- {SECRET}: the vault combination is 31-07-66.\n")
    evil = tmp_path / "evil"
    token = "tok-" + SECRET
    with EmbeddingServer(api_key=token) as server:
        write(ws / ".memfs.toml", PLANTED_TOML.format(evil=evil, url=server.base_url))
        state = tmp_path / "state"
        out = memfs_cli("index", "-w", str(ws), env={"MEMFS_STATE_DIR": str(state), "SECRET_TOKEN_VAR": token})
        assert out.returncode == 0, out.stderr
        assert server.requests == [] and not evil.exists()
        for key in ("state_dir", "embedding.provider", "embedding.base_url", "embedding.api_key_env"):
            assert f"ignoring {key} in {ws / '.memfs.toml'}: a workspace's file may not set it" in out.stderr, key
        assert list((state / "workspaces").glob("*/main.sqlite"))
        shown = memfs_cli("config", "--json", "-w", str(ws), env={"MEMFS_STATE_DIR": str(state)})
        settings = {k: v["value"] for k, v in json.loads(shown.stdout).items()}
        assert settings["embedding.provider"] == "local" and settings["state_dir"] == str(state.resolve())


@as_root_only
def test_a_shared_writer_cannot_make_a_workspace_of_its_own(world_dir: Path, mount_factory) -> None:
    ws = _secret_workspace(world_dir)
    shared = mount_factory(ws, "main", "--mode", "shared", mnt=world_dir / "shared")
    planted = shared.mnt / "memory" / "x"
    planted.mkdir()
    (planted / "memory").mkdir()
    for name in (".memfs.toml", ".memfs-id"):
        with pytest.raises(PermissionError):
            (planted / name).write_text('[embedding]\nprovider = "openai"\n')
        (planted / "note.md").write_text("x\n")
        with pytest.raises(PermissionError):
            os.rename(planted / "note.md", planted / name)
        (planted / "note.md").unlink()
    assert not (ws / "memory" / "x" / ".memfs.toml").exists()
    # Planted beside the mount all the same: a command run in that folder takes the real root.
    write(ws / "memory" / "x" / ".memfs.toml", "[search]\nmax_results = 42\n")
    out = memfs_cli("config", "--json", cwd=ws / "memory" / "x", env={"MEMFS_STATE_DIR": str(shared.state)})
    assert out.returncode == 0, out.stderr
    settings = {k: v["value"] for k, v in json.loads(out.stdout).items()}
    assert settings["workspace"] == str(ws.resolve()) and settings["search.max_results"] == 6


@as_root_only
def test_a_state_folder_of_another_users_is_refused(other_user, world_dir: Path) -> None:
    ws = _secret_workspace(world_dir)
    # The review: the other user pre-creates the predictable folder of the workspace, mode 777, in
    # a folder every user may write to (as /tmp is: sticky, 1777).
    public = world_dir / "tmp"
    public.mkdir()
    os.chmod(public, 0o1777)
    state = public / "state"
    name = folder_name(WorkspaceIdentity.of(ws))
    made = as_user(other_user, "sh", "-c", f"umask 0; mkdir -p -m 777 {state}/workspaces/{name}")
    assert made.returncode == 0, made.stderr
    out = memfs_cli("index", "-w", str(ws), env={"MEMFS_STATE_DIR": str(state)})
    assert out.returncode == 1 and "Traceback" not in out.stderr
    assert f"owned by uid {other_user.pw_uid}" in out.stderr and len(out.stderr.strip().splitlines()) == 1
    assert not [p for p in state.rglob("*") if p.is_file()]
    # A mount is refused the same way, before anything is mounted or written.
    (world_dir / "mnt").mkdir()
    out = memfs_cli("mount", str(ws), str(world_dir / "mnt"), env={"MEMFS_STATE_DIR": str(state)})
    assert out.returncode == 1 and f"uid {other_user.pw_uid}" in out.stderr and "Traceback" not in out.stderr
    assert not os.path.ismount(world_dir / "mnt") and not [p for p in state.rglob("*") if p.is_file()]
    # A state folder of ours that others could enter: the folder they made inside it is refused.
    shutil.rmtree(state)
    state.mkdir(mode=0o777)
    os.chmod(state, 0o777)
    assert as_user(other_user, "mkdir", "-m", "777", str(state / "workspaces")).returncode == 0
    out = memfs_cli("index", "-w", str(ws), env={"MEMFS_STATE_DIR": str(state)})
    assert out.returncode == 1 and f"{state / 'workspaces'} is owned by uid {other_user.pw_uid}" in out.stderr
    assert stat.S_IMODE(state.stat().st_mode) == 0o700  # ours: closed
    assert not [p for p in state.rglob("*") if p.is_file()]
    # A parent another user may change is refused before anything is made below it.
    loose = world_dir / "loose"
    loose.mkdir()
    os.chmod(loose, 0o777)
    out = memfs_cli("index", "-w", str(ws), env={"MEMFS_STATE_DIR": str(loose / "state")})
    assert out.returncode == 1 and "another user could put their own folder in its place" in out.stderr
    assert not (loose / "state").exists()


def test_every_state_file_is_private(tmp_path: Path, mount_factory) -> None:
    ws = tmp_path / "ws"
    init_workspace(ws)
    write(ws / "MEMORY.md", f"# Memory\n\n- {SECRET}\n")
    m = mount_factory(ws)
    with open(m.mnt / "MEMORY.md", "a") as memory:
        memory.write("- one more line\n")
    assert SECRET in (m.mnt / "search" / SECRET.lower()).with_suffix(".md").read_text()
    loose = []
    for path in [m.state, *m.state.rglob("*")]:
        st = os.lstat(path)
        if stat.S_ISSOCK(st.st_mode):
            continue
        wanted = 0o700 if stat.S_ISDIR(st.st_mode) else 0o600
        if stat.S_IMODE(st.st_mode) != wanted or st.st_uid != os.geteuid():
            loose.append(f"{path.relative_to(m.state)} {stat.S_IMODE(st.st_mode):o}")
    assert not loose, loose


@as_root_only
def test_others_cannot_read_the_index(other_user, world_dir: Path) -> None:
    ws = _secret_workspace(world_dir)
    state = world_dir / "state"
    out = memfs_cli("index", "-w", str(ws), env={"MEMFS_STATE_DIR": str(state)})
    assert out.returncode == 0, out.stderr
    os.chmod(state, 0o755)  # even with the state folder opened up by mistake, the files stay closed
    for folder in state.rglob("*"):
        if folder.is_dir():
            os.chmod(folder, 0o755)
    index = next(state.rglob("main.sqlite"))
    out = as_user(other_user, "grep", "-c", "vault combination", str(index))
    assert out.returncode == 2 and "Permission denied" in out.stderr


def test_the_bundle_never_follows_a_link_out_of_the_workspace(tmp_path: Path, mount_factory) -> None:
    ws = tmp_path / "ws"
    init_workspace(ws)
    outside = tmp_path / "home"
    write(outside / ".ssh" / "id_rsa", "-----BEGIN OPENSSH PRIVATE KEY-----\nKEY-MATERIAL-7731\n")
    write(outside / "shadow", "root:$6$SHADOW-HASH-5512:19000:0:99999:7:::\n")
    (ws / "USER.md").unlink()
    (ws / "USER.md").symlink_to(outside / ".ssh" / "id_rsa")
    today = time.strftime("%Y-%m-%d")
    (ws / "memory").mkdir(exist_ok=True)
    (ws / "memory" / f"{today}.md").symlink_to(outside / "shadow")
    (ws / "TOOLS.md").unlink()
    (ws / "TOOLS.md").symlink_to("AGENTS.md")  # a link inside the workspace is read as ever
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state")}
    out = memfs_cli("context", "main", "-w", str(ws), env=env)
    assert out.returncode == 0, out.stderr
    assert "KEY-MATERIAL-7731" not in out.stdout and "SHADOW-HASH-5512" not in out.stdout
    assert "| USER.md | 0 / 0 | missing |" in out.stdout
    assert (ws / "AGENTS.md").read_text().splitlines()[0] in out.stdout.split("TOOLS.md", 1)[1]
    m = mount_factory(ws, "main", "--set", "bundle.timezone=")
    text = (m.mnt / "context" / "main.md").read_text()
    assert "KEY-MATERIAL-7731" not in text and "SHADOW-HASH-5512" not in text
    for rel in ("USER.md", f"memory/{today}.md"):
        got = memfs_cli("get", rel, "-w", str(ws), env=env)
        assert got.returncode == 1 and "outside the workspace" in got.stderr
    # Nor does the history keep a version of what a link leads to.
    listed = memfs_cli("history", "--json", "-w", str(ws), env=env)
    assert "SHADOW" not in listed.stdout and "KEY-MATERIAL" not in listed.stdout


def test_a_shared_mount_refuses_hard_links(workspace: Path, mount_factory) -> None:
    write(workspace / "memory" / "a.md", "- the team picnic is on Sunday\n")
    shared = mount_factory(workspace, "main", "--mode", "shared", mnt=workspace.parent / "shared")
    out = subprocess.run(["ln", str(shared.mnt / "memory" / "a.md"), str(shared.mnt / "memory" / "b.md")],
                         capture_output=True, text=True, env=clean_env())
    assert out.returncode == 1 and "Operation not permitted" in out.stderr
    with pytest.raises(OSError) as refused:
        os.link(shared.mnt / "memory" / "a.md", shared.mnt / "memory" / "c.md")
    assert refused.value.errno == errno.EPERM
    assert sorted(os.listdir(shared.mnt / "memory")) == ["a.md"]  # nothing vanished
    assert os.stat(workspace / "memory" / "a.md").st_nlink == 1
    assert "refused on a shared mount: a hard link" in _mount_log(shared.state)


def test_a_day_file_is_no_more_open_than_its_folder(tmp_path: Path) -> None:
    """Sync day files are made by the memfs process (root, on a root mount): a private inbox
    folder must not give a world-readable day file."""
    ws = tmp_path / "ws"
    init_workspace(ws)
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}
    for mode, day, wanted in ((0o700, 1, 0o600), (0o755, 2, 0o644)):
        (ws / "clawgpt-memory").mkdir(exist_ok=True)
        os.chmod(ws / "clawgpt-memory", mode)
        message = {"id": f"m{day}", "chatId": "c", "chatTitle": "Vault", "role": "user",
                   "content": f"{SECRET} day {day}", "timestamp": 1793613600000 + day * 86_400_000}
        envelope = "[CLAWGPT-SYNC]\n" + json.dumps({"messages": [message]}) + "\n"
        out = memfs_cli("sync", "-w", str(ws), env=env, input=envelope)
        assert out.returncode == 0, out.stderr
        made = [p for p in (ws / "clawgpt-memory").glob("*.jsonl") if f"day {day}" in p.read_text()]
        assert len(made) == 1 and stat.S_IMODE(made[0].stat().st_mode) == wanted & ~_umask()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
