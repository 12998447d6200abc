"""A mount on PostgreSQL started while its server cannot be reached (issue 22, part 6: a host
rebooted during a database outage): the mount starts and serves every file, writes are kept and
owed, searches say the index is unavailable, and when the server answers the index catches up
with the files; a server that then refuses the login (wrong password, another tenant's role)
never serves search results and says why.  Real mounts, a real server of the test's own."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import write

psycopg = pytest.importorskip("psycopg")

from mounts import memfs_cli, mount, unmount, wait_until  # noqa: E402
from test_pg_faults import BOUND_S, SLACK_S, _in_step, _pg_args, _timed  # noqa: E402

from memfs.workspace import init_workspace  # noqa: E402


@pytest.fixture
def admin_of(own_server) -> Iterator[Callable[[Path, str, bool], str]]:
    """The memfs schema on own_server; gives the login DSN of (workspace, agent) or of its
    shared-mode role, as `memfs pg grant` makes them."""
    import pg
    from pg import scratch_database

    from memfs.index.storage.postgres import roles, schema
    from memfs.workspaceid import workspace_id

    with scratch_database(own_server.dsn, "memfs_offline") as admin:
        schema.init(admin)

        def login(workspace: Path, agent: str = "main", shared: bool = False) -> str:
            return roles.grant_login(admin, workspace_id(workspace), agent, shared).dsn

        try:
            yield login
        finally:  # a test that failed while its server was stopped: started for the cleanup
            try:
                psycopg.connect(own_server.dsn, connect_timeout=2).close()
            except psycopg.OperationalError:
                pg.start(own_server)


def test_a_mount_starts_while_the_server_is_down(tmp_path: Path, own_server, admin_of) -> None:
    """`memfs mount` while the server is stopped: it mounts, warning once on the terminal; files
    are read and written; a search says the index is unavailable in bounded time; the server
    started, the index catches up (what was written before the mount and through it) without a
    remount, and `memfs search` and search/<q>.md find it."""
    import pg

    ws = tmp_path / "ws"
    init_workspace(ws)
    write(ws / "MEMORY.md", "# Memory\n\n- The Ocelot sleeps in the attic.\n")
    write(ws / "memory" / "2026-07-01.md", "# 2026-07-01\n\n- Counted the Lanternfish.\n")
    dsn = admin_of(ws)
    state = tmp_path / "state"
    memory = _in_step(ws, tmp_path / "earlier", dsn)  # indexed once, before the outage
    try:
        memory.index()
    finally:
        memory.close()
    write(ws / "memory" / "2026-07-02.md", "# 2026-07-02\n\n- A Marmoset at the window.\n")  # not indexed yet

    pg.stop(own_server)
    (mounted, mount_s) = _timed(lambda: mount(ws, tmp_path / "mnt", state, "main", *_pg_args(dsn)))
    try:
        mnt = mounted.mnt
        said = [line for line in mounted.output.splitlines() if line.startswith("warning:")]
        assert len(said) == 1 and "the index is unavailable: PostgreSQL at 127.0.0.1:" in said[0], mounted.output
        assert "catches up" in said[0] and "Traceback" not in mounted.output, mounted.output
        assert mount_s < 30, mount_s
        # Every file is served from the workspace.
        assert {"MEMORY.md", "memory"} <= {p.name for p in mnt.iterdir()}
        assert "Ocelot" in (mnt / "MEMORY.md").read_text()
        assert "Lanternfish" in (mnt / "memory" / "2026-07-01.md").read_text()
        # A write succeeds (its indexing is owed).
        _, wrote_s = _timed(lambda: (mnt / "memory" / "2026-07-03.md").write_text(
            "# 2026-07-03\n\n- Fed the Quetzal at noon.\n"))
        assert wrote_s < BOUND_S + SLACK_S, wrote_s
        assert "Quetzal" in (ws / "memory" / "2026-07-03.md").read_text()
        text, read_s = _timed(lambda: (mnt / "search" / "Quetzal.md").read_text())
        assert read_s < BOUND_S + SLACK_S, read_s
        assert "the index is unavailable" in text and "memory/2026-07-03.md" not in text, text
        assert "unavailable" in (mnt / ".memfs" / "status").read_text()

        pg.start(own_server)
        began = time.monotonic()
        assert wait_until(lambda: "memory/2026-07-03.md" in (mnt / "search" / "Quetzal.md").read_text(),
                          timeout=60, step=0.2), (mnt / "search" / "Quetzal.md").read_text()
        print(f"\nmounted while down in {mount_s:.2f} s; caught up {time.monotonic() - began:.2f} s after the start")
        assert "memory/2026-07-02.md" in (mnt / "search" / "Marmoset.md").read_text()
        out = memfs_cli("search", "--json", "Quetzal", "-w", str(ws), *_pg_args(dsn),
                        env={"MEMFS_STATE_DIR": str(state)})
        assert out.returncode == 0, out.stderr
        assert [r["path"] for r in json.loads(out.stdout)["results"]][:1] == ["memory/2026-07-03.md"], out.stdout
        # The backlog is embedded too, and the status says nothing is unavailable any more.
        status = mnt / ".memfs" / "status"
        assert wait_until(lambda: "pending:    0 " in (text := status.read_text()) and "unavailable" not in text,
                          timeout=120, step=0.5), status.read_text()
    finally:
        unmount(mounted)
    assert not (tmp_path / "mnt").is_mount()


@pytest.mark.parametrize("refusal, said", [
    ("password", "password authentication failed"),
    ("other_tenant", "is not the login of agent 'main'"),
    ("shared_login", "the shared-mode login of agent main"),
])
def test_a_server_that_answers_with_a_refusal_is_never_searched(tmp_path: Path, own_server, admin_of,
                                                                 refusal: str, said: str) -> None:
    """A mount started while the server is down, with a DSN the server refuses once it answers
    (a wrong password, the login of another workspace's tenant, the main mode on a shared-mode
    login): reads keep saying the index is unavailable, now with the refusal, and no other
    tenant's text is ever served."""
    import pg
    from psycopg.conninfo import make_conninfo

    ws, other = tmp_path / "ws", tmp_path / "other"
    for folder in (ws, other):
        init_workspace(folder)
    write(ws / "memory" / "2026-07-04.md", "# 2026-07-04\n\n- Polished the Sextant.\n")
    write(other / "memory" / "2026-07-04.md", "# 2026-07-04\n\n- Another tenant's Sextant and Zeppelin.\n")
    other_dsn = admin_of(other)
    memory = _in_step(other, tmp_path / "other-state", other_dsn)
    try:
        memory.index()
    finally:
        memory.close()
    before = _files_of(other_dsn)
    dsn = {"password": make_conninfo(admin_of(ws), password="not-the-password"),
           "other_tenant": other_dsn,
           "shared_login": admin_of(ws, "main", True)}[refusal]

    pg.stop(own_server)
    mounted = mount(ws, tmp_path / "mnt", tmp_path / "state", "main", *_pg_args(dsn))
    try:
        mnt = mounted.mnt
        assert "warning: the index is unavailable" in mounted.output, mounted.output
        assert "not-the-password" not in mounted.output
        pg.start(own_server)
        assert wait_until(lambda: said in (mnt / "search" / "Sextant.md").read_text(), timeout=60, step=0.2), (
            (mnt / "search" / "Sextant.md").read_text())
        (mnt / "memory" / "2026-07-05.md").write_text("# 2026-07-05\n\n- A Zeppelin overhead.\n")
        time.sleep(3)  # the catch-up rounds go on: still refused, never a search of the wrong tenant
        for query in ("Sextant", "Zeppelin"):
            text = (mnt / "search" / f"{query}.md").read_text()
            assert "the index is unavailable" in text and said in text, text
            assert "memory/2026-07-04.md" not in text and "Another tenant" not in text, text
        assert said in (mnt / ".memfs" / "status").read_text()
        assert "not-the-password" not in (mnt / ".memfs" / "status").read_text()
        log = (mounted.state / "mounts").glob("*.log")
        assert any(said in path.read_text() for path in log), "the refusal is logged"
        assert "Polished the Sextant" in (mnt / "memory" / "2026-07-04.md").read_text()  # the files still serve
    finally:
        unmount(mounted)
    assert _files_of(other_dsn) == before  # the other tenant's index was not written to


