"""PostgreSQL faults and many writers (issue 22, part 6), on real servers and real mounts: a
server stopped under a running mount (writes still succeed, reads say the index is unavailable in
bounded time, the index catches up by itself when the server returns), several mounts writing at
once (no lost or duplicated rows, reconcile idempotent)."""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from conftest import write

psycopg = pytest.importorskip("psycopg")

from mounts import Mounted, memfs_cli, mount, unmount, wait_until  # noqa: E402

from memfs.config import load_config  # noqa: E402
from memfs.memory import Memory  # noqa: E402
from memfs.workspace import init_workspace, iter_memory_files  # noqa: E402
from memfs.workspaceid import workspace_id  # noqa: E402

BOUND_S = 5.0  # index.timeout_s's default: the longest a read may take to say the index is down
SLACK_S = 3.0  # a loaded machine's scheduling on top of it


@pytest.fixture
def own_index(own_server) -> Iterator[Callable[[Path, str], str]]:
    """The memfs schema on own_server, and the login DSN of (workspace, agent)."""
    from pg import scratch_database

    from memfs.index.storage.postgres import roles, schema
    from memfs.workspaceid import workspace_id

    with scratch_database(own_server.dsn, "memfs_faults") as admin:
        schema.init(admin)

        def login(workspace: Path, agent: str = "main") -> str:
            return roles.grant_login(admin, workspace_id(workspace), agent, False).dsn

        try:
            yield login
        finally:  # a test that failed while its server was stopped: started for the cleanup
            if not _answers(own_server.dsn):
                import pg

                pg.start(own_server)


def _answers(dsn: str) -> bool:
    try:
        psycopg.connect(dsn, connect_timeout=2).close()
    except psycopg.OperationalError:
        return False
    return True


def _pg_args(dsn: str) -> tuple[str, ...]:
    return ("--set", "index.backend=postgres", "--set", f"index.dsn={dsn}")


def _rows(dsn: str) -> dict[str, tuple[str, int]]:
    """The tenant's files as the server holds them: path -> (hash, chunks), and no path twice."""
    with psycopg.connect(dsn) as conn:
        files = conn.execute("SELECT path, hash, chunks FROM memfs.files").fetchall()
        duplicated = conn.execute("SELECT path, start_line, count(*) FROM memfs.chunks GROUP BY path, start_line "
                                  "HAVING count(*) > 1").fetchall()
        counted = dict(conn.execute("SELECT path, count(*) FROM memfs.chunks GROUP BY path").fetchall())
    assert duplicated == [], f"chunks stored twice: {duplicated}"
    assert all(counted.get(path, 0) == chunks for path, _, chunks in files), (files, counted)
    return {path: (digest, chunks) for path, digest, chunks in files}


def _in_step(workspace: Path, state: Path, dsn: str, agent: str = "main") -> Memory:
    """A second process's view of the index (as `memfs index` would open it)."""
    return Memory(load_config(workspace=workspace, agent=agent, env={},
                              overrides=[("state_dir", str(state)), ("index.backend", "postgres"),
                                         ("index.dsn", dsn)]))


def _assert_matches_files(workspace: Path, state: Path, dsn: str) -> None:
    """The index holds every memory file as it is now, once: a reconcile finds nothing to do, twice."""
    memory = _in_step(workspace, state, dsn)
    try:
        for _ in range(2):
            changed = [(o.path, o.action) for o in memory.indexer.reconcile() if o.action not in ("unchanged",)]
            assert changed == [], f"the index was not in step with the files: {changed}"
        assert memory.store.check() == "ok"
        indexed = _rows(dsn)
        assert sorted(indexed) == sorted(iter_memory_files(memory.cfg))
    finally:
        memory.close()


def _on_disk(ws: Path) -> list[str]:
    return sorted(iter_memory_files(load_config(workspace=ws, env={})))


def _timed(action: Callable[[], object]) -> tuple[object, float]:
    began = time.monotonic()
    result = action()
    return result, time.monotonic() - began


