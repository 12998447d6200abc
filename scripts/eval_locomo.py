#!/usr/bin/env python3
"""Retrieval quality on the LoCoMo dev set, BM25 alone vs memfs's default, every metric of the
dev set's README in one run, on both copies of each conversation (Markdown daily logs and ClawGPT
sync JSONL) unless --source picks one:

    python scripts/eval_locomo.py ../shared/bench/locomo-dev [--source md|jsonl|both] [--set key=value ...]

- R@k, MRR@10, Rall@6, R@2400tok: a result is a hit when its cited lines overlap an evidence turn.
- visible@6: the evidence turn's text (first 80 characters, whitespace collapsed, any case) is in
  the snippet of a top-6 result: what an agent sees without reading further.
- cite_lines: lines a top-6 result cites; out_tokens: cl100k tokens of the top-6 snippets plus
  citations (what an agent reads per search; a result from a sync file counts its chat's title,
  which the result shows above its snippet).
- answered@own: the own workspace's default answer (n=6, default min_score) includes a hit;
  fp_rate: asked of the next conversation's workspace (26->30->41->42->43->26), the share of
  questions that get any result at all.

Each conversation is its own workspace and agent.  The BM25 baseline is SQLite FTS5 over plain
400/80-token chunks, every query word OR-ed (the dev README's reference), its snippet the first
700 characters of the chunk; memfs runs with its defaults (plus any --set overrides).  Embeddings
are cached under --cache so reruns are fast; indexes are rebuilt every run.

With ``--set index.backend=postgres`` memfs's indexes live in PostgreSQL (the baseline stays on
SQLite): each conversation's agent gets a login (``memfs pg grant``'s code) in a scratch database
of the server MEMFS_PG_DSN names (an admin DSN), else of a throwaway server (tests/pg.py, the
``[postgres]`` extra), made and dropped by this run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from memfs.config import load_config, parse_override
from memfs.index.text import tokens
from memfs.index.text.keywords import query_terms
from memfs.memory import Memory

KS = (1, 3, 5, 6, 10)
NAMES = ["R@1", "R@3", "R@5", "R@6", "R@10", "MRR@10", "Rall@6", "R@2400tok", "visible@6", "answered@own",
         "fp_rate", "cite_lines", "out_tokens"]
BASELINE_SNIPPET = 700


@dataclass(frozen=True)
class Hit:
    path: str
    start_line: int
    end_line: int
    snippet: str
    score: float = 0.0

    @property
    def citation(self) -> str:
        return f"{self.path}#L{self.start_line}-L{self.end_line}"


def load_conv(conv: Path) -> tuple[list[dict], dict]:
    qa = json.loads((conv / "qa.json").read_text())
    dia = json.loads((conv / "dia_map.json").read_text())
    questions = [q for q in qa if q.get("category") != 5 and q.get("evidence_norm")]
    return questions, dia


def evidence(question: dict, dia: dict, source: str, conv: Path) -> tuple[list[tuple[str, int, int]], list[str]]:
    """The evidence turns' spans, and their texts as visible@6 compares them."""
    spans, texts = [], []
    for ev in question["evidence_norm"]:
        where = dia.get(ev, {})
        if source in where:
            spans.append((where[source]["path"], where[source]["start_line"], where[source]["end_line"]))
        md = where.get("md")
        if md:
            lines = (conv / md["path"]).read_text().split("\n")[md["start_line"] - 1 : md["end_line"]]
            texts.append(_collapse(" ".join(lines))[:80])
    return spans, texts


def _collapse(text: str) -> str:
    return re.sub(r"\s+", " ", text).strip().lower()


def hits(result: Hit, spans: list[tuple[str, int, int]]) -> list[int]:
    return [i for i, (p, s, e) in enumerate(spans) if p == result.path and result.start_line <= e and s <= result.end_line]


