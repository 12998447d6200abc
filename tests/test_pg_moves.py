"""Workspaces that move, on PostgreSQL: a workspace found at another path (moved, or reached
through another mountpoint as another host with shared storage reaches it) finds its index by
its own id (.memfs-id) without reading or embedding anything again; two mounts of one workspace
on one tenant keep one index that matches the files; and `memfs pg grant` writes the id only
when the grant succeeds."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import write
from mounts import memfs_cli, mount, unmount, wait_until

psycopg = pytest.importorskip("psycopg")

from memfs.config import load_config  # noqa: E402
from memfs.memory import Memory  # noqa: E402
from memfs.workspace import init_workspace  # noqa: E402
from memfs.workspaceid import ID_FILE, read_id  # noqa: E402


def _pg(dsn: str) -> list[str]:
    return ["--set", "index.backend=postgres", "--set", f"index.dsn={dsn}"]


def _rows(dsn: str) -> dict[str, object]:
    """The tenant's index as the server holds it: files, chunks with their ids and vectors' state,
    units, and the generation that any change of content bumps."""
    with psycopg.connect(dsn) as conn:
        return {
            "files": conn.execute("SELECT path, hash, chunks FROM memfs.files ORDER BY path").fetchall(),
            "chunks": conn.execute("SELECT chunk_id, path, start_line, end_line, hash, embedded, embedding::text "
                                   "FROM memfs.chunks ORDER BY chunk_id").fetchall(),
            "units": conn.execute("SELECT unit_id, chunk_id, hash, packed FROM memfs.units ORDER BY unit_id").fetchall(),
            "content_generation": conn.execute("SELECT value FROM memfs.meta WHERE key = 'content_generation'"
                                               ).fetchone()[0],
        }


def test_a_moved_workspace_finds_its_index_without_indexing_again(tmp_path: Path, pg_index, locomo_day) -> None:
    ws = tmp_path / "host1" / "ws"
    init_workspace(ws)
    locomo_day(ws)
    write(ws / "memory" / "2026-03-01.md", "# 2026-03-01\n\n- Bought a red kayak called Zephyrine.\n")
    write(ws / "MEMORY.md", "# Memory\n\n- The kayak key hides under the blue bucket.\n")
    dsn = pg_index(ws, "main")
    first = memfs_cli("index", "--json", "-w", str(ws), *_pg(dsn), env={"MEMFS_STATE_DIR": str(tmp_path / "state1")})
    assert first.returncode == 0, first.stderr
    before = _rows(dsn)
    assert before["chunks"] and all(c[5] for c in before["chunks"])  # embedded

    # Another host: the folder at another path (copied across, as `mv` to another file system
    # does: new inodes, same bytes and times), its own state directory, and its own runtime
    # folder, where any model call would start the embedding service.
    moved = tmp_path / "host2" / "shared" / "renamed-ws"
    moved.parent.mkdir(parents=True)
    shutil.copytree(ws, moved)
    shutil.rmtree(ws)
    runtime = tmp_path / "run2"
    runtime.mkdir(mode=0o700)
    host2 = {"MEMFS_STATE_DIR": str(tmp_path / "state2"), "XDG_RUNTIME_DIR": str(runtime)}
    again = memfs_cli("index", "--json", "-w", str(moved), *_pg(dsn), env=host2)
    assert again.returncode == 0, again.stderr
    report = json.loads(again.stdout)
    assert report["summary"] == {"unchanged": len(before["files"])}, report
    assert report["status"]["pending"] == 0
    assert not list((runtime / "memfs").glob("embed-*")), list((runtime / "memfs").iterdir())  # no model call
    assert _rows(dsn) == before  # not one row re-read, re-chunked or re-embedded

    # A copy whose files were rewritten (new times, same bytes) is recognised by content too.
    for path in (moved / "memory").iterdir():
        os.utime(path, (1_000_000_000, 1_000_000_000))
    touched = memfs_cli("index", "--json", "-w", str(moved), *_pg(dsn), env=host2)
    assert json.loads(touched.stdout)["summary"] == {"unchanged": len(before["files"])}, touched.stdout
    assert not list((runtime / "memfs").glob("embed-*"))
    assert [c[:6] for c in _rows(dsn)["chunks"]] == [c[:6] for c in before["chunks"]]

    found = memfs_cli("search", "--json", "red kayak Zephyrine", "-w", str(moved), *_pg(dsn), env=host2)
    assert json.loads(found.stdout)["results"][0]["path"] == "memory/2026-03-01.md", found.stdout


@contextlib.contextmanager
def _second_path(ws: Path, alias: Path) -> Iterator[Path]:
    """The workspace reached through another mountpoint (a bind mount, as shared storage is
    mounted on another host); where bind mounts are not allowed, a symlink."""
    alias.mkdir(parents=True)
    bound = subprocess.run(["mount", "--bind", str(ws), str(alias)], capture_output=True).returncode == 0
    if not bound:
        alias.rmdir()
        alias.symlink_to(ws)
    try:
        yield alias
    finally:
        if bound:
            subprocess.run(["umount", "-l", str(alias)], capture_output=True)


def _search_file(mnt: Path, query: str) -> str:
    return (mnt / "search" / f"{query}.md").read_text()


def test_two_mounts_of_one_workspace_keep_one_index(tmp_path: Path, pg_index, locomo_day) -> None:
    ws = tmp_path / "storage" / "ws"
    init_workspace(ws)
    locomo_day(ws)
    dsn = pg_index(ws, "main")
    mounted = []
    with _second_path(ws, tmp_path / "host2-storage" / "ws") as other:
        try:
            one = mount(ws, tmp_path / "mnt1", tmp_path / "state1", "main", *_pg(dsn))
            mounted.append(one)
            two = mount(other, tmp_path / "mnt2", tmp_path / "state2", "main", *_pg(dsn))
            mounted.append(two)
            # Written through one, found through the other (its search file and `memfs search`).
            write(one.mnt / "memory" / "2026-05-01.md", "# 2026-05-01\n\n- Adopted a tortoise named Wobblesworth.\n")
            assert wait_until(lambda: "Wobblesworth" in _search_file(two.mnt, "tortoise Wobblesworth"), timeout=60)
            assert "memory/2026-05-01.md#L" in _search_file(two.mnt, "tortoise Wobblesworth")
            write(two.mnt / "memory" / "2026-05-02.md", "# 2026-05-02\n\n- Repainted the shed in teal.\n")
            assert wait_until(lambda: "teal" in _search_file(one.mnt, "shed repainted teal"), timeout=60)
            found = memfs_cli("search", "--json", "shed repainted teal", "-w", str(other), *_pg(dsn),
                              env={"MEMFS_STATE_DIR": str(tmp_path / "state3")})
            assert json.loads(found.stdout)["results"][0]["path"] == "memory/2026-05-02.md", found.stdout
            # Both write the same day file, one after the other, and each another line at once.
            day = "memory/2026-05-03.md"
            write(one.mnt / day, "# 2026-05-03\n\n- Morning: fed the tortoise.\n")
            with open(two.mnt / day, "a") as out:
                out.write("- Evening: the tortoise slept in the shed.\n")
            write(one.mnt / "memory" / "2026-05-04.md", "# 2026-05-04\n\n- One wrote this.\n")
            write(two.mnt / "memory" / "2026-05-05.md", "# 2026-05-05\n\n- Two wrote this.\n")
            assert wait_until(lambda: "slept in the shed" in _search_file(one.mnt, "tortoise slept in the shed")
                              and "slept in the shed" in _search_file(two.mnt, "tortoise slept in the shed"),
                              timeout=60)
            assert wait_until(lambda: _matches_files(ws, dsn, tmp_path), timeout=60), _matches_files(ws, dsn, tmp_path,
                                                                                                 explain=True)
        finally:
            for m in mounted:
                unmount(m)


def _matches_files(ws: Path, dsn: str, tmp_path: Path, explain: bool = False) -> bool | str:
    """Whether the tenant's rows are what a fresh index of the files holds: the same files with
    the same hashes, the same chunks (path, lines, hash) once each, nothing waiting."""
    fresh = Memory(load_config(workspace=ws, env={}, overrides=[("state_dir", str(tmp_path / "fresh")),
                                                              ("embedding.provider", "none")]))
    try:
        fresh.index()
        want_files = sorted((f.path, f.hash) for f in fresh.store.files())
        want_chunks = sorted((c.path, c.start_line, c.end_line, c.hash) for c in fresh.store.chunks_by_id(
            range(1, 5000)).values())
    finally:
        fresh.close()
    with psycopg.connect(dsn) as conn:
        have_files = sorted(conn.execute("SELECT path, hash FROM memfs.files").fetchall())
        have_chunks = sorted(conn.execute("SELECT path, start_line, end_line, hash FROM memfs.chunks").fetchall())
        pending = conn.execute("SELECT count(*) FROM memfs.chunks WHERE NOT embedded").fetchone()[0]
        stats = conn.execute("SELECT coalesce(sum(chunks), 0) FROM memfs.corpus_stats").fetchone()[0]
    ok = have_files == want_files and have_chunks == want_chunks and pending == 0 and stats == len(have_chunks)
    if explain:
        return (f"files {have_files} vs {want_files}; chunks {have_chunks} vs {want_chunks}; pending {pending}; "
                f"stats {stats}")
    return ok


def test_grant_writes_the_id_only_when_it_succeeds(tmp_path: Path, pg_server) -> None:
    from pg import scratch_database
    from psycopg.conninfo import make_conninfo

    ws = tmp_path / "ws"
    init_workspace(ws)
    with scratch_database(pg_server.dsn, "memfs_grant") as admin:
        # No schema yet, a server that is not there, a DSN refused: no id written.
        closed = make_conninfo(admin, port="1")
        for dsn in (admin, closed, make_conninfo(admin, user="nobody_here", password="x")):
            failed = memfs_cli("pg", "grant", "--workspace", str(ws), "--agent", "main", "--dsn", dsn)
            assert failed.returncode == 1 and "Traceback" not in failed.stderr, failed.stderr
            assert not (ws / ID_FILE).exists(), (dsn, failed.stderr)
            assert [p.name for p in ws.iterdir() if p.name.startswith(ID_FILE)] == []  # no leftovers either
        assert memfs_cli("pg", "init", admin).returncode == 0
        # A reader grant for a workspace without an id says so, and writes none.
        reader = memfs_cli("pg", "grant", "--workspace", str(ws), "--agent", "main", "--reader", "ops", "--dsn", admin)
        assert reader.returncode == 1 and "has no id yet" in reader.stderr and not (ws / ID_FILE).exists(), reader
        granted = memfs_cli("pg", "grant", "--workspace", str(ws), "--agent", "main", "--dsn", admin)
        assert granted.returncode == 0, granted.stderr
        made = read_id(ws)
        assert made is not None and str(made) in granted.stderr
        with psycopg.connect(admin) as conn:
            assert conn.execute("SELECT workspace_id FROM memfs.tenants").fetchall() == [(made,)]
        # A rotation keeps the id.
        assert memfs_cli("pg", "grant", "--workspace", str(ws), "--agent", "main", "--dsn", admin).returncode == 0
        assert read_id(ws) == made
        # A mount or command on a workspace without an id does not make one: it could match no login.
        bare = tmp_path / "bare"
        init_workspace(bare)
        out = memfs_cli("search", "anything", "-w", str(bare), *_pg(granted.stdout.strip().splitlines()[-1]),
                        env={"MEMFS_STATE_DIR": str(tmp_path / "state")})
        assert out.returncode == 1 and "has no id" in out.stderr and not (bare / ID_FILE).exists(), out.stderr
