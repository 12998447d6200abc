#!/usr/bin/env python3
"""Retrieval quality on the LoCoMo dev set (metric of its README), BM25 alone vs memfs's default.

    python scripts/eval_locomo.py ../shared/bench/locomo-dev [--source md|jsonl] [--set key=value ...]

Each conversation is indexed as its own workspace and agent.  The BM25 baseline is SQLite FTS5
over plain 400/80-token line-aware chunks, every query word OR-ed (the README's reference); memfs
runs with its defaults (plus any --set overrides).  Embeddings are cached under --cache so reruns
are fast; indexes are rebuilt every run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from memfs.config import load_config, parse_override
from memfs.index import tokens
from memfs.index.search import SearchResult
from memfs.index.text import query_terms
from memfs.memory import Memory

KS = (1, 3, 5, 6, 10)


def load_conv(conv: Path) -> tuple[list[dict], dict]:
    qa = json.loads((conv / "qa.json").read_text())
    dia = json.loads((conv / "dia_map.json").read_text())
    questions = [q for q in qa if q.get("category") != 5 and q.get("evidence_norm")]
    return questions, dia


def evidence_spans(question: dict, dia: dict, source: str) -> list[tuple[str, int, int]]:
    spans = []
    for ev in question["evidence_norm"]:
        where = dia.get(ev, {}).get(source)
        if where:
            spans.append((where["path"], where["start_line"], where["end_line"]))
    return spans


def hits(result: SearchResult | tuple[str, int, int, str], spans: list[tuple[str, int, int]]) -> list[int]:
    path, start, end = (result.path, result.start_line, result.end_line) if isinstance(result, SearchResult) else result[:3]
    return [i for i, (p, s, e) in enumerate(spans) if p == path and start <= e and s <= end]


def score(ranked: list, spans: list[tuple[str, int, int]]) -> dict[str, float]:
    out: dict[str, float] = {}
    first = None
    for rank, result in enumerate(ranked[:10], start=1):
        if hits(result, spans):
            first = rank
            break
    for k in KS:
        out[f"R@{k}"] = float(first is not None and first <= k)
    out["MRR@10"] = 1.0 / first if first else 0.0
    covered = set()
    for result in ranked[:6]:
        covered.update(hits(result, spans))
    out["Rall@6"] = float(len(covered) == len(spans))
    budget = 0
    hit_tok = 0.0
    for result in ranked:
        text = result.snippet if isinstance(result, SearchResult) else result[3]
        if hits(result, spans):
            hit_tok = 1.0
            break
        budget += tokens.count(text)
        if budget >= 2400:
            break
    out["R@2400tok"] = hit_tok
    return out


def make_workspace(conv: Path, root: Path, source: str) -> Path:
    ws = root / conv.name
    folder = "memory" if source == "md" else "clawgpt-memory"
    shutil.copytree(conv / folder, ws / folder)
    return ws


def bm25_ranked(memory: Memory, question: str, k: int) -> list[tuple[str, int, int, str]]:
    terms = query_terms(question)
    if not terms:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    ids = [cid for cid, _ in memory.store.keyword_candidates(match, k)]
    chunks = memory.store.chunks_by_id(ids)
    return [(chunks[i].path, chunks[i].start_line, chunks[i].end_line, chunks[i].text) for i in ids if i in chunks]


def run(dev: Path, source: str, overrides: list[tuple[str, str]], cache: Path, convs: list[str]) -> dict:
    totals: dict[str, dict[str, list[float]]] = {"bm25": {}, "memfs": {}}
    latencies: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        for conv in sorted(p for p in dev.iterdir() if p.is_dir() and p.name.startswith("conv-")):
            if convs and conv.name not in convs:
                continue
            questions, dia = load_conv(conv)
            ws = make_workspace(conv, root, source)
            base_cfg = load_config(workspace=ws, agent=f"{conv.name}-bm25", env={},
                                   overrides=[("state_dir", str(cache)), ("embedding.provider", "none")])
            mem_cfg = load_config(workspace=ws, agent=conv.name, env={},
                                  overrides=[("state_dir", str(cache)), *overrides])
            for cfg in (base_cfg, mem_cfg):
                for suffix in ("", "-wal", "-shm"):
                    Path(str(cfg.index_path) + suffix).unlink(missing_ok=True)
            baseline = Memory(base_cfg)
            baseline.index()
            memory = Memory(mem_cfg)
            memory.index()
            for q in questions:
                spans = evidence_spans(q, dia, source)
                if not spans:
                    continue
                for name, value in score(bm25_ranked(baseline, q["question"], 10), spans).items():
                    totals["bm25"].setdefault(name, []).append(value)
                started = time.perf_counter()
                response = memory.search(q["question"], max_results=10)
                latencies.append(time.perf_counter() - started)
                for name, value in score(response.results, spans).items():
                    totals["memfs"].setdefault(name, []).append(value)
            baseline.close()
            memory.close()
    summary = {
        system: {name: round(statistics.fmean(values), 3) for name, values in metrics.items()}
        for system, metrics in totals.items()
    }
    summary["questions"] = len(totals["memfs"].get("R@1", []))
    summary["search_ms_p50"] = round(statistics.median(latencies) * 1000, 1) if latencies else 0
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dev", type=Path, help="the locomo-dev folder")
    parser.add_argument("--source", choices=("md", "jsonl"), default="md")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memfs-eval-state")
    parser.add_argument("--conv", action="append", default=[], help="only these conversations")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    summary = run(args.dev, args.source, [parse_override(o) for o in args.overrides], args.cache, args.conv)
    if args.json:
        print(json.dumps(summary))
        return 0
    names = ["R@1", "R@3", "R@5", "R@6", "R@10", "MRR@10", "Rall@6", "R@2400tok"]
    print(f"LoCoMo dev, {args.source} files, {summary['questions']} questions")
    print(f"{'retriever':<10} " + " ".join(f"{n:>9}" for n in names))
    for system in ("bm25", "memfs"):
        print(f"{system:<10} " + " ".join(f"{summary[system].get(n, 0):>9.3f}" for n in names))
    delta = {n: summary["memfs"][n] - summary["bm25"][n] for n in names}
    print(f"{'delta':<10} " + " ".join(f"{delta[n]:>+9.3f}" for n in names))
    print(f"memfs search p50: {summary['search_ms_p50']} ms (query embedding included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
