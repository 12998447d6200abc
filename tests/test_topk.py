"""The pruned keyword query (memfs.index.storage.sqlite.topk) returns exactly what the full query returns: the
same rows, bm25 scores and order, on a real index whose words range from a few rows to most of
them; it prunes when it can and runs the full query when too few rows can reach its threshold."""

from __future__ import annotations

import datetime as dt
import random
import re
from pathlib import Path

import pytest

from memfs.index.search.hybrid import Scope, SearchOptions
from memfs.index.text.keywords import match_expression, search_terms

DAY = Path(__file__).resolve().parent / "data" / "locomo-2023-05-08.md"
TURN = re.compile(r"^## \d\d:\d\d - (\w+)\n\n(.+?)\n", re.M)


def _turns() -> list[tuple[str, str]]:
    return TURN.findall(DAY.read_text())


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory):
    """A keyword index of 800 daily logs, each 2 real LoCoMo turns drawn with skewed odds: the
    first turns are in most chunks, the last in a handful (rare and common terms alike)."""
    from memfs.config import load_config
    from memfs.memory import Memory
    from memfs.workspace import init_workspace

    root = tmp_path_factory.mktemp("topk")
    workspace = root / "ws"
    init_workspace(workspace)
    turns = _turns()
    weights = [1.0 / (rank + 1) ** 1.5 for rank in range(len(turns))]
    pick = random.Random(5)
    day = dt.date(2023, 1, 1)
    for number in range(800):
        chosen = pick.choices(turns, weights, k=2)
        text = "\n".join(f"## {10 + i // 60:02d}:{i % 60:02d} - {who}\n\n{said}\n" for i, (who, said) in enumerate(chosen))
        (workspace / "memory" / f"{day + dt.timedelta(days=number)}.md").write_text(f"# {day}\n\n{text}")
    memory = Memory(load_config(workspace=workspace, env={}, overrides=[("state_dir", str(root / "state")),
                                                                        ("embedding.provider", "none")]))
    memory.index()
    yield memory.store
    memory.close()


def _queries() -> list[list[str]]:
    turns = [search_terms(said) for _, said in _turns()]
    pairs = [a[:4] + b[-3:] for a, b in zip(turns, turns[3:] + turns[:3])]
    return [t for t in turns + pairs if len(t) >= 2]


def _statements(store, call) -> list[str]:
    seen: list[str] = []

    def trace(cursor, sql: str, bindings) -> bool:
        seen.append(sql)
        return True

    store.conn.exec_trace = trace
    try:
        call()
    finally:
        store.conn.exec_trace = None
    return seen


def _pruned(statements: list[str]) -> bool:
    """Whether the answer came from a query restricted to candidates (the last statement)."""
    final = [s for s in statements if "bm25(chunks_fts)" in s][-1]
    return "+f.rowid IN" in final


@pytest.mark.parametrize("limit", [50, 10, 3])
def test_pruned_top_equals_the_full_query(index, limit: int) -> None:
    pruned = 0
    for terms in _queries():
        full = index.keyword_candidates(match_expression(terms), limit)
        statements = _statements(index, lambda: setattr(index, "_answer", index.keyword_top(terms, limit)))
        assert index._answer == full, terms  # the same ids, the same bm25, the same order
        pruned += _pruned(statements)
    assert pruned >= len(_queries()) // 3  # most queries are answered without scoring every row


def test_pruned_top_equals_the_full_query_in_a_scope(index) -> None:
    where, params = Scope(SearchOptions(after=dt.date(2023, 3, 1), before=dt.date(2024, 1, 1))).sql()
    for terms in _queries():
        full = index.keyword_candidates(match_expression(terms), 20, True, where, params)
        assert index.keyword_top(terms, 20, True, where, params) == full, terms


def test_too_few_rows_above_the_threshold_runs_the_full_query(index) -> None:
    # Two words of the rarest turn and a common one: fewer than k rows hold a rare word, so no
    # threshold is reached by k rows and the full query (every row that holds any) answers.
    rare = search_terms(_turns()[-1][1])[:2]
    terms = [*rare, "caroline"]
    full = index.keyword_candidates(match_expression(terms), 50)
    assert len(full) == 50 and any(score > -1e-3 for _, score in full)  # rows with the common word only
    statements = _statements(index, lambda: setattr(index, "_answer", index.keyword_top(terms, 50)))
    assert index._answer == full
    assert not _pruned(statements)
