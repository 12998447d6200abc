#!/usr/bin/env python3
"""Search on what people really write: the probe set (tests/data/probes/, built by
scripts/probe_workspace.py) searched with memfs's defaults, reported beside the LoCoMo dev set.

    python scripts/eval_probes.py [--set KEY=VALUE ...] [--details] [--json]

The workspace (everyday facts as MEMORY.md items, daily log entries, note items and sync chat
messages, with junk beside them: random bytes, a base64 blob, a hex dump, ANSI-coloured
terminal output) is written into a temporary folder and indexed with the default local model,
as ``memfs index`` would.  Every probe is one search at the default ``min_score`` and n=6:

- paraphrase (no word in common with the fact: checked here) and exact (shares its words):
  passes when the first result cites the fact's lines, so it is shown and passes min_score.
  ``top1@0`` and ``top3@0`` say the same at min_score 0: ranking apart from abstention;
  ``score`` is the median score of the fact's best unit when it is the first result.
- unrelated (a question about something the workspace does not hold) and degenerate (repeated
  characters, random base64 or hex, one long token, word pieces the model does not know): a
  false positive when any result comes back.

Figures per kind, per domain and per form (where the fact is written).  ``--details`` prints
every probe's first result.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import probe_workspace  # noqa: E402  (same folder)

from memfs.config import load_config, parse_override  # noqa: E402
from memfs.index.text.keywords import search_terms, stems  # noqa: E402
from memfs.memory import Memory  # noqa: E402

FOUND_KINDS = ("paraphrase", "exact")
ABSTAIN_KINDS = ("unrelated", "degenerate")


def shared_terms(query: str, fact: dict) -> set[str]:
    """The stems a query has in common with the fact as the index reads it (text and heading,
    title or chat title): a paraphrase must have none."""
    around = " ".join(fact.get(k, "") for k in ("heading", "title") if fact.get(k))
    held = stems(f"{around} {fact['text']}")
    return {s for term in search_terms(query) for s in stems(term)} & held


def open_memory(ws: Path, state: Path, overrides: list[tuple[str, str]]) -> Memory:
    cfg = load_config(workspace=ws, agent="probes", env={}, overrides=[("state_dir", str(state)), *overrides])
    memory = Memory(cfg)
    memory.rebuild()  # reconcile and embed everything, as `memfs index` does
    return memory


def hits(result, place: probe_workspace.Place) -> bool:
    return result.path == place.path and result.start_line <= place.end_line and place.start_line <= result.end_line


def run(overrides: list[tuple[str, str]], cache: Path | None) -> tuple[list[dict], list[str]]:
    probes = probe_workspace.load_probes()
    facts = {f["id"]: f for f in probe_workspace.load_facts()}
    problems = []
    for probe in probes:
        if probe["kind"] == "paraphrase" and (common := shared_terms(probe["text"], facts[probe["expect"]])):
            problems.append(f"{probe['id']} {probe['query']!r} shares {sorted(common)} with {probe['expect']}")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        ws = Path(tmp) / "workspace"
        places = probe_workspace.build(ws)
        state = cache or Path(tmp) / "state"
        memory = open_memory(ws, state, overrides)
        try:
            for probe in probes:
                shown = memory.search(probe["text"], max_results=6).results
                ranked = memory.search(probe["text"], max_results=6, min_score=0.0).results
                row = {"id": probe["id"], "kind": probe["kind"], "query": probe["query"],
                       "top": [(r.citation, r.score, r.snippet[:100]) for r in ranked[:3]],
                       "answered": len(shown)}
                if probe["kind"] in FOUND_KINDS:
                    fact = facts[probe["expect"]]
                    place = places[probe["expect"]]
                    row.update(domain=fact["domain"], form=fact["form"], expect=probe["expect"],
                               passed=bool(shown) and hits(shown[0], place),
                               top1_at_0=bool(ranked) and hits(ranked[0], place),
                               top3_at_0=any(hits(r, place) for r in ranked[:3]),
                               score=next((r.score for r in ranked if hits(r, place)), 0.0))
                else:
                    row.update(domain=probe.get("domain", ""), form="", passed=not shown)
                rows.append(row)
            zookeeper = memory.search("zookeeper", max_results=1).results
            if not zookeeper or "zookeeper" not in zookeeper[0].snippet or "[1;31m" in zookeeper[0].snippet:
                problems.append(f"zookeeper is not shown clean: {[r.snippet for r in zookeeper]}")
        finally:
            memory.close()
    return rows, problems


def summarise(rows: list[dict]) -> dict:
    """Per kind, per (kind, domain) and per (kind, form): the pass rate (found kinds) or the
    false-positive rate (abstaining kinds)."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for row in rows:
        groups[row["kind"]].append(row)
        groups[f"{row['kind']} / {row['domain']}"].append(row)
        if row["form"]:
            groups[f"{row['kind']} by form / {row['form']}"].append(row)
    out = {}
    for name, members in sorted(groups.items()):
        kind = members[0]["kind"]
        figure: dict[str, float] = {"probes": len(members)}
        if kind in FOUND_KINDS:
            figure["pass"] = statistics.fmean(r["passed"] for r in members)
            figure["top1@0"] = statistics.fmean(r["top1_at_0"] for r in members)
            figure["top3@0"] = statistics.fmean(r["top3_at_0"] for r in members)
            top = [r["score"] for r in members if r["top1_at_0"]]
            figure["score"] = statistics.median(top) if top else 0.0
        else:
            figure["fp_rate"] = statistics.fmean(not r["passed"] for r in members)
        out[name] = {k: round(v, 3) for k, v in figure.items()}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--cache", type=Path, help="a state folder kept between runs (its embedding cache)")
    parser.add_argument("--details", action="store_true", help="every probe's first results")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows, problems = run([parse_override(o) for o in args.overrides], args.cache)
    summary = summarise(rows)
    if args.json:
        print(json.dumps({"summary": summary, "problems": problems, "rows": rows if args.details else []}))
        return 0
    if args.details:
        for row in rows:
            mark = "ok  " if row["passed"] else "FAIL"
            print(f"{mark} {row['id']:<16} {row['query'][:60]!r}")
            for citation, score, snippet in row["top"][:2 if row["kind"] in FOUND_KINDS else 1]:
                print(f"       {score:.3f} {citation}  {snippet[:70]!r}")
        print()
    print(f"{'group':<40} {'probes':>6} {'pass':>6} {'top1@0':>7} {'top3@0':>7} {'score':>6} {'fp_rate':>8}")
    for name, figure in summary.items():
        cells = [f"{figure[k]:>{w}.3f}" if k in figure else " " * w
                 for k, w in (("pass", 6), ("top1@0", 7), ("top3@0", 7), ("score", 6), ("fp_rate", 8))]
        print(f"{name:<40} {figure['probes']:>6} " + " ".join(cells))
    for problem in problems:
        print(f"problem: {problem}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