def test_a_server_stopped_under_a_mount(tmp_path: Path, own_server, own_index) -> None:
    """Writes through the mount succeed while the server is down; reads say so in bounded time;
    the server back, the index catches up by itself with every change made meanwhile."""
    import pg

    ws = tmp_path / "ws"
    init_workspace(ws)
    write(ws / "memory" / "2026-06-02.md", "# 2026-06-02\n\n- The Gondolier left early.\n")
    dsn = own_index(ws)
    state = tmp_path / "state"
    mounted = mount(ws, tmp_path / "mnt", state, "main", *_pg_args(dsn))
    try:
        mnt = mounted.mnt
        note = mnt / "memory" / "2026-06-01.md"
        note.write_text("# 2026-06-01\n\n- Planted a Marigold by the gate.\n")
        assert "memory/2026-06-01.md" in (mnt / "search" / "Marigold.md").read_text()

        pg.stop(own_server)
        # Writes: a new file, an append, a removal and a rename, each returning promptly.
        during = [f"memory/2026-05-{day:02d}.md" for day in range(1, 21)]
        _, wrote_s = _timed(lambda: (mnt / "memory" / "2026-06-03.md").write_text(
            "# 2026-06-03\n\n- Bought a Tangerine hammock.\n"))
        assert wrote_s < BOUND_S + SLACK_S, wrote_s
        with open(note, "a") as out:
            out.write("- Then a Periwinkle beside it.\n")
        (mnt / "memory" / "2026-06-02.md").unlink()
        for rel in during:
            (mnt / rel).write_text(f"# {rel[7:17]}\n\n- Outage note {rel[7:17]}: the Quokka count.\n")
        (mnt / "memory" / "2026-05-20.md").rename(mnt / "memory" / "2026-05-30.md")
        during[-1] = "memory/2026-05-30.md"

        # Reads: the search file and `memfs search` say the index is unavailable, in bounded time.
        text, read_s = _timed(lambda: (mnt / "search" / "Tangerine hammock.md").read_text())
        assert read_s < BOUND_S + SLACK_S, read_s
        assert "the index is unavailable" in text and "Traceback" not in text, text
        out, cli_s = _timed(lambda: memfs_cli("search", "Tangerine", "-w", str(ws), *_pg_args(dsn),
                                              env={"MEMFS_STATE_DIR": str(state)}))
        assert cli_s < BOUND_S + SLACK_S + 5, cli_s  # + the interpreter's start
        assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
        assert "the index is unavailable" in out.stdout, out.stdout  # the search file's words (the mount answers)
        assert "the index is unavailable" in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
        # The context bundle is read from the files: it answers as ever.
        bundle, bundle_s = _timed(lambda: (mnt / "context" / "main.md").read_text())
        assert bundle_s < BOUND_S + SLACK_S and bundle.startswith("#"), bundle[:200]
        status = (mnt / ".memfs" / "status").read_text()
        assert "unavailable" in status, status
        print(f"\nserver down: write {wrote_s:.2f} s, search file {read_s:.2f} s, memfs search {cli_s:.2f} s, "
              f"context {bundle_s:.2f} s")

        pg.start(own_server)
        began = time.monotonic()
        # No remount: the mount reconnects and catches up with every change made meanwhile.
        assert wait_until(lambda: "memory/2026-06-03.md" in (mnt / "search" / "Tangerine hammock.md").read_text(),
                          timeout=60, step=0.2)
        wanted = sorted(["MEMORY.md", "memory/2026-06-01.md", "memory/2026-06-03.md", *during])
        assert wait_until(lambda: sorted(_rows(dsn)) == wanted, timeout=60, step=0.2), sorted(_rows(dsn))
        caught_s = time.monotonic() - began
        print(f"server back: {len(during) + 3} changes caught up in {caught_s:.2f} s")
        found = (mnt / "search" / "Periwinkle.md").read_text()
        assert "memory/2026-06-01.md" in found, found
        assert "memory/2026-06-02.md" not in (mnt / "search" / "Gondolier.md").read_text()
        _assert_matches_files(ws, tmp_path / "check-state", dsn)
    finally:
        unmount(mounted)


