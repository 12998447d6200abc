"""The optional reranker (search.rerank_url), against a real HTTP server on 127.0.0.1: it orders a
search's best candidates, each result keeps a calibrated probability (the k-th result the k-th
best of the candidates'), and a slow or absent server is skipped with a warning, memfs's order
kept.  A workspace's .memfs.toml cannot point search at a server."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from conftest import write
from rerank_server import RerankServer

from memfs.config import load_config

NOTES = {
    "memory/2026-11-01.md": "# 2026-11-01\n\n- The boiler service is booked for Tuesday at nine.\n",
    "memory/2026-11-02.md": "# 2026-11-02\n\n- The boiler pressure dropped again; the plumber says the valve.\n",
    "memory/2026-11-03.md": "# 2026-11-03\n\n- Paid the boiler invoice, 180 euros, from the joint account.\n",
}


def _memory(make_memory, workspace: Path, **settings: object):
    for rel, text in NOTES.items():
        write(workspace / rel, text)
    memory = make_memory(workspace, embedding__provider="none", **settings)
    memory.index()
    return memory


def test_the_reranker_orders_the_results_and_scores_stay_calibrated(workspace: Path, make_memory) -> None:
    plain = _memory(make_memory, workspace).search("boiler", min_score=0.5)
    mine = [(r.path, r.score) for r in plain.results]
    assert len(mine) == 3 and mine[0][0] != "memory/2026-11-03.md"
    with RerankServer(favour="invoice") as server:
        memory = make_memory(workspace, embedding__provider="none", search__rerank_url=server.url)
        answer = memory.search("boiler", min_score=0.5)
    assert [r.path for r in answer.results][0] == "memory/2026-11-03.md"  # the reranker's choice first
    # The same set of calibrated probabilities, best first, whatever the order.
    assert [r.score for r in answer.results] == sorted((s for _, s in mine), reverse=True)
    assert all(r.rerank is not None for r in answer.results) and not answer.warnings
    assert server.requests[0]["query"] == "boiler" and len(server.requests[0]["documents"]) == 3
    assert json.loads(json.dumps(answer.as_dict()))["results"][0]["rerank"] >= 10


def test_tei_s_answer_shape_and_a_token(workspace: Path, make_memory, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RERANK_TOKEN", "tok-1")
    _memory(make_memory, workspace)
    with RerankServer(favour="invoice", shape="tei", token="tok-1") as server:
        memory = make_memory(workspace, embedding__provider="none", search__rerank_url=server.url + "/rerank",
                             search__rerank_api_key_env="RERANK_TOKEN", search__rerank_model="bge-reranker")
        answer = memory.search("boiler", min_score=0.5)
    assert answer.results[0].path == "memory/2026-11-03.md" and not answer.warnings
    assert server.requests[0]["model"] == "bge-reranker" and server.requests[0]["texts"]


@pytest.mark.parametrize("trouble", ["slow", "down", "refuses"])
def test_a_slow_or_absent_reranker_is_skipped_with_a_warning(workspace: Path, make_memory, trouble: str) -> None:
    order = [r.path for r in _memory(make_memory, workspace).search("boiler", min_score=0.5).results]
    with RerankServer(favour="invoice", delay_s=3.0 if trouble == "slow" else 0.0,
                      token="expected" if trouble == "refuses" else "") as server:
        url = "http://127.0.0.1:9" if trouble == "down" else server.url
        memory = make_memory(workspace, embedding__provider="none", search__rerank_url=url,
                             search__rerank_timeout_ms=300)
        began = time.monotonic()
        answer = memory.search("boiler", min_score=0.5)
        took = time.monotonic() - began
    assert [r.path for r in answer.results] == order  # memfs's own order
    assert len(answer.warnings) == 1 and "results in memfs's own order" in answer.warnings[0]
    reason = {"slow": "did not answer within 300 ms", "down": "cannot be reached", "refuses": "answered HTTP 401"}
    assert reason[trouble] in answer.warnings[0], answer.warnings
    assert took < 2.5  # the slow one is given up on (it sleeps 3 s)


def test_n_results_come_from_the_reranked_candidates(workspace: Path, make_memory) -> None:
    _memory(make_memory, workspace)
    with RerankServer(favour="invoice") as server:
        memory = make_memory(workspace, embedding__provider="none", search__rerank_url=server.url)
        answer = memory.search("boiler", max_results=1, min_score=0.5)
    assert [r.path for r in answer.results] == ["memory/2026-11-03.md"]
    assert len(server.requests[0]["documents"]) == 3  # the candidates, not the one result asked


def test_a_workspace_file_cannot_set_a_reranker(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / ".memfs.toml").write_text('[search]\nrerank_url = "http://127.0.0.1:1"\nrerank_api_key_env = "HOME"\n'
                                    "max_results = 4\n")
    cfg = load_config(workspace=ws, env={})
    assert (cfg.search.rerank_url, cfg.search.rerank_api_key_env, cfg.search.max_results) == ("", "", 4)
