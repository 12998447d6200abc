"""The index on PostgreSQL (memfs.index.storage.postgres.store) through Memory and a real mount: the same
answers as SQLite, one tenant's store blind to another's rows, and one-line errors at start for a
backend that cannot work (no DSN, no driver, a wrong password, a server that is not there)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import write

psycopg = pytest.importorskip("psycopg")

from memfs.config import ConfigError, load_config  # noqa: E402
from memfs.index.storage.interface import IndexStore  # noqa: E402
from memfs.index.storage.postgres.connect import PgError  # noqa: E402
from memfs.index.storage.postgres.store import PgStore  # noqa: E402
from memfs.index.storage.sqlite.store import Store  # noqa: E402
from memfs.memory import IndexBusy, Memory, parse_options  # noqa: E402
from memfs.workspace import init_workspace  # noqa: E402
from memfs.workspaceid import workspace_id  # noqa: E402

QUERIES = ["When did Caroline go to the LGBTQ support group?", "a painting of the sun coming up over the lake",
           "camping with the kids", "adoption agencies", "Melanie pottery class"]


def test_postgres_answers_as_sqlite(workspace: Path, tmp_path: Path, make_config, pg_index, locomo_day) -> None:
    """The same workspace indexed in both: the same results, scores and snippets."""
    locomo_day(workspace)
    write(workspace / "MEMORY.md", "# Memory\n\n- Caroline's favourite colour is teal.\n")
    lite = Memory(make_config(workspace))
    pg = Memory(make_config(workspace, index__backend="postgres", index__dsn=pg_index(workspace, "main")))
    try:
        assert isinstance(lite.store, Store) and isinstance(pg.store, PgStore)
        assert isinstance(lite.store, IndexStore) and isinstance(pg.store, IndexStore)
        lite.index()
        pg.index()
        assert pg.store.counts() == {**lite.store.counts(), "cached_embeddings": pg.store.counts()["cached_embeddings"]}
        for query in QUERIES + ["teal colour"]:
            for mode in ("main", "shared"):
                a = lite.search(query, min_score=0, mode=mode)
                b = pg.search(query, min_score=0, mode=mode)
                assert [(r.path, r.start_line, r.end_line, r.snippet) for r in a.results] == \
                       [(r.path, r.start_line, r.end_line, r.snippet) for r in b.results], (query, mode)
                for x, y in zip(a.results, b.results):
                    assert abs(x.score - y.score) < 1e-4 and abs(x.text_score - y.text_score) < 1e-6, (query, x, y)
        # A scoped search (a condition on the chunks) and a rewrite, a rename and a removal.
        for values in ({"in": "memory"}, {"after": "2023-05-01", "before": "2023-06-01"}):
            scoped = [[(r.path, r.start_line, round(r.score, 4)) for r in m.search(
                "Caroline support group", min_score=0, options=parse_options(values)).results] for m in (lite, pg)]
            assert scoped[0] == scoped[1] and scoped[0], values
        for memory in (lite, pg):
            write(workspace / "memory" / "2026-01-02.md", "# 2026-01-02\n\n- Bought a kayak called Zephyrine.\n")
            memory.file_changed("memory/2026-01-02.md")
        assert [r.path for r in pg.search("Zephyrine").results] == ["memory/2026-01-02.md"]
        (workspace / "memory" / "2026-01-02.md").rename(workspace / "memory" / "2026-01-03.md")
        for memory in (lite, pg):
            memory.file_moved("memory/2026-01-02.md", "memory/2026-01-03.md")
        assert [r.path for r in pg.search("Zephyrine").results] == ["memory/2026-01-03.md"]
        assert [r.path for r in lite.search("Zephyrine").results] == ["memory/2026-01-03.md"]
        assert pg.store.check() == "ok"
        status = pg.status()
        assert status["index_bytes"] > 0 and status["chunks"] == lite.status()["chunks"]
        # A rebuild empties the tenant and refills it from the files: the same answers after.
        # The vectors come back from the tenant's cache, kept as halfvec (float16, schema v7): the
        # same order, scores to float16's precision.
        before = [(r.path, r.start_line, r.score) for r in pg.search(QUERIES[0], min_score=0).results]
        generation = pg.store.generation
        pg.rebuild()
        assert pg.store.generation > generation and pg.store.counts()["pending"] == 0
        after = [(r.path, r.start_line, r.score) for r in pg.search(QUERIES[0], min_score=0).results]
        assert [r[:2] for r in after] == [r[:2] for r in before]
        assert all(abs(x[2] - y[2]) < 5e-4 for x, y in zip(after, before)), (after, before)
        assert pg.store.check() == "ok"
    finally:
        lite.close()
        pg.close()


def test_a_tenant_store_sees_nothing_of_another(tmp_path: Path, make_config, pg_index) -> None:
    """Two agents of one workspace and an agent of another: each store's keyword, vector,
    chunk and file reads hold its own rows alone, though chunk ids are the same numbers."""
    ws_a, ws_b = tmp_path / "a", tmp_path / "b"
    for ws, word in ((ws_a, "Quillfeather"), (ws_b, "Brambleworth")):
        init_workspace(ws)
        write(ws / "memory" / "2026-02-01.md", f"# 2026-02-01\n\n- The secret word is {word}.\n")
        write(ws / "MEMORY.md", f"# Memory\n\n- Private: {word} is the vault code.\n")
    a = Memory(make_config(ws_a, index__backend="postgres", index__dsn=pg_index(ws_a, "main")))
    b = Memory(make_config(ws_b, index__backend="postgres", index__dsn=pg_index(ws_b, "main")))
    b2 = Memory(make_config(ws_b, "other", index__backend="postgres", index__dsn=pg_index(ws_b, "other")))
    try:
        for memory in (a, b, b2):
            memory.index()
        for mine, theirs, word, other in ((a, b, "Quillfeather", "Brambleworth"), (b, a, "Brambleworth", "Quillfeather")):
            assert mine.search(word).results
            assert all(other not in r.snippet for r in mine.search(other, min_score=0).results)
        assert b2.search("Brambleworth").results  # its own copy of the same files: its own rows
        store = a.store
        assert isinstance(store, PgStore)
        ids = range(1, 50)
        everything = " ".join(c.text for c in store.chunks_by_id(ids).values())
        assert "Quillfeather" in everything and "Brambleworth" not in everything
        assert store.keyword_candidates('"brambleworth"', 10) == []
        assert store.doc_frequencies(["brambleworth"])[0] == {"brambleworth": 0}
        query = b.provider.embed(["Brambleworth is the vault code"])[0]
        near = store.vector_candidates(query, 50)
        assert near and {cid for cid, _ in near} <= set(store.chunks_by_id([cid for cid, _ in near]))
        assert all("Brambleworth" not in u.text for u in store.units_of(ids))
        assert [f.path for f in store.files()] == [f.path for f in a.store.files()]
        assert all(f.path in ("MEMORY.md", "memory/2026-02-01.md") or not f.path.startswith("memory/2026-02")
                   for f in store.files())
        # The right DSN for the wrong tenant: refused, in one line.
        with pytest.raises(PgError, match="is not the login of agent 'main' of workspace .*: another workspace's DSN"):
            PgStore(pg_index(ws_a, "main"), workspace_id(ws_b), "main")
        # A typo in the agent's name is named as one, not answered with how to grant a new tenant.
        with pytest.raises(PgError, match=r"is not the login of agent 'mian' .*did you mean --agent main\?"):
            PgStore(pg_index(ws_a, "main"), workspace_id(ws_a), "mian")
    finally:
        for memory in (a, b, b2):
            memory.close()


def test_shared_mode_on_postgres_hides_private_rows(workspace: Path, make_config, pg_index) -> None:
    write(workspace / "MEMORY.md", "# Memory\n\n- PRIVATE-MARKER-7741: the spare key is under the pot.\n")
    write(workspace / "memory" / "2026-03-01.md", "# 2026-03-01\n\n- The spare bike is in the shed.\n")
    memory = Memory(make_config(workspace, index__backend="postgres", index__dsn=pg_index(workspace, "main")))
    try:
        memory.index()
        assert memory.search("PRIVATE-MARKER-7741").results
        shared = memory.search("PRIVATE-MARKER-7741 spare key", min_score=0, mode="shared")
        assert all("MEMORY.md" != r.path and "PRIVATE-MARKER" not in r.snippet for r in shared.results)
        assert memory.store.counts(include_private=False)["files"] == memory.store.counts()["files"] - 1
    finally:
        memory.close()


def test_the_shared_mode_on_a_main_login_is_warned_of(tmp_path: Path, workspace: Path, pg_index) -> None:
    """It answers right, but the login itself could read MEMORY.md with psql: said on the terminal."""
    from mounts import memfs_cli

    env = {"MEMFS_INDEX_BACKEND": "postgres", "MEMFS_STATE_DIR": str(tmp_path / "state"),
           "MEMFS_PG_DSN": pg_index(workspace, "main"), "MEMFS_NO_DAEMON": "1"}
    shared = memfs_cli("status", "--mode", "shared", "-w", str(workspace), env=env)
    assert shared.returncode == 0, shared.stderr
    assert "index.dsn is the main login of agent main: it can read private rows" in shared.stderr
    env["MEMFS_PG_DSN"] = pg_index(workspace, "main", shared=True)
    right = memfs_cli("status", "--mode", "shared", "-w", str(workspace), env=env)
    assert right.returncode == 0 and "main login" not in right.stderr, right.stderr
    main = memfs_cli("status", "-w", str(workspace), env={**env, "MEMFS_PG_DSN": pg_index(workspace, "main")})
    assert main.returncode == 0 and "main login" not in main.stderr, main.stderr


def test_a_shared_mode_login_indexes_and_finds_only_public_rows(workspace: Path, make_config, pg_index) -> None:
    """A shared-mode mount on the agent's shared role: private files are not its to store."""
    write(workspace / "MEMORY.md", "# Memory\n\n- PRIVATE-MARKER-3319: the safe code is 4471.\n")
    write(workspace / "memory" / "2026-03-02.md", "# 2026-03-02\n\n- The safe is in the study.\n")
    shared = Memory(make_config(workspace, mode="shared", index__backend="postgres",
                                index__dsn=pg_index(workspace, "main", shared=True)))
    try:
        shared.index()
        assert [f.path for f in shared.store.files()] == ["memory/2026-03-02.md"]
        assert [r.path for r in shared.search("safe code").results] == ["memory/2026-03-02.md"]
        assert all(r.path != "MEMORY.md" and "4471" not in r.snippet
                   for r in shared.search("PRIVATE-MARKER-3319 safe code", min_score=0).results)
    finally:
        shared.close()
    # The main mode on that login would answer as though MEMORY.md were empty: refused in one line.
    with pytest.raises(IndexBusy, match="shared-mode login of agent main"):
        Memory(make_config(workspace, index__backend="postgres", index__dsn=pg_index(workspace, "main", shared=True)))