def test_a_memory_reconnects_after_a_restart(tmp_path: Path, own_server, own_index) -> None:
    """The store of a Memory (a daemon's, a mount's) outlives a server restart: a write while it
    is down is kept as owed, a search says the index is unavailable, and after the restart both
    work again without reopening anything."""
    import pg

    ws = tmp_path / "ws"
    init_workspace(ws)
    dsn = own_index(ws)
    memory = _in_step(ws, tmp_path / "state", dsn)
    try:
        write(ws / "memory" / "2026-06-04.md", "# 2026-06-04\n\n- Saw a Heron.\n")
        memory.index()
        pg.stop(own_server)
        write(ws / "memory" / "2026-06-05.md", "# 2026-06-05\n\n- Saw a Kingfisher.\n")
        outcome, took = _timed(lambda: memory.file_changed("memory/2026-06-05.md"))
        assert outcome.action == "owed" and took < BOUND_S + SLACK_S, (outcome, took)
        response, took = _timed(lambda: memory.search("Heron"))
        assert response.results == [] and any("the index is unavailable" in w for w in response.warnings)
        assert took < BOUND_S + SLACK_S
        # What is owed is listed, a private file only to a mode that may see it.
        write(ws / "MEMORY.md", "# Memory\n\n- PRIVATE-OWED: the safe is behind the mirror.\n")
        assert memory.file_changed("MEMORY.md").action == "owed"
        main, shared = memory.status(), memory.status(mode="shared")
        assert main["index_unavailable"].startswith("the index is unavailable: PostgreSQL at 127.0.0.1:"), main
        assert main["owed"] == ["MEMORY.md", "memory/2026-06-05.md"], main
        assert shared["owed"] == ["memory/2026-06-05.md"] and "MEMORY.md" not in repr(shared), shared
        # A sync message while it is down: stored (the files' own ids dedup it), its day file owed.
        message = json.dumps({"id": "m-down-1", "chatId": "c", "chatTitle": "t", "role": "user",
                              "content": "Spotted an Osprey.", "timestamp": 1780000000000}).encode()
        assert memory.ingest_sync(message).stored == 1
        assert memory.ingest_sync(message).duplicates == 1
        pg.start(own_server)
        assert wait_until(lambda: [r.path for r in memory.search("Osprey").results] != [], timeout=30, step=0.2)
        assert wait_until(lambda: [r.path for r in memory.search("Kingfisher").results] == ["memory/2026-06-05.md"],
                          timeout=30, step=0.2)
        assert [r.path for r in memory.search("Heron").results] == ["memory/2026-06-04.md"]
        assert wait_until(lambda: [r.path for r in memory.search("PRIVATE-OWED").results] == ["MEMORY.md"], timeout=30)
        assert "owed" not in memory.status() and "index_unavailable" not in memory.status()
    finally:
        memory.close()


