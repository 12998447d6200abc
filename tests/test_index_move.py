"""``memfs index --to postgres|sqlite``: an index moved between its SQLite file and its PostgreSQL
tenant answers every search as before, carries its vectors and embedding cache (the model is never
asked: the moves run with a model that cannot load), keeps private rows private, gives the same
rows when run twice, and is refused in one line when it cannot work."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest
from conftest import SECRET, write
from mounts import memfs_cli

psycopg = pytest.importorskip("psycopg")

from memfs.index.storage.postgres.store import PgStore  # noqa: E402
from memfs.index.storage.sqlite.store import Store  # noqa: E402
from memfs.memory import Memory, parse_options  # noqa: E402

QUERIES = ["When did Caroline go to the LGBTQ support group?", "a painting of the sun coming up over the lake",
           "penicillin allergy", "water the tomatoes", "the surprise party plan", "Melanie pottery class"]
# Any attempt to embed in the moving process fails: the local model's tokenizer is not there, and
# no embedding service is asked.
NO_MODEL = ("--set", "embedding.service=false", "--set", "embedding.tokenizer_path=/nonexistent/tokenizer.json")
SETTINGS = """\
[index]
extra_paths = ["notes/*.md"]

[privacy]
private_paths = ["MEMORY.md", "sessions", "notes"]
"""


def _workspace(ws: Path, locomo_day) -> None:
    """Markdown (a real LoCoMo day, notes), MEMORY.md, a session transcript and a sync file;
    MEMORY.md, sessions/ and notes/ private."""
    locomo_day(ws)
    write(ws / ".memfs.toml", SETTINGS)
    write(ws / "MEMORY.md", f"# Memory\n\n## Health\n- The user is {SECRET}.\n")
    write(ws / "notes" / "plan.md", "- Surprise party plan for Caroline: the lake house, June.\n")
    write(ws / "memory" / "2026-11-20.md", "# 2026-11-20\n\n- Garden: the tomatoes are ripe now.\n")
    turns = [("user", "Remind me to water the tomatoes in the garden"), ("assistant", "Sure, every morning."),
             ("user", "Melanie signed up for a pottery class on Thursdays")]
    write(ws / "sessions" / "s1.jsonl", "".join(json.dumps(
        {"type": "message", "timestamp": f"2026-11-15T10:0{i}:00Z", "message": {"role": role, "content": text}}) + "\n"
        for i, (role, text) in enumerate(turns)))
    write(ws / "clawgpt-memory" / "2026-11-02.jsonl", json.dumps(
        {"id": "c1", "chatId": "c", "chatTitle": "Garden", "role": "user",
         "content": "Which tomatoes grow best in a small garden?", "timestamp": 1793613600000}) + "\n")


def _answers(memory: Memory) -> dict[tuple[str, str], list[tuple]]:
    found = {}
    for query in QUERIES:
        for mode in ("main", "shared"):
            found[(query, mode)] = [(r.path, r.start_line, r.end_line, r.chunk_start_line, r.chunk_end_line,
                                     r.snippet, r.chat_id, r.chat_title, r.score, r.vector_score, r.text_score)
                                    for r in memory.search(query, min_score=0, mode=mode).results]
    scoped = memory.search("tomatoes garden", min_score=0, options=parse_options({"after": "2026-11-01"}))
    found[("scoped", "main")] = [(r.path, r.start_line, r.score) for r in scoped.results]
    return found


# PostgreSQL keeps a chunk's vector as halfvec (float16, schema v7): each component to about 3
# significant digits (|x| < 1: within 2^-11 of it), cosines and scores to some 1e-4.
HALF = 1e-3


def _same(a: dict, b: dict, within: float = 1e-5) -> None:
    """The same results (citations, snippets, chats) with the same scores: those computed by the
    same numbers on two engines agree to float32 rounding; ``within`` HALF once the chunk
    vectors have been through PostgreSQL's halfvec."""
    assert a.keys() == b.keys()
    for key in a:
        assert len(a[key]) == len(b[key]), key
        for x, y in zip(a[key], b[key]):
            cut = 2 if key[0] == "scoped" else 8  # where the scores start
            assert x[:cut] == y[:cut], (key, x, y)
            assert all(abs(p - q) < within for p, q in zip(x[cut:], y[cut:])), (key, x, y)


def _same_rows(rows: list, expected: list) -> bool:
    """Every row as it was; a chunk's vector to float16's precision (it went through halfvec)."""
    def vector(chunk) -> np.ndarray | None:
        return None if chunk.vector is None else np.frombuffer(chunk.vector, dtype=np.float32)

    assert len(rows) == len(expected)
    for got, want in zip(rows, expected):
        assert (got.record, got.indexed_at, got.units) == (want.record, want.indexed_at, want.units)
        assert [dataclasses.replace(c, vector=None) for c in got.chunks] == \
            [dataclasses.replace(c, vector=None) for c in want.chunks]
        for c, w in zip(got.chunks, want.chunks):
            assert (vector(c) is None) == (vector(w) is None)
            assert vector(c) is None or np.allclose(vector(c), vector(w), rtol=0, atol=HALF / 4)
    return True


