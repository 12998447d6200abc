"""BM25 on PostgreSQL (memfs.index.storage.postgres.terms, memfs.index.storage.postgres.keyword) against SQLite FTS5's own
bm25 on the same real text: a LoCoMo conversation indexed by the real SQLite Store and by the
PostgreSQL postings, searched with memfs's MATCH expressions for the conversation's real
questions.  Ids and scores must agree (1e-9 relative), public and private apart, after deletes,
and a tenant's ranking must not move when another tenant (visible to the same role) holds other
text."""

from __future__ import annotations

import json
import math
import secrets
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg")
from pg import scratch_database  # noqa: E402

from memfs.index.storage.postgres import keyword, roles, schema, terms  # noqa: E402
from memfs.index.storage.records import FileRecord  # noqa: E402
from memfs.index.storage.sqlite.store import Store  # noqa: E402
from memfs.index.text.chunking import chunk_markdown  # noqa: E402
from memfs.index.text.keywords import fts_body, match_expression, search_terms  # noqa: E402

DATA = Path(__file__).parent / "data" / "locomo-conv-26"
CJK = ("# 笔记\n\n今天我们在东京开会，讨论了新的计划。\n\n明天去京都，东京的会议很成功。\n\n"
       "我喜欢东京和京都的春天。\n")
EXTRA = ["running runs ran", '"quoted" words', "东京", "京都 春天", "Caroline adoption agencies",
         "LGBTQ support group", "pottery painting camping", "東京"]


@pytest.fixture(scope="module")
def db(pg_server) -> Iterator[str]:
    with scratch_database(pg_server.dsn, "memfs_kw") as dsn:
        schema.init(dsn)
        yield dsn


def _files(names: list[str]) -> list[tuple[str, str, bool]]:
    """(path, text, private): every third day log private, as MEMORY.md would be."""
    out = []
    for index, name in enumerate(names):
        out.append((f"memory/{name}", (DATA / name).read_text(), index % 3 == 1))
    return out


class Twin:
    """One tenant's text in the real SQLite Store and in PostgreSQL, written and removed alike."""

    def __init__(self, tmp: Path, conn, tenant_id: int) -> None:
        self.store = Store(tmp / "index.db", tmp / "cache.db")
        self.conn = conn
        self.tenant_id = tenant_id

    def add(self, path: str, text: str, private: bool) -> None:
        chunks = chunk_markdown(text, 400, 80)
        bodies = [fts_body(c.text) for c in chunks]
        record = FileRecord(path, "daily_log", secrets.token_hex(4), 0.0, len(text), 0, "", private)
        self.store.replace_file(record, chunks, [secrets.token_hex(8) for _ in chunks], bodies, {})
        ids = [int(r[0]) for r in self.store.conn.execute("SELECT id FROM chunks WHERE path = ? ORDER BY id", (path,))]
        found = terms.tokenize(bodies)
        with self.conn.transaction():
            self.conn.execute(
                "INSERT INTO memfs.chunks(tenant_id, chunk_id, path, start_line, end_line, hash, text, private, length) "
                "SELECT %s, * FROM unnest(%s::bigint[], %s::text[], %s::int[], %s::int[], %s::text[], %s::text[], "
                "%s::boolean[], %s::int[])",
                (self.tenant_id, ids, [path] * len(ids), [c.start_line for c in chunks], [c.end_line for c in chunks],
                 ["h"] * len(ids), [c.text for c in chunks], [private] * len(ids), [t.length for t in found]))
            terms.add(self.conn, self.tenant_id, [(i, private, t) for i, t in zip(ids, found)])

    def remove(self, path: str) -> None:
        self.store.remove_file(path)
        with self.conn.transaction():
            ids = [r[0] for r in self.conn.execute("SELECT chunk_id FROM memfs.chunks WHERE tenant_id = %s AND path = %s",
                                                   (self.tenant_id, path))]
            terms.remove(self.conn, self.tenant_id, ids)
            self.conn.execute("DELETE FROM memfs.chunks WHERE tenant_id = %s AND chunk_id = ANY (%s)",
                              (self.tenant_id, ids))