def score(ranked: list[Hit], spans: list[tuple[str, int, int]], texts: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    first = next((rank for rank, r in enumerate(ranked[:10], start=1) if hits(r, spans)), None)
    for k in KS:
        out[f"R@{k}"] = float(first is not None and first <= k)
    out["MRR@10"] = 1.0 / first if first else 0.0
    covered = set()
    for result in ranked[:6]:
        covered.update(hits(result, spans))
    out["Rall@6"] = float(len(covered) == len(spans))
    budget, hit_tok = 0, 0.0
    for result in ranked:
        if hits(result, spans):
            hit_tok = 1.0
            break
        budget += tokens.count(result.snippet)
        if budget >= 2400:
            break
    out["R@2400tok"] = hit_tok
    shown = [_collapse(r.snippet) for r in ranked[:6]]
    out["visible@6"] = float(any(t and t in s for t in texts for s in shown))
    top = ranked[:6]
    out["answered@own"] = float(any(hits(r, spans) for r in top))
    if top:
        out["cite_lines"] = statistics.fmean(r.end_line - r.start_line + 1 for r in top)
    out["out_tokens"] = float(sum(tokens.count(r.snippet) + tokens.count(r.citation) for r in top))
    return out


def make_workspace(conv: Path, root: Path, source: str) -> Path:
    ws = root / source / conv.name
    folder = "memory" if source == "md" else "clawgpt-memory"
    shutil.copytree(conv / folder, ws / folder)
    return ws


def bm25_ranked(memory: Memory, question: str, k: int) -> list[Hit]:
    terms = query_terms(question)
    if not terms:
        return []
    match = " OR ".join('"' + t.replace('"', '""') + '"' for t in terms)
    ids = [cid for cid, _ in memory.store.keyword_candidates(match, k)]
    chunks = memory.store.chunks_by_id(ids)
    return [Hit(chunks[i].path, chunks[i].start_line, chunks[i].end_line, chunks[i].text[:BASELINE_SNIPPET])
            for i in ids if i in chunks]


def memfs_ranked(memory: Memory, question: str, n: int, min_score: float | None = None) -> list[Hit]:
    return [Hit(r.path, r.start_line, r.end_line, shown(r.snippet, r.chat_title), r.score)
            for r in memory.search(question, max_results=n, min_score=min_score).results]


def shown(snippet: str, title: str) -> str:
    """What a result shows an agent: the snippet, under its chat's title for a sync file."""
    return f"# {title}\n{snippet}" if title else snippet


@contextlib.contextmanager
def pg_logins(overrides: list[tuple[str, str]]):
    """None, or (for index.backend=postgres) a function giving (workspace, agent)'s login DSN."""
    if dict(overrides).get("index.backend", "sqlite").strip().lower() != "postgres":
        yield None
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from pg import scratch_database, throwaway_server

    from memfs.index.storage.postgres import roles, schema
    from memfs.workspaceid import workspace_id

    with throwaway_server() as server, scratch_database(server.dsn, "memfs_eval") as admin:
        schema.init(admin)
        yield lambda ws, agent: roles.grant_login(admin, workspace_id(ws), agent).dsn


def open_memory(ws: Path, agent: str, cache: Path, overrides: list[tuple[str, str]], login=None) -> Memory:
    if login is not None:
        overrides = [*overrides, ("index.dsn", login(ws, agent))]
    cfg = load_config(workspace=ws, agent=agent, env={}, overrides=[("state_dir", str(cache)), *overrides])
    memory = Memory(cfg)
    memory.rebuild()  # indexes are rebuilt every run; the embedding cache is kept
    return memory


def run(dev: Path, source: str, overrides: list[tuple[str, str]], cache: Path, convs: list[str]) -> dict:
    totals: dict[str, dict[str, list[float]]] = {"bm25": {}, "memfs": {}}
    latencies: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, pg_logins(overrides) as login:
        root = Path(tmp)
        folders = [p for p in sorted(dev.iterdir()) if p.is_dir() and p.name.startswith("conv-")]
        folders = [p for p in folders if not convs or p.name in convs]
        baselines, memories = {}, {}
        for conv in folders:
            ws = make_workspace(conv, root, source)  # the agent (and so the embedding cache) is the conversation's
            baselines[conv.name] = open_memory(ws, f"{conv.name}-bm25", cache, [("embedding.provider", "none")])
            memories[conv.name] = open_memory(ws, conv.name, cache, overrides, login)
        for position, conv in enumerate(folders):
            questions, dia = load_conv(conv)
            neighbour = folders[(position + 1) % len(folders)].name
            for q in questions:
                spans, texts = evidence(q, dia, source, conv)
                if not spans:
                    continue
                baseline = bm25_ranked(baselines[conv.name], q["question"], 10)
                for name, value in score(baseline, spans, texts).items():
                    totals["bm25"].setdefault(name, []).append(value)
                other = bm25_ranked(baselines[neighbour], q["question"], 6) if len(folders) > 1 else []
                totals["bm25"].setdefault("fp_rate", []).append(float(bool(other)))
                started = time.perf_counter()
                ranked = memfs_ranked(memories[conv.name], q["question"], 10)
                latencies.append(time.perf_counter() - started)
                for name, value in score(ranked, spans, texts).items():
                    totals["memfs"].setdefault(name, []).append(value)
                if len(folders) > 1:
                    unrelated = memfs_ranked(memories[neighbour], q["question"], 6)
                    totals["memfs"].setdefault("fp_rate", []).append(float(bool(unrelated)))
        for memory in [*baselines.values(), *memories.values()]:
            memory.close()
    summary: dict = {
        system: {name: round(statistics.fmean(values), 3) for name, values in metrics.items()}
        for system, metrics in totals.items()
    }
    summary["questions"] = len(totals["memfs"].get("R@1", []))
    summary["search_ms_p50"] = round(statistics.median(latencies) * 1000, 1) if latencies else 0
    return summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dev", type=Path, help="the locomo-dev folder")
    parser.add_argument("--source", choices=("md", "jsonl", "both"), default="both")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memfs-eval-state")
    parser.add_argument("--conv", action="append", default=[], help="only these conversations")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    sources = ("md", "jsonl") if args.source == "both" else (args.source,)
    overrides = [parse_override(o) for o in args.overrides]
    summaries = {source: run(args.dev, source, overrides, args.cache, args.conv) for source in sources}
    if args.json:
        print(json.dumps(summaries if args.source == "both" else summaries[args.source]))
        return 0
    for source, summary in summaries.items():
        print(f"LoCoMo dev, {source} files, {summary['questions']} questions")
        print(f"{'retriever':<10} " + " ".join(f"{n:>12}" for n in NAMES))
        for system in ("bm25", "memfs"):
            print(f"{system:<10} " + " ".join(f"{summary[system].get(n, float('nan')):>12.3f}" for n in NAMES))
        print(f"memfs search p50: {summary['search_ms_p50']} ms (query embedding included)\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