def _open(make_config, ws: Path, backend: str, dsn: str) -> Memory:
    if backend == "postgres":
        return Memory(make_config(ws, index__backend="postgres", index__dsn=dsn))
    return Memory(make_config(ws))


def _move(ws: Path, state: Path, to: str, dsn: str, *extra: str):
    return memfs_cli("index", "--to", to, "-w", str(ws), "--set", f"index.dsn={dsn}", *NO_MODEL, *extra,
                     env={"MEMFS_STATE_DIR": str(state)})


def _password(dsn: str) -> str:
    from psycopg.conninfo import conninfo_to_dict

    return str(conninfo_to_dict(dsn)["password"])


def _rows(store: PgStore | Store) -> list:
    return store.export_files([r.path for r in store.files()])


def test_move_in_and_back_answers_the_same_and_embeds_nothing(tmp_path: Path, state_dir: Path, make_config,
                                                               pg_index, locomo_day) -> None:
    ws = tmp_path / "ws"
    _workspace(ws, locomo_day)
    dsn = pg_index(ws, "main")
    lite = _open(make_config, ws, "sqlite", dsn)
    lite.index()
    before = _answers(lite)
    counts = lite.store.counts()
    assert counts["pending"] == 0 and counts["chunks"] >= 6 and counts["units"] > counts["chunks"] and any(r for k, r in before.items() if k[0] == QUERIES[0])
    assert {r.path for r in lite.store.files() if r.private} == {"MEMORY.md", "sessions/s1.jsonl", "notes/plan.md"}
    source_rows = _rows(lite.store)
    lite.close()

    moved = _move(ws, state_dir, "postgres", dsn)
    assert moved.returncode == 0, moved.stderr
    assert f"{counts['files']} files, {counts['chunks']} chunks" in moved.stdout
    assert _password(dsn) not in moved.stdout + moved.stderr
    assert "unavailable" not in moved.stderr and "Traceback" not in moved.stderr
    # The README's own command gives the DSN with the backend still sqlite: only the reminder says so.
    assert "index.backend is sqlite" not in moved.stderr and 'until index.backend = "postgres"' in moved.stderr
    assert 'until index.backend = "postgres" is set' in moved.stderr

    pg = _open(make_config, ws, "postgres", dsn)
    try:
        assert isinstance(pg.store, PgStore)
        # Every row as it was, vectors included: none was made (the mover could not make one).
        assert _same_rows(_rows(pg.store), source_rows)
        assert pg.store.counts() == {**counts, "cached_embeddings": pg.store.counts()["cached_embeddings"]}
        assert pg.store.counts()["pending"] == 0
        _same(before, _answers(pg), HALF)
        shared_paths = {r[0] for (_, mode), found in _answers(pg).items() if mode == "shared" for r in found}
        assert shared_paths and not shared_paths & {"MEMORY.md", "notes/plan.md", "sessions/s1.jsonl"}
        status = pg.status()
        assert status["index_path"] == pg.store.location and "tenant" in status["index_path"]
        assert "sqlite" not in status["index_path"] and _password(dsn) not in status["index_path"]
    finally:
        pg.close()

    # Every text's vector is in the tenant's own cache (there is no other), private texts' as
    # private: a shared-mode login of the tenant never reads them.
    private_hashes = {c.hash for rows in source_rows if rows.record.private for c in rows.chunks}
    public_hashes = {c.hash for rows in source_rows if not rows.record.private for c in rows.chunks} - private_hashes
    with psycopg.connect(dsn) as conn:
        own = {r[0] for r in conn.execute("SELECT hash FROM memfs.tenant_embeddings WHERE private")}
        public = {r[0] for r in conn.execute("SELECT hash FROM memfs.tenant_embeddings WHERE NOT private")}
        tenant_rows = conn.execute("SELECT count(*) FROM memfs.chunks").fetchone()[0]
    assert private_hashes and private_hashes <= own and not public & private_hashes
    assert public_hashes and public_hashes <= public

    # Twice: the same rows, not twice as many.
    again = _move(ws, state_dir, "postgres", dsn)
    assert again.returncode == 0, again.stderr
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM memfs.chunks").fetchone()[0] == tenant_rows
        assert {r[0] for r in conn.execute("SELECT hash FROM memfs.tenant_embeddings WHERE private")} == own
    pg = _open(make_config, ws, "postgres", dsn)
    try:
        assert _same_rows(_rows(pg.store), source_rows)
        assert pg.store.check() == "ok"
    finally:
        pg.close()

    # And back, to a state directory that lost its index and its embedding cache.
    index = next((state_dir / "workspaces").glob("*/main.sqlite"))
    for path in [index, *state_dir.glob("main.embcache.sqlite*")]:
        path.unlink()
    back = _move(ws, state_dir, "sqlite", dsn)
    assert back.returncode == 0, back.stderr
    assert str(index) in back.stdout and "unavailable" not in back.stderr
    lite = _open(make_config, ws, "sqlite", dsn)
    try:
        assert _same_rows(_rows(lite.store), source_rows) and lite.store.counts() == counts
        _same(before, _answers(lite), HALF)
    finally:
        lite.close()
    # The embedding cache came back with it: indexing from the files again finds every vector
    # there (with a model that cannot load, whatever it did not find would stay pending).
    rebuilt = memfs_cli("index", "--rebuild", "-w", str(ws), *NO_MODEL, env={"MEMFS_STATE_DIR": str(state_dir)})
    assert rebuilt.returncode == 0 and f"{counts['chunks']} chunks, 0 pending" in rebuilt.stdout, rebuilt.stdout