def _same(expected: list[tuple[int, float]], got: list[tuple[int, float]], what: str) -> None:
    """Equal scores at 1e-9 relative; equal ids except where two scores tie within that (FTS5
    and PostgreSQL may sum a chunk's phrases in another order, and the last digits decide)."""
    assert len(got) == len(expected), f"{what}: {len(got)} results, FTS5 has {len(expected)}"
    for rank, ((eid, escore), (gid, gscore)) in enumerate(zip(expected, got)):
        assert math.isclose(gscore, escore, rel_tol=1e-9, abs_tol=1e-12), f"{what} #{rank}: {gscore} != {escore}"
        if eid != gid:
            tied = [s for i, s in expected if i == gid]
            assert tied and math.isclose(tied[0], escore, rel_tol=1e-9), f"{what} #{rank}: chunk {gid} != {eid}"


def _queries() -> list[str]:
    questions = json.loads((DATA / "questions.json").read_text())
    matches = [match_expression(search_terms(q)) for q in questions + EXTRA]
    return [m for m in dict.fromkeys(matches) if m]


def _compare(twin: Twin, queries: list[str], conn=None, tenant_id: int | None = None) -> int:
    checked = 0
    for number, match in enumerate(queries):
        for include_private in (True, False):
            # Every query's top 50 (memfs's pool), a quarter of them ranked in full.
            for limit in (50, 100_000) if number % 4 == 0 else (50,):
                expected = twin.store.keyword_candidates(match, limit, include_private)
                got = keyword.keyword_candidates(conn or twin.conn, tenant_id or twin.tenant_id, match, limit,
                                                 include_private)
                _same(expected, got, f"{match} private={include_private} limit={limit}")
                checked += bool(expected)
    return checked


def test_bm25_equals_fts5_on_locomo(db: str, tmp_path: Path) -> None:
    workspace = uuid.uuid4()
    a = roles.grant_login(db, workspace, "a")
    b = roles.grant_login(db, workspace, "b")
    # a may read b's public rows: then nothing but the queries' own tenant_id keeps b's chunks
    # and statistics out of a's ranking.
    roles.grant_reader(db, workspace, "b", workspace, "a")
    names = sorted(p.name for p in DATA.glob("*.md"))
    with psycopg.connect(a.dsn, autocommit=True, prepare_threshold=None) as conn_a, \
            psycopg.connect(b.dsn, autocommit=True, prepare_threshold=None) as conn_b:
        (tmp_path / "a").mkdir()
        (tmp_path / "b").mkdir()
        twin_a = Twin(tmp_path / "a", conn_a, a.tenant_id)
        twin_b = Twin(tmp_path / "b", conn_b, b.tenant_id)
        for path, text, private in _files(names[:13]):
            twin_a.add(path, text, private)
        twin_a.add("memory/cjk.md", CJK, False)
        for path, text, private in _files(names[6:]):  # overlapping days, other statistics
            twin_b.add(path, text, private)
        queries = _queries()
        assert len(queries) > 150
        assert _compare(twin_a, queries) > 200  # most queries match something
        # As a, b's public chunks only (a sees no private row of b): FTS5's public table of b.
        for match in queries[:60]:
            expected = twin_b.store.keyword_candidates(match, 50, include_private=False)
            _same(expected, keyword.keyword_candidates(conn_a, b.tenant_id, match, 50, True), f"b as a: {match}")
        # Deletes: a public and a private day gone, then one back with other text.
        for path, _, private in _files(names[:13])[:2]:
            twin_a.remove(path)
        twin_a.remove("memory/cjk.md")
        twin_a.add("memory/cjk.md", CJK.replace("东京", "大阪"), True)
        _compare(twin_a, queries)
        stats = conn_a.execute("SELECT private, chunks, total_length FROM memfs.corpus_stats WHERE tenant_id = %s "
                               "ORDER BY private", (a.tenant_id,)).fetchall()
        store_counts = twin_a.store.conn.execute("SELECT private, count(*) FROM chunks GROUP BY private "
                                                 "ORDER BY private").fetchall()
        assert [(p, n) for p, n, _ in stats] == [(bool(p), n) for p, n in store_counts]
        twin_a.store.close()
        twin_b.store.close()


def test_phrases_are_parsed_as_fts5_reads_them() -> None:
    assert keyword.phrases(match_expression(["running", "runs", "东京"])) == [("run",), ("run",), ("东", "京")]
    assert keyword.phrases('"say ""hi"""') == [("sai", "hi")]
    for bad in ('running', '"a" AND "b"', '"a" OR b', '"a" "b"', ''):
        with pytest.raises(ValueError):
            keyword.phrases(bad)
