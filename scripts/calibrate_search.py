#!/usr/bin/env python3
"""Fit the constants of memfs's calibrated search scores on the LoCoMo dev set, and check them on
conversations they were not fitted on.

    python scripts/calibrate_search.py ../shared/bench/locomo-dev [--sources md,jsonl]

Fitted on both copies of every conversation (Markdown daily logs and ClawGPT sync JSONL), one set
of constants per copy (Markdown units, and messages: see memfs/index/search/scoring.py), each calibrated to
the same probability so that one min_score means the same on both.  Features are the ones search computes (memfs.index.search.hybrid.score_units): keyword coverage, the
unit's cosine, its chunk's cosine.

1. Ranking weights: a logistic regression telling each question's evidence units from the other
   candidate units of the same workspace (the classes weighed equally).
2. Calibration: related pairs (each question with its evidence units) against unrelated pairs
   (the question with the five best-ranked units of the next conversation's workspace in the same
   source, 26->30->41->42->43->26: other people, other lives), the classes weighed equally; a logistic
   regression on the ranking score r gives P(related) = sigmoid(A + B r).  The same on the
   keyword feature alone is the score without vectors.

Then, leave one conversation out: fitted on four (both sources; the unrelated pairs of the fit
never involve the held-out conversation), the fifth is searched with those constants in each
source (R@6, MRR@10, visible@6, answered@own, false-positive rate at several min_score values):
figures for chats the constants have never seen.  The constants fitted on all five are printed
for memfs/index/search/scoring.py, and everything is written beside this script: calibrate_search_once.json
when Markdown is read once (the default), calibrate_search.json when it is read whole.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_locomo  # noqa: E402  (same folder)

from memfs.config import parse_override  # noqa: E402
from memfs.index.embedding.late import read_as  # noqa: E402
from memfs.index.search.hybrid import (  # noqa: E402
    Scope,
    SearchOptions,
    score_units,
    scoring,  # noqa: E402
)
from memfs.memory import Memory  # noqa: E402
from memfs.workspace import FileKind  # noqa: E402

NEGATIVES_PER_QUESTION = 5
# What the last fit measured, by the Markdown set it fits: read whole (scoring.MARKDOWN, and the
# messages' set, scoring.MESSAGE, fitted when messages were read whole) or read once (the default:
# scoring.MARKDOWN_ONCE; its jsonl figures are messages read late, not the constants in use).
FIGURES = {"MARKDOWN": Path(__file__).resolve().parent / "calibrate_search.json",
           "MARKDOWN_ONCE": Path(__file__).resolve().parent / "calibrate_search_once.json"}


def features(memory: Memory, question: str) -> list:
    vector = memory.provider.embed([question])[0]
    return score_units(memory.store, question, vector, True, None, Scope(SearchOptions())).ranked


def row(item) -> list[float]:
    unit = item.cosine if not np.isnan(item.cosine) else 0.0
    chunk = item.chunk_cosine if not np.isnan(item.chunk_cosine) else unit
    return [item.keyword, unit, chunk]


def fit(x: np.ndarray, y: np.ndarray, l2: float = 1e-3, iterations: int = 50) -> np.ndarray:
    """Logistic regression by Newton's method, the two classes weighed equally."""
    weight = np.where(y == 1, 0.5 / max(1, y.sum()), 0.5 / max(1, (1 - y).sum())) * len(y)
    xb = np.hstack([np.ones((len(x), 1)), x])
    w = np.zeros(xb.shape[1])
    for _ in range(iterations):
        p = 1 / (1 + np.exp(-(xb @ w)))
        gradient = xb.T @ (weight * (p - y)) + l2 * np.r_[0, w[1:]]
        hessian = (xb * (weight * p * (1 - p))[:, None]).T @ xb + l2 * np.diag(np.r_[0, np.ones(len(w) - 1)])
        w -= np.linalg.solve(hessian, gradient)
    return w


Fitted = tuple  # (ranking weights, Platt's A and B, keyword-only K0 and K1)


