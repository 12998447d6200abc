"""Searching another agent's memory (``memfs search --agent a --agent b``) on PostgreSQL: only
through an explicit reader grant, never its private rows (MEMORY.md, ``privacy.private_paths``)
by any route (the command, keyword-only and KNN-only queries on the reader's store), refused
again after a revoke; and on SQLite a one-line error saying it needs PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import write
from mounts import memfs_cli

psycopg = pytest.importorskip("psycopg")

from memfs.index.storage.postgres import roles, schema  # noqa: E402
from memfs.index.storage.postgres.connect import PgError  # noqa: E402
from memfs.index.storage.postgres.store import PgStore  # noqa: E402
from memfs.index.text.keywords import match_expression, search_terms  # noqa: E402
from memfs.memory import Memory  # noqa: E402
from memfs.workspace import init_workspace  # noqa: E402
from memfs.workspaceid import workspace_id  # noqa: E402

PRIVATE_WORDS = ("4711", "X1234567", "garage door", "passport")  # b's private text: never to reach a
B_PRIVATE_PATHS = {"MEMORY.md", "memory/private/vault.md"}


@pytest.fixture(scope="module")
def admin(pg_server) -> Iterator[str]:
    from pg import scratch_database

    with scratch_database(pg_server.dsn, "memfs_fleet") as dsn:
        schema.init(dsn)
        yield dsn


@pytest.fixture
def two(tmp_path: Path, admin: str, make_config) -> dict[str, object]:
    """Agent a of workspace A and agent b of workspace B, each indexed through its own login; b's
    private rows hold words a's queries ask for."""
    ws_a, ws_b = tmp_path / "A", tmp_path / "B"
    for ws in (ws_a, ws_b):
        init_workspace(ws)
    write(ws_a / "memory" / "2026-02-01.md", "# 2026-02-01\n\n- Bought a red kayak called Zephyrine.\n")
    write(ws_a / "MEMORY.md", "# Memory\n\n- a's own secret: the kayak key hides under the blue bucket.\n")
    write(ws_b / "memory" / "2026-02-01.md", "# 2026-02-01\n\n- Planted a lemon tree named Quillibet in the garden.\n")
    write(ws_b / "MEMORY.md", "# Memory\n\n- The garage door code for Quillibet's shed is 4711.\n")
    write(ws_b / "memory" / "private" / "vault.md",
          "# Vault\n\n- Quillibet's passport number is X1234567, kept in the lemon tin.\n")
    dsn_a = roles.grant_login(admin, workspace_id(ws_a), "a").dsn
    dsn_b = roles.grant_login(admin, workspace_id(ws_b), "b").dsn
    for ws, agent, dsn, extra in ((ws_a, "a", dsn_a, {}), (ws_b, "b", dsn_b, {"privacy__private_paths": "memory/private"})):
        memory = Memory(make_config(ws, agent, index__backend="postgres", index__dsn=dsn, **extra))
        try:
            memory.index()
            assert memory.store.counts()["pending"] == 0
        finally:
            memory.close()
    return {"ws_a": ws_a, "ws_b": ws_b, "dsn_a": dsn_a, "dsn_b": dsn_b, "state": tmp_path / "state"}


def _search(two: dict, query: str, *agents: str, as_json: bool = False):
    args = ["search", query, "-w", str(two["ws_a"]), "--set", "index.backend=postgres",
            "--set", f"index.dsn={two['dsn_a']}", "--set", f"state_dir={two['state']}", "--min-score", "0"]
    for agent in agents:
        args += ["--agent", agent]
    return memfs_cli(*args, *(["--json"] if as_json else []))


def _grant(admin: str, two: dict, revoke: bool = False) -> None:
    roles.grant_reader(admin, workspace_id(two["ws_b"]), "b", workspace_id(two["ws_a"]), "a", revoke)


def _refused(result) -> None:
    assert result.returncode == 1, result
    assert result.stdout == "", result.stdout  # never rows
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'b'" in lines[0] and "not readable" in lines[0], result.stderr
    assert "Traceback" not in result.stderr