def test_a_move_that_cannot_work_is_refused_in_one_line(tmp_path: Path, state_dir: Path, make_config, pg_index,
                                                        mount_factory, locomo_day) -> None:
    ws = tmp_path / "ws"
    _workspace(ws, locomo_day)
    dsn = pg_index(ws, "main")
    env = {"MEMFS_STATE_DIR": str(state_dir)}

    def refused(out, words: str) -> None:
        assert out.returncode == 1, out.stdout + out.stderr
        assert words in out.stderr and len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "Traceback" not in out.stderr

    # Nothing to move yet.
    refused(_move(ws, state_dir, "postgres", dsn), "has no SQLite index for the agent 'main'")
    memory = _open(make_config, ws, "sqlite", dsn)
    memory.index()
    memory.close()
    # No server to move to (no DSN), or one refusing the password.
    refused(memfs_cli("index", "--to", "postgres", "-w", str(ws), env=env), "needs a DSN")
    wrong = dsn.replace("password=", "password=x")
    out = _move(ws, state_dir, "postgres", wrong)
    refused(out, "cannot connect")
    assert _password(wrong) not in out.stderr
    # Built with other settings than these: its vectors would not be what these settings make.
    refused(_move(ws, state_dir, "postgres", dsn, "--set", "chunking.tokens=200"), "chunking.tokens 400 -> 200")
    # A shared mode does not move private rows anywhere.
    refused(_move(ws, state_dir, "postgres", dsn, "--mode", "shared"), "in the main mode")
    # Back to SQLite from a tenant that holds nothing.
    refused(_move(ws, state_dir, "sqlite", dsn), "records no settings")
    # A mount of the workspace uses its index: the move waits for no one, and changes nothing.
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM memfs.chunks").fetchone()[0] == 0
    mounted = mount_factory(ws)
    assert mounted.state == state_dir
    refused(_move(ws, state_dir, "postgres", dsn), f"in use by the mount on {mounted.mnt} (pid {mounted.pid})")
    with psycopg.connect(dsn) as conn:
        assert conn.execute("SELECT count(*) FROM memfs.chunks").fetchone()[0] == 0


@pytest.mark.fuse
def test_a_move_refused_while_the_workspace_is_mounted_names_the_mount(workspace: Path, mount_factory) -> None:
    mounted = mount_factory(workspace)
    # Refused before any server is asked: this one does not exist.
    out = memfs_cli("index", "--to", "postgres", "-w", str(workspace),
                    "--set", "index.dsn=postgresql://memfs@127.0.0.1:9/x", env={"MEMFS_STATE_DIR": str(mounted.state)})
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr == (f"Error: the index of {workspace} (agent main) is in use by the mount on {mounted.mnt} "
                          f"(pid {mounted.pid}): `memfs umount {mounted.mnt}`, then move the index\n")


@pytest.mark.fuse
def test_a_rebuild_refused_while_the_workspace_is_mounted_names_the_mount(workspace: Path, mount_factory) -> None:
    mounted = mount_factory(workspace)
    out = memfs_cli("index", "--rebuild", "-w", str(workspace), env={"MEMFS_STATE_DIR": str(mounted.state)})
    assert out.returncode == 1, out.stdout + out.stderr
    assert out.stderr == (f"Error: the index of {workspace} (agent main) is in use by the mount on {mounted.mnt} "
                          f"(pid {mounted.pid}): `memfs umount {mounted.mnt}`, then rebuild the index\n")