@contextlib.contextmanager
def constants(by_source: dict[str, Fitted]):
    """Search with these constants: Markdown's ("md") in scoring.MARKDOWN and MARKDOWN_ONCE (the
    dev set's Markdown copy holds daily logs only, all read one way), messages' ("jsonl") in
    scoring.MESSAGE."""
    saved = {name: getattr(scoring, name) for name in ("MARKDOWN", "MARKDOWN_ONCE", "MESSAGE")}
    for source, (weights, platt, keyword) in by_source.items():
        fitted = scoring.Constants(*[float(v) for v in (*weights, *platt, *keyword)])
        for name in (("MARKDOWN", "MARKDOWN_ONCE") if source == "md" else ("MESSAGE",)):
            setattr(scoring, name, fitted)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(scoring, name, value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dev", type=Path)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memfs-eval-state")
    parser.add_argument("--thresholds", default="0.3,0.4,0.45,0.5,0.52,0.55,0.6,0.65")
    parser.add_argument("--sources", default="md,jsonl", help="which copies of the conversations to fit on")
    parser.add_argument("--out", type=Path, help="where the fitted figures are written (default: beside this script, "
                        "by the Markdown set fitted)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    overrides = [parse_override(o) for o in args.overrides]
    thresholds = [float(t) for t in args.thresholds.split(",")]
    sources = [s.strip() for s in args.sources.split(",") if s.strip()]
    folders = [p for p in sorted(args.dev.iterdir()) if p.is_dir() and p.name.startswith("conv-")]
    convs = [c.name for c in folders]
    neighbour_of = {c: convs[(i + 1) % len(convs)] for i, c in enumerate(convs)}
    with tempfile.TemporaryDirectory() as tmp:
        memories = {(s, c.name): eval_locomo.open_memory(eval_locomo.make_workspace(c, Path(tmp), s), c.name,
                                                         args.cache, overrides)
                    for s in sources for c in folders}
        for memory in memories.values():
            memory.embed_pending()
        data: dict[tuple[str, str], list[tuple[list[list[float]], list[list[float]], list[list[float]]]]] = {}
        for source in sources:
            for conv in folders:
                questions, dia = eval_locomo.load_conv(conv)
                rows = []
                for q in questions:
                    spans, _ = eval_locomo.evidence(q, dia, source, conv)
                    if not spans:
                        continue
                    own = features(memories[(source, conv.name)], q["question"])
                    marks = [bool(eval_locomo.hits(eval_locomo.Hit(i.chunk.path, i.unit.start_line, i.unit.end_line,
                                                                   ""), spans)) for i in own]
                    related = [row(i) for i, m in zip(own, marks) if m]
                    others = [row(i) for i, m in zip(own, marks) if not m]
                    other = features(memories[(source, neighbour_of[conv.name])], q["question"])
                    rows.append((related, others, [row(i) for i in other]))
                data[(source, conv.name)] = rows

        def fitted(names: list[str], source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            """Constants for one source, fitted on the conversations ``names``.  Unrelated pairs
            are a question against another conversation's workspace, both in ``names``: nothing
            of a held-out conversation, its text or its questions, enters the fit."""
            keys = [(source, n) for n in names]
            pos = [r for k in keys for related, _, _ in data[k] for r in related]
            own_neg = [r for k in keys for _, others, _ in data[k] for r in others]
            x = np.array(pos + own_neg)
            y = np.r_[np.ones(len(pos)), np.zeros(len(own_neg))]
            weights = fit(x, y)[1:]  # the intercept does not change an order
            score = lambda rows: np.array(rows) @ weights  # noqa: E731
            strangers = [u for s, n in keys if neighbour_of[n] in names for _, _, u in data[(s, n)]]
            unrelated = [sorted(score(u), reverse=True)[:NEGATIVES_PER_QUESTION] if u else [] for u in strangers]
            unrelated_r = np.array([v for top in unrelated for v in top])
            related_r = score(pos)
            r = np.r_[related_r, unrelated_r][:, None]
            labels = np.r_[np.ones(len(related_r)), np.zeros(len(unrelated_r))]
            platt = fit(r, labels)
            unrelated_kw = [sorted((row[0] for row in u), reverse=True)[:NEGATIVES_PER_QUESTION] for u in strangers]
            kw = np.r_[np.array(pos)[:, 0], [v for top in unrelated_kw for v in top]][:, None]
            kw_labels = np.r_[np.ones(len(pos)), np.zeros(len(kw) - len(pos))]
            return weights, platt, fit(kw, kw_labels)

        report: dict = {"sources": sources, "conversations": convs, "percentiles": {}, "held_out": {},
                        "folds": []}
        print("feature percentiles (5/25/50/75/95), all conversations:")
        for source in sources:
            for index, name in enumerate(("keyword", "unit cosine", "chunk cosine")):
                pos = [r[index] for n in convs for related, _, _ in data[(source, n)] for r in related]
                neg = [max(u, key=lambda row: row[index])[index] for n in convs for _, _, u in data[(source, n)] if u]
                p_pos, p_neg = np.percentile(pos, [5, 25, 50, 75, 95]), np.percentile(neg, [5, 25, 50, 75, 95])
                print(f"  {source:<5} {name:<13} related   {np.round(p_pos, 3)}")
                print(f"  {'':<5} {'':<13} unrelated {np.round(p_neg, 3)} (best per question)")
                report["percentiles"][f"{source} {name}"] = {"related": np.round(p_pos, 3).tolist(),
                                                             "unrelated": np.round(p_neg, 3).tolist()}

        print("\nleave one conversation out (fitted on the others, both sources; held out: its questions on its "
              "own workspace, and asked of the next conversation's for the false-positive rate):")
        totals: dict[str, dict[float, dict[str, list[float]]]] = {s: {t: {} for t in thresholds} for s in sources}
        for conv in folders:
            fold = {s: fitted([n for n in convs if n != conv.name], s) for s in sources}
            report["folds"].append({"held_out": conv.name, **{
                s: {"RK_RU_RC": np.round(w, 3).tolist(), "A_B": np.round(p, 3).tolist(),
                    "K0_K1": np.round(k, 3).tolist()} for s, (w, p, k) in fold.items()}})
            questions, dia = eval_locomo.load_conv(conv)
            with constants(fold):
                for source in sources:
                    for q in questions:
                        spans, texts = eval_locomo.evidence(q, dia, source, conv)
                        if not spans:
                            continue
                        ranked = eval_locomo.memfs_ranked(memories[(source, conv.name)], q["question"], 10, 0.0)
                        unrelated = memories[(source, neighbour_of[conv.name])].search(
                            q["question"], max_results=1, min_score=0).results
                        top_other = unrelated[0].score if unrelated else 0.0
                        for t in thresholds:
                            kept = [r for r in ranked if r.score >= t]
                            for name, value in eval_locomo.score(kept, spans, texts).items():
                                totals[source][t].setdefault(name, []).append(value)
                            totals[source][t].setdefault("fp_rate", []).append(float(top_other >= t))
        names = ["R@1", "R@6", "MRR@10", "visible@6", "answered@own", "fp_rate", "out_tokens"]
        for source in sources:
            print(f"\n{source}:")
            print(f"{'min_score':>9} " + " ".join(f"{n:>12}" for n in names))
            report["held_out"][source] = {}
            for t in thresholds:
                means = {n: round(statistics.fmean(totals[source][t].get(n, [0])), 3) for n in names}
                report["held_out"][source][f"{t:.2f}"] = means
                print(f"{t:>9.2f} " + " ".join(f"{means[n]:>12.3f}" for n in names))

        report["fitted"] = {}
        # Which Markdown set these figures are for: how this run's settings read a daily log.
        any_memory = next(iter(memories.values()))
        mode = any_memory.indexer.reading()
        markdown_name = "MARKDOWN_ONCE" if read_as(mode, FileKind.DAILY_LOG) == "once" else "MARKDOWN"
        report["markdown_constants"] = markdown_name
        for source in sources:
            weights, platt, keyword = fitted(convs, source)
            where = f"{markdown_name} = Constants(...)" if source == "md" else "MESSAGE = Constants(...)"
            print(f"\n{source}: fitted on all conversations (for memfs/index/search/scoring.py, {where}):")
            print(f"rk, ru, rc = {', '.join(f'{v:.2f}' for v in weights)}")
            print(f"a, b = {', '.join(f'{v:.2f}' for v in platt)}")
            print(f"k0, k1 = {', '.join(f'{v:.2f}' for v in keyword)}")
            related = sum(len(r) for c in convs for r, _, _ in data[(source, c)])
            own = sum(len(o) for c in convs for _, o, _ in data[(source, c)])
            print(f"({related} related units, {own} other units of the same workspaces, "
                  f"{NEGATIVES_PER_QUESTION} unrelated units per question)")
            report["fitted"][source] = {"RK_RU_RC": np.round(weights, 2).tolist(),
                                        "A_B": np.round(platt, 2).tolist(), "K0_K1": np.round(keyword, 2).tolist(),
                                        "related_units": related, "other_units": own,
                                        "unrelated_per_question": NEGATIVES_PER_QUESTION}
        out = args.out or FIGURES[markdown_name]
        out.write_text(json.dumps(report, indent=1) + "\n")
        print(f"figures written to {out}")
        for memory in memories.values():
            memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