def test_another_agent_is_searched_only_with_a_grant(two: dict, admin: str) -> None:
    _refused(_search(two, "Quillibet lemon tree", "a", "b"))
    _grant(admin, two)
    try:
        found = _search(two, "Quillibet lemon tree", "a", "b")
        assert found.returncode == 0, found.stderr
        assert "agents: a, b" in found.stdout
        assert "## 1. memory/2026-02-01.md#L" in found.stdout and "agent b · score" in found.stdout, found.stdout
        assert "Quillibet" in found.stdout
        # b is of workspace B, a of A: b's citations are B's files, and the answer says so.
        assert f"agent b is of another workspace (id {workspace_id(two['ws_b'])})" in found.stdout
        answer = json.loads(_search(two, "kayak Zephyrine lemon tree Quillibet", "a", "b", as_json=True).stdout)
        assert answer["agents"] == ["a", "b"]
        by_agent = {(r["agent"], r["path"]) for r in answer["results"]}
        assert ("a", "memory/2026-02-01.md") in by_agent and ("b", "memory/2026-02-01.md") in by_agent, by_agent
        scores = [r["score"] for r in answer["results"]]
        assert scores == sorted(scores, reverse=True)  # one list, best first, whoever it is from
        # One agent's search is what it was: no agent field, only a's memory.
        alone = json.loads(_search(two, "Quillibet lemon tree", "a", as_json=True).stdout)
        assert "agents" not in alone and all("agent" not in r and "Quillibet" not in r["snippet"]
                                             for r in alone["results"]), alone
    finally:
        _grant(admin, two, revoke=True)
    _refused(_search(two, "Quillibet lemon tree", "a", "b"))


def test_private_rows_of_the_other_agent_never_appear(two: dict, admin: str, make_config) -> None:
    _grant(admin, two)
    try:
        # Through the command: queries aimed at b's private text, by its words and by its meaning.
        for query in ("Quillibet garage door code 4711", "passport number X1234567", "the code that opens the shed",
                      "travel document identification number"):
            for as_json in (False, True):
                result = _search(two, query, "a", "b", as_json=as_json)
                assert result.returncode == 0, result.stderr
                # What was found (not the query, which the answer repeats).
                shown = (json.dumps(json.loads(result.stdout)["results"]) if as_json
                         else result.stdout.split("\n", 1)[1])
                for word in PRIVATE_WORDS:
                    assert word not in shown, (query, word, result.stdout)
            answer = json.loads(_search(two, query, "a", "b", as_json=True).stdout)
            assert not {r["path"] for r in answer["results"] if r["agent"] == "b"} & B_PRIVATE_PATHS, answer
        # Through the reader's store itself, asking for private rows outright: keyword only, KNN
        # only, and every chunk id there could be.  Row-level security answers, not our filters.
        memory = Memory(make_config(two["ws_a"], "a", index__backend="postgres", index__dsn=two["dsn_a"]))
        reader = PgStore.reading(two["dsn_a"], workspace_id(two["ws_a"]), "b")
        try:
            match = match_expression(search_terms("Quillibet garage door code 4711 passport X1234567 lemon"))
            keyword = reader.keyword_candidates(match, 50, include_private=True)
            assert keyword, "b's public log matches 'Quillibet'"
            vector = memory.provider.embed(["the garage door code and the passport number"])[0]
            nearest = reader.vector_candidates(vector, 50, include_private=True)
            assert nearest
            every = reader.chunks_by_id(range(1, 500), include_private=True)
            for ids in ([i for i, _ in keyword], [i for i, _ in nearest], list(every)):
                chunks = reader.chunks_by_id(ids, include_private=True)
                assert {c.path for c in chunks.values()} == {"memory/2026-02-01.md"}, chunks
                assert not any(w in c.text for c in chunks.values() for w in PRIVATE_WORDS)
            assert reader.chunk_total(include_private=True) == len(every)
            assert not any(w in u.text for u in reader.units_of(range(1, 500)) for w in PRIVATE_WORDS)
            with pytest.raises(PgError, match="only read"):
                reader.set_meta("x", "y")  # a reader never writes
        finally:
            reader.close()
            memory.close()
    finally:
        _grant(admin, two, revoke=True)
    with pytest.raises(PgError, match="not readable"):
        PgStore.reading(two["dsn_a"], workspace_id(two["ws_a"]), "b")


def test_naming_a_second_agent_on_sqlite_is_a_one_line_error(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    init_workspace(ws)
    result = memfs_cli("search", "anything", "-w", str(ws), "--agent", "main", "--agent", "other",
                       "--set", f"state_dir={tmp_path / 'state'}")
    assert result.returncode == 1 and result.stdout == "", result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs index.backend = postgres" in lines[0] and "other" in lines[0], result.stderr