@pytest.mark.parametrize("settings,message", [
    ({"index.backend": "mysql"}, "index.backend = 'mysql': Input should be 'sqlite' or 'postgres'"),
])
def test_backend_settings_are_checked(tmp_path: Path, settings: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load_config(workspace=tmp_path, env={}, overrides=list(settings.items()))
    assert message in str(caught.value) and "\n" not in str(caught.value)


def test_postgres_without_a_dsn_is_said_where_the_index_opens(tmp_path: Path, make_config) -> None:
    """Not at load: `memfs config` (where one looks at settings) and `memfs init` still work."""
    from mounts import memfs_cli

    ws = tmp_path / "ws"
    env = {"MEMFS_INDEX_BACKEND": "postgres", "MEMFS_STATE_DIR": str(tmp_path / "state")}
    assert memfs_cli("init", str(ws), env=env).returncode == 0
    shown = memfs_cli("config", "-w", str(ws), env=env)
    assert shown.returncode == 0 and "index.backend" in shown.stdout, shown.stderr
    searched = memfs_cli("search", "anything", "-w", str(ws), env=env)
    assert searched.returncode == 1 and "index.backend = postgres needs a DSN: set index.dsn" in searched.stderr
    assert len(searched.stderr.strip().splitlines()) == 1 and "Traceback" not in searched.stderr
    with pytest.raises(IndexBusy, match="needs a DSN"):
        Memory(make_config(ws, index__backend="postgres"))


def test_the_dsn_may_come_from_the_environment(tmp_path: Path) -> None:
    cfg = load_config(workspace=tmp_path, env={"MEMFS_PG_DSN": "host=db.example user=t"},
                      overrides=[("index.backend", "postgres")])
    assert cfg.index.dsn == "host=db.example user=t" and cfg.sources["index.dsn"] == "env MEMFS_PG_DSN"


def test_memfs_config_never_prints_the_password(tmp_path: Path) -> None:
    from mounts import memfs_cli

    from memfs.invocation import answer_settings

    dsn = "host=db.example user=t1 password=Hunter2-Secret dbname=memfs"
    out = memfs_cli("config", "-w", str(tmp_path), "--set", "index.backend=postgres", "--set", f"index.dsn={dsn}")
    assert out.returncode == 0, out.stderr
    assert "index.dsn" in out.stdout and "password=***" in out.stdout and "Hunter2-Secret" not in out.stdout
    # A daemon started with one password does not answer a client holding another.
    cfgs = [load_config(workspace=tmp_path, env={}, overrides=[("index.backend", "postgres"), ("index.dsn", d)])
            for d in (dsn, dsn.replace("Hunter2-Secret", "rotated"))]
    first, second = (answer_settings(c) for c in cfgs)
    assert first != second and "Hunter2-Secret" not in repr(first)


def test_no_driver_is_one_line(tmp_path: Path) -> None:
    """Without psycopg (hidden from this interpreter), the setting says what to install."""
    code = ("import sys; sys.modules['psycopg'] = None\n"
            "from memfs.config import load_config, ConfigError\n"
            "try:\n"
            f"    load_config(workspace={str(tmp_path)!r}, env={{}}, overrides=[('index.backend', 'postgres'), "
            "('index.dsn', 'host=x')])\n"
            "except ConfigError as exc:\n"
            "    print(exc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip() == ("index.backend = postgres needs the PostgreSQL driver: "
                                  "pip install 'memfs[postgres]'"), out.stderr


def test_a_server_that_refuses_is_a_one_line_error_at_start(workspace: Path, tmp_path: Path, make_config,
                                                             pg_index) -> None:
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    good = pg_index(workspace, "main")
    wrong_password = make_conninfo(good, password="not-the-password")
    nobody = make_conninfo(good, host="127.0.0.1", port=str(_closed_port()))
    for dsn, reason in ((wrong_password, "password authentication failed"), (nobody, "Connection refused")):
        with pytest.raises(IndexBusy) as caught:
            Memory(make_config(workspace, index__backend="postgres", index__dsn=dsn))
        text = str(caught.value)
        assert text.startswith("index.backend = postgres: cannot connect") and reason in text, text
        assert "not-the-password" not in text and "\n" not in text
    # The CLI says it in one line too, and exits non-zero.
    from mounts import memfs_cli

    out = memfs_cli("search", "anything", "-w", str(workspace), "--set", "index.backend=postgres",
                    "--set", f"index.dsn={wrong_password}", env={"MEMFS_STATE_DIR": str(tmp_path / "state")})
    assert out.returncode != 0 and "Traceback" not in out.stderr, out.stderr
    assert "password authentication failed" in out.stderr and "not-the-password" not in out.stderr
    assert conninfo_to_dict(good)["user"] in out.stderr
    # So does a mount refused by the server, which never mounts (one whose server cannot be
    # reached starts and catches up later: test_pg_offline_start).
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    out = memfs_cli("mount", str(workspace), str(mnt), "--set", "index.backend=postgres",
                    "--set", f"index.dsn={wrong_password}", env={"MEMFS_STATE_DIR": str(tmp_path / "state")})
    assert out.returncode != 0 and "password authentication failed" in out.stderr, out.stderr
    assert "not-the-password" not in out.stderr
    assert "File \"" not in out.stderr and len(out.stderr.strip().splitlines()) == 2, out.stderr  # no traceback
    assert not os.path.ismount(mnt)


def _closed_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_search_file_on_a_mount_with_postgres(workspace: Path, mount_factory, pg_index) -> None:
    """A memory file written through a real mount is found by ``cat search/<q>.md``."""
    mounted = mount_factory(workspace, "main", "--set", "index.backend=postgres",
                            "--set", f"index.dsn={pg_index(workspace, 'main')}")
    note = mounted.mnt / "memory" / "2026-04-01.md"
    note.parent.mkdir(exist_ok=True)
    note.write_text("# 2026-04-01\n\n- Adopted a tortoise named Wobblesworth.\n")
    found = (mounted.mnt / "search" / "tortoise Wobblesworth.md").read_text()
    assert "memory/2026-04-01.md#L1-L3" in found and "Wobblesworth" in found
    with psycopg.connect(pg_index(workspace, "main")) as conn:  # and the rows are the server's
        assert conn.execute("SELECT count(*) FROM memfs.chunks WHERE path = 'memory/2026-04-01.md'").fetchone()[0] == 1


def test_a_command_inside_a_mount_on_postgres_searches_the_mounts_index(workspace: Path, tmp_path: Path,
                                                                      pg_index) -> None:
    """A mount given its backend by the environment (MEMFS_PG_DSN): a command run inside it, from
    a shell without that environment, is answered from the mount's index on the server, not from
    an empty SQLite index of its own (a newcomer's agent found nothing and was told to index)."""
    from mounts import Mounted, memfs_cli, unmount

    mnt, state = tmp_path / "mnt", tmp_path / "state"
    mnt.mkdir()
    env = {"MEMFS_STATE_DIR": str(state), "MEMFS_INDEX_BACKEND": "postgres", "MEMFS_PG_DSN": pg_index(workspace, "main")}
    out = memfs_cli("mount", str(workspace), str(mnt), env=env)
    mounted = Mounted(workspace, mnt, state, "main", out.stdout + out.stderr)
    try:
        assert out.returncode == 0, out.stderr
        write(mnt / "memory" / "2026-04-02.md", "- Adopted a second tortoise, Quillby.\n")
        found = memfs_cli("search", "Quillby", env={"MEMFS_STATE_DIR": str(state)}, cwd=mnt / "memory")
        assert found.returncode == 0 and "memory/2026-04-02.md" in found.stdout, found.stdout + found.stderr
        assert not list(state.rglob("main.sqlite"))  # no SQLite index was made beside it
    finally:
        unmount(mounted)


def test_a_big_write_is_provisional_then_exact_on_both(workspace: Path, make_config, pg_index) -> None:
    """A big write's keyword-only chunks (memfs.index.bigwrites), then its exact ones: the same
    answers from both backends at each step."""
    lines = [f"- Line {i}: the weather was mild and the garden quiet." for i in range(400)]
    lines.append("- The Xylophonist closed the day.")
    write(workspace / "memory" / "2026-05-01.md", "# 2026-05-01\n\n" + "\n".join(lines) + "\n")
    settings = {"embedding__provider": "none", "index__defer_mb": "0.001"}
    both = [Memory(make_config(workspace, **settings)),
            Memory(make_config(workspace, index__backend="postgres", index__dsn=pg_index(workspace, "main"), **settings))]

    def answers(memory: Memory) -> list[tuple]:
        return [(r.path, r.start_line, r.end_line, r.snippet, r.score) for r in memory.search("Xylophonist").results]

    try:
        for memory in both:
            outcome = memory.file_changed("memory/2026-05-01.md", defer=True)
            assert outcome.provisional and memory.provisional_paths() == ["memory/2026-05-01.md"]
            assert memory.store.counts()["pending"] == 0  # provisional chunks never wait for a vector
        first = [answers(m) for m in both]
        assert first[0] == first[1] and first[0][0][2] == len(lines) + 2
        for memory in both:
            memory.complete("memory/2026-05-01.md")
            assert memory.provisional_paths() == []
        exact = [answers(m) for m in both]
        assert exact[0] == exact[1] and "Xylophonist" in exact[0][0][3]
        counts = [m.store.counts() for m in both]
        for count in counts:
            count.pop("cached_embeddings")  # postgres's is the fleet's
        assert counts[0] == counts[1]
    finally:
        for memory in both:
            memory.close()


def test_a_big_writes_passages_to_come_are_counted_as_waiting_on_both(workspace: Path, make_config, pg_index) -> None:
    """While a big write is being chunked, status counts its keyword rows as nothing (they were
    counted as embedded: the share embedded started high) and the passages it will make as
    waiting (estimated, not below what comes), the same on both backends."""
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    import bigwrites

    settings = {"index__defer_mb": "0.001"}
    dsn = pg_index(workspace, "main")
    both = [Memory(make_config(workspace, **settings)),
            Memory(make_config(workspace, index__backend="postgres", index__dsn=dsn, **settings))]

    def progress(memory: Memory) -> tuple[int, int, int, int]:
        info = memory.status()
        return info["passages"], info["pending"], info.get("pending_estimated", 0), info["chunks"] + info["units"]

    try:
        for memory in both:
            memory.reconcile()
        write(workspace / "sessions" / "import.jsonl", bigwrites.transcript(256 << 10).decode())
        steps = []
        for memory in both:
            memory.embed_pending(limit=64)  # a few embedded
            passages, pending, _, _ = progress(memory)
            embedded = passages - pending
            assert embedded > 0
            memory.file_changed("sessions/import.jsonl", defer=True)
            assert memory.provisional_paths() == ["sessions/import.jsonl"]
            chunking = progress(memory)
            assert chunking[2] > 0 and chunking[0] - chunking[1] - chunking[2] == embedded
            memory.complete("sessions/import.jsonl")
            chunked = progress(memory)
            assert chunked[2] == 0 and chunked[0] == chunked[3] and chunked[0] - chunked[1] == embedded
            assert chunked[0] <= chunking[0]  # no more than estimated: the share embedded does not fall
            steps.append((chunking, chunked))
        assert steps[0] == steps[1]
    finally:
        for memory in both:
            memory.close()


def test_status_and_a_refused_rebuild_name_the_server_not_a_file(workspace: Path, make_config, pg_index) -> None:
    """On postgres the index is a tenant on a server: status and a rebuild refused while another
    process uses it say which (the DSN without its password), not the unused SQLite file's path."""
    from psycopg.conninfo import conninfo_to_dict

    write(workspace / "memory" / "2026-03-01.md", "# 2026-03-01\n\n- The spare bike is in the shed.\n")
    dsn = pg_index(workspace, "main")
    cfg = make_config(workspace, index__backend="postgres", index__dsn=dsn, embedding__provider="none")
    first, second = Memory(cfg), Memory(cfg)
    try:
        first.index()
        with pytest.raises(IndexBusy) as busy:
            first.rebuild()
        shown = [str(busy.value), str(first.status()["index_path"])]
    finally:
        first.close()
        second.close()
    password = str(conninfo_to_dict(dsn)["password"])
    for text in shown:
        assert ".sqlite" not in text and password not in text, text
        assert f"user={conninfo_to_dict(dsn)['user']}" in text and "tenant" in text, text


def test_both_stores_have_every_method_of_the_interface() -> None:
    """Each method of IndexStore is on both stores, with the same parameters and defaults."""
    import inspect

    members = {n: m for n, m in vars(IndexStore).items() if not n.startswith("_")}
    assert {"replace_file", "keyword_top", "vector_candidates", "store_embedded", "batch", "settle"} <= set(members)
    for name, member in members.items():
        for cls in (Store, PgStore):
            assert hasattr(cls, name) or name in ("backend", "lock", "outdated"), (cls, name)
            if inspect.isfunction(member):
                want = [(p.name, p.default) for p in inspect.signature(member).parameters.values()]
                have = [(p.name, p.default) for p in inspect.signature(getattr(cls, name)).parameters.values()]
                assert have == want, (cls.__name__, name)
            elif isinstance(member, property):
                assert isinstance(getattr(cls, name), property), (cls.__name__, name)
    for cls in (Store, PgStore):
        assert cls.backend in ("sqlite", "postgres")