def test_many_writers_at_once(tmp_path: Path, pg_index) -> None:
    """Two mounts of one workspace (two hosts on shared storage: the same tenant) and a mount of
    another workspace, all writing at once: every file indexed once, nothing lost; a reconcile
    afterwards changes nothing, run twice."""
    shared, other = tmp_path / "shared", tmp_path / "other"
    for ws in (shared, other):
        init_workspace(ws)
    dsn_shared, dsn_other = pg_index(shared, "main"), pg_index(other, "main")
    mounts: list[Mounted] = []
    try:
        mounts.append(mount(shared, tmp_path / "mnt-a", tmp_path / "host-a", "main", *_pg_args(dsn_shared)))
        mounts.append(mount(shared, tmp_path / "mnt-b", tmp_path / "host-b", "main", *_pg_args(dsn_shared)))
        mounts.append(mount(other, tmp_path / "mnt-c", tmp_path / "host-c", "main", *_pg_args(dsn_other)))
        errors: list[BaseException] = []

        def writer(m: Mounted, name: str, count: int) -> None:
            try:
                for i in range(count):
                    day = f"2026-08-{i % 28 + 1:02d}"
                    path = m.mnt / "memory" / f"{day}-{name}.md"
                    path.write_text(f"# {day}\n\n- Writer {name} note {i}: Zanzibar{name}{i}.\n")
                    # Both hosts of the shared workspace append to one log, as two agents' sessions do.
                    with open(m.mnt / "memory" / "2026-08-31.md", "a") as log_file:
                        log_file.write(f"- {name} wrote entry {i}.\n")
            except BaseException as exc:  # noqa: BLE001  (reported by the main thread)
                errors.append(exc)

        threads = [threading.Thread(target=writer, args=(m, name, 25))
                   for m, name in ((mounts[0], "a"), (mounts[1], "b"), (mounts[2], "c"))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert errors == []
        for m, name in ((mounts[0], "a"), (mounts[1], "b"), (mounts[2], "c")):
            found = (m.mnt / "search" / f"Zanzibar{name}24.md").read_text()
            assert f"-{name}.md" in found, found
        log_lines = (shared / "memory" / "2026-08-31.md").read_text().splitlines()
        assert len(log_lines) == 50, log_lines  # (appends are atomic: the file is whole)
        for ws, dsn, state in ((shared, dsn_shared, tmp_path / "check-a"), (other, dsn_other, tmp_path / "check-c")):
            # Each mount watches the workspace: what the other host wrote lands too, once.
            assert wait_until(lambda ws=ws, dsn=dsn: sorted(_rows(dsn)) == _on_disk(ws), timeout=60, step=0.2), (
                sorted(_rows(dsn)), _on_disk(ws))
            _assert_matches_files(ws, state, dsn)
    finally:
        for m in mounts:
            unmount(m)


def test_a_reconcile_beside_writes_loses_none(workspace: Path, make_memory, both_backends: str, pg_index) -> None:
    """A reconcile (a catch-up, `memfs index`, a privacy change under a mount) while writes are
    indexed in the same process: a file written after its listing is not removed from the index
    as gone, nor overwritten with what it read before; afterwards reconcile changes nothing, twice."""
    for i in range(300):
        write(workspace / "memory" / f"2025-{i // 28 % 12 + 1:02d}-{i % 28 + 1:02d}-{i}.md",
              f"# day {i}\n\n- Older note {i}.\n")
    on = {"index__backend": "postgres", "index__dsn": pg_index(workspace, "main")} if both_backends == "postgres" else {}
    memory = make_memory(workspace, embedding__provider="none", **on)
    memory.index()
    written: list[str] = []
    done = threading.Event()

    def writer() -> None:
        try:
            for i in range(60):
                rel = f"memory/2026-09-{i % 28 + 1:02d}-{i}.md"
                write(workspace / rel, f"# new {i}\n\n- Fresh note {i}: Xerxesnote{i}.\n")
                memory.file_changed(rel)
                written.append(rel)
                time.sleep(0.005)
        finally:
            done.set()

    thread = threading.Thread(target=writer)
    thread.start()
    rounds = 0
    while not done.is_set() or rounds == 0:
        memory.reconcile()
        rounds += 1
    thread.join()
    indexed = {f.path for f in memory.store.files()}
    assert [rel for rel in written if rel not in indexed] == [], f"lost from the index after {rounds} reconciles"
    assert sorted(indexed) == _on_disk(workspace)
    for _ in range(2):
        assert [o for o in memory.reconcile() if o.action != "unchanged"] == []


@pytest.mark.parametrize("dsn_kind, message", [
    ("syntax", "not a valid DSN"),
    ("password", "password authentication failed"),
    ("no_vector", "has no pgvector"),
    ("not_installed", "extension 'vector' is not installed in this database"),
    ("old_vector", "pgvector 0.7.0 is installed in this database, older than 0.8"),
    ("no_schema", "has no memfs schema: run `memfs pg init DSN` first"),
])
def test_bad_input_at_start_is_one_line(pg_server, pg_index, tmp_path: Path, dsn_kind: str, message: str) -> None:
    """`memfs mount` and a CLI command given a DSN that cannot work: one line saying why, exit 1,
    nothing mounted, no password printed (what `memfs pg init` says is test_pg_isolation's)."""
    import secrets
    import shutil
    import tempfile

    from psycopg.conninfo import make_conninfo
    from test_pg_isolation import _fake_vector

    ws = tmp_path / "ws"
    init_workspace(ws)
    workspace_id(ws)  # as a granted workspace has it: the DSN is what is wrong here
    made: list[str] = []
    if dsn_kind == "syntax":
        dsn = "host=127.0.0.1 password='sec ret"
    elif dsn_kind == "password":
        dsn = make_conninfo(pg_index(ws, "main"), password="not-the-password")
    else:
        if pg_server.bin_dir is None:
            pytest.skip("needs the throwaway server (a superuser sets extension_control_path)")
        name = f"memfs_start_{secrets.token_hex(3)}"
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            admin.execute(f"CREATE DATABASE {name}")
        made.append(name)
        options = {}
        if dsn_kind in ("no_vector", "old_vector"):
            control = Path(tempfile.mkdtemp(prefix="memfs-pgext-"))  # readable by the server's user
            made.append(str(control))
            _fake_vector(control, None if dsn_kind == "no_vector" else "0.7.0")
            options = {"options": f"-c extension_control_path={control}"}
        dsn = make_conninfo(pg_server.dsn, dbname=name, **options)
        if dsn_kind in ("old_vector", "no_schema"):
            with psycopg.connect(dsn, autocommit=True) as conn:
                conn.execute("CREATE EXTENSION vector" + (" VERSION '0.7.0'" if dsn_kind == "old_vector" else ""))
    try:
        env = {"MEMFS_STATE_DIR": str(tmp_path / "state")}
        mnt = tmp_path / "mnt"
        mnt.mkdir()
        for args in (("mount", str(ws), str(mnt)), ("search", "anything", "-w", str(ws)), ("status", "-w", str(ws))):
            out = memfs_cli(*args, *_pg_args(dsn), env=env)
            said = out.stderr.strip().splitlines()
            assert out.returncode == 1 and "Traceback" not in out.stderr and 'File "' not in out.stderr, out.stderr
            assert message in said[-1] and len(said) <= 2, (args[0], out.stderr)  # mount: "the mount failed:" first
            assert "not-the-password" not in out.stderr and "sec ret" not in out.stderr
            assert not os.path.ismount(mnt)
    finally:
        with psycopg.connect(pg_server.dsn, autocommit=True) as admin:
            for name in made:
                if name.startswith("/"):
                    shutil.rmtree(name, ignore_errors=True)
                else:
                    admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def test_a_read_on_a_stuck_server_gives_up_in_bounded_time(workspace: Path, pg_server, pg_index, make_config) -> None:
    """A server that is up but does not answer a read (here: a table locked by someone else) is
    given up on after index.timeout_s, said in one line; a write still waits its turn, and once
    the lock is gone everything answers again."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    write(workspace / "memory" / "2026-06-07.md", "# 2026-06-07\n\n- Fed the Axolotl.\n")
    dsn = pg_index(workspace, "main")
    memory = Memory(make_config(workspace, index__backend="postgres", index__dsn=dsn, index__timeout_s="2"))
    try:
        memory.index()
        admin = make_conninfo(pg_server.dsn, dbname=conninfo_to_dict(dsn)["dbname"])
        with psycopg.connect(admin) as locker:
            locker.execute("LOCK TABLE memfs.chunks IN ACCESS EXCLUSIVE MODE")
            released = threading.Timer(20, locker.cancel_safe)  # never hangs the test for long
            released.start()
            try:
                response, took = _timed(lambda: memory.search("Axolotl"))
            finally:
                released.cancel()
            assert 1.5 < took < 2 + SLACK_S, took
            assert response.results == [] and response.unavailable == (
                f"the index is unavailable: PostgreSQL at 127.0.0.1:{conninfo_to_dict(dsn)['port']} did not answer "
                "within 2 s (index.timeout_s)"), response
            print(f"\nstuck server: search gave up after {took:.2f} s")
        assert wait_until(lambda: [r.path for r in memory.search("Axolotl").results] == ["memory/2026-06-07.md"],
                          timeout=30, step=0.2)
    finally:
        memory.close()