def _files_of(dsn: str) -> list[tuple[str, str]]:
    with psycopg.connect(dsn) as conn:
        return sorted(conn.execute("SELECT path, hash FROM memfs.files").fetchall())


def test_a_shared_mount_started_while_down_shows_no_private_text(tmp_path: Path, own_server, admin_of) -> None:
    """A shared-mode mount (its shared-mode login) started while the server is down: before the
    tenant is known and after, MEMORY.md is neither listed, read, searched nor named as owed."""
    import pg

    ws = tmp_path / "ws"
    init_workspace(ws)
    write(ws / "MEMORY.md", "# Memory\n\n- PRIVATE-WOMBAT: the key is under the stone.\n")
    dsn = admin_of(ws, "main", True)
    pg.stop(own_server)
    mounted = mount(ws, tmp_path / "mnt", tmp_path / "state", "main", "--mode", "shared", *_pg_args(dsn))
    try:
        mnt = mounted.mnt
        assert "warning: the index is unavailable" in mounted.output, mounted.output
        assert "MEMORY.md" not in [p.name for p in mnt.iterdir()]
        with pytest.raises(OSError):
            (mnt / "MEMORY.md").read_text()
        (mnt / "memory" / "2026-07-06.md").write_text("# 2026-07-06\n\n- PUBLIC-WOMBAT crossed the road.\n")
        write(ws / "MEMORY.md", "# Memory\n\n- PRIVATE-WOMBAT: the key is under the stone, and PUBLIC-WOMBAT.\n")
        assert "MEMORY.md" not in (mnt / ".memfs" / "status").read_text()
        pg.start(own_server)
        assert wait_until(lambda: "memory/2026-07-06.md" in (mnt / "search" / "PUBLIC-WOMBAT.md").read_text(),
                          timeout=60, step=0.2), (mnt / "search" / "PUBLIC-WOMBAT.md").read_text()
        for query in ("PUBLIC-WOMBAT", "PRIVATE-WOMBAT", "key under the stone"):
            text = (mnt / "search" / f"{query}.md").read_text()
            assert "MEMORY.md" not in text and "the key is" not in text, text  # (the query is echoed)
        assert "MEMORY.md" not in (mnt / ".memfs" / "status").read_text()
    finally:
        unmount(mounted)
