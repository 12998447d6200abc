#!/usr/bin/env python3
"""Fit the constants of memfs's calibrated search scores on the LoCoMo dev set, and check them on
conversations they were not fitted on.

    python scripts/calibrate_search.py ../shared/bench/locomo-dev

Features are the ones search computes (memfs.index.search.score_units): keyword coverage, the
unit's cosine, its chunk's cosine.

1. Ranking weights: a logistic regression telling each question's evidence units from the other
   candidate units of the same workspace (the classes weighed equally).
2. Calibration: related pairs (each question with its evidence units) against unrelated pairs
   (the question with the five best-ranked units of the next conversation's workspace,
   26->30->41->42->43->26: other people, other lives), the classes weighed equally; a logistic
   regression on the ranking score r gives P(related) = sigmoid(A + B r).  The same on the
   keyword feature alone is the score without vectors.

Then, leave one conversation out: fitted on four, the fifth is searched with those constants
(R@6, MRR@10, visible@6, answered@own, false-positive rate at several min_score values).  The
constants fitted on all five are printed for memfs/index/scoring.py.
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_locomo  # noqa: E402  (same folder)

from memfs.config import parse_override  # noqa: E402
from memfs.index import scoring  # noqa: E402
from memfs.index.search import Scope, SearchOptions, score_units  # noqa: E402
from memfs.memory import Memory  # noqa: E402

NEGATIVES_PER_QUESTION = 5


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


@contextlib.contextmanager
def constants(weights: np.ndarray, platt: np.ndarray, keyword: np.ndarray):
    names = ("RK", "RU", "RC", "A", "B", "K0", "K1")
    saved = {name: getattr(scoring, name) for name in names}
    for name, value in zip(names, [*weights, *platt, *keyword]):
        setattr(scoring, name, float(value))
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(scoring, name, value)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dev", type=Path)
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memfs-eval-state")
    parser.add_argument("--thresholds", default="0.2,0.3,0.35,0.4,0.5,0.6,0.7")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()
    overrides = [parse_override(o) for o in args.overrides]
    thresholds = [float(t) for t in args.thresholds.split(",")]
    folders = [p for p in sorted(args.dev.iterdir()) if p.is_dir() and p.name.startswith("conv-")]
    with tempfile.TemporaryDirectory() as tmp:
        memories = {c.name: eval_locomo.open_memory(eval_locomo.make_workspace(c, Path(tmp), "md"), c.name,
                                                    args.cache, overrides) for c in folders}
        for memory in memories.values():
            memory.embed_pending()
        data: dict[str, list[tuple[list[list[float]], list[list[float]]]]] = {}
        for position, conv in enumerate(folders):
            neighbour = folders[(position + 1) % len(folders)].name
            questions, dia = eval_locomo.load_conv(conv)
            rows = []
            for q in questions:
                spans, _ = eval_locomo.evidence(q, dia, "md", conv)
                own = features(memories[conv.name], q["question"])
                marks = [bool(eval_locomo.hits(eval_locomo.Hit(i.chunk.path, i.unit.start_line, i.unit.end_line, ""),
                                               spans)) for i in own]
                related = [row(i) for i, m in zip(own, marks) if m]
                others = [row(i) for i, m in zip(own, marks) if not m]
                other = features(memories[neighbour], q["question"])
                rows.append((related, others, [row(i) for i in other]))
            data[conv.name] = rows

        def fitted(names: list[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
            pos = [r for n in names for related, _, _ in data[n] for r in related]
            own_neg = [r for n in names for _, others, _ in data[n] for r in others]
            x = np.array(pos + own_neg)
            y = np.r_[np.ones(len(pos)), np.zeros(len(own_neg))]
            weights = fit(x, y)[1:]  # the intercept does not change an order
            score = lambda rows: np.array(rows) @ weights  # noqa: E731
            unrelated = [sorted(score(u), reverse=True)[:NEGATIVES_PER_QUESTION] if u else []
                         for n in names for _, _, u in data[n]]
            unrelated_r = np.array([v for top in unrelated for v in top])
            related_r = score(pos)
            r = np.r_[related_r, unrelated_r][:, None]
            labels = np.r_[np.ones(len(related_r)), np.zeros(len(unrelated_r))]
            platt = fit(r, labels)
            unrelated_kw = [sorted((row[0] for row in u), reverse=True)[:NEGATIVES_PER_QUESTION]
                            for n in names for _, _, u in data[n]]
            kw = np.r_[np.array(pos)[:, 0], [v for top in unrelated_kw for v in top]][:, None]
            kw_labels = np.r_[np.ones(len(pos)), np.zeros(len(kw) - len(pos))]
            return weights, platt, fit(kw, kw_labels)

        print("feature percentiles (5/25/50/75/95), all five conversations:")
        for index, name in enumerate(("keyword", "unit cosine", "chunk cosine")):
            pos = [r[index] for n in data for related, _, _ in data[n] for r in related]
            neg = [max(u, key=lambda row: row[index])[index] for n in data for _, _, u in data[n] if u]
            print(f"  {name:<13} related   {np.round(np.percentile(pos, [5, 25, 50, 75, 95]), 3)}")
            print(f"  {'':<13} unrelated {np.round(np.percentile(neg, [5, 25, 50, 75, 95]), 3)} (best per question)")

        print("\nleave one conversation out (fitted on the other four):")
        totals: dict[float, dict[str, list[float]]] = {t: {} for t in thresholds}
        for position, conv in enumerate(folders):
            weights, platt, keyword = fitted([n for n in data if n != conv.name])
            neighbour = folders[(position + 1) % len(folders)].name
            questions, dia = eval_locomo.load_conv(conv)
            with constants(weights, platt, keyword):
                for q in questions:
                    spans, texts = eval_locomo.evidence(q, dia, "md", conv)
                    ranked = [eval_locomo.Hit(r.path, r.start_line, r.end_line, r.snippet, r.score)
                              for r in memories[conv.name].search(q["question"], max_results=10, min_score=0).results]
                    unrelated = memories[neighbour].search(q["question"], max_results=1, min_score=0).results
                    top_other = unrelated[0].score if unrelated else 0.0
                    for t in thresholds:
                        kept = [r for r in ranked if r.score >= t]
                        for name, value in eval_locomo.score(kept, spans, texts).items():
                            totals[t].setdefault(name, []).append(value)
                        totals[t].setdefault("fp_rate", []).append(float(top_other >= t))
        names = ["R@1", "R@6", "MRR@10", "visible@6", "answered@own", "fp_rate", "out_tokens"]
        print(f"{'min_score':>9} " + " ".join(f"{n:>12}" for n in names))
        for t in thresholds:
            print(f"{t:>9.2f} " + " ".join(f"{statistics.fmean(totals[t].get(n, [0])):>12.3f}" for n in names))

        weights, platt, keyword = fitted(list(data))
        print("\nfitted on all five conversations (for memfs/index/scoring.py):")
        print(f"RK, RU, RC = {', '.join(f'{v:.2f}' for v in weights)}")
        print(f"A, B = {', '.join(f'{v:.2f}' for v in platt)}")
        print(f"K0, K1 = {', '.join(f'{v:.2f}' for v in keyword)}")
        related = sum(len(r) for n in data for r, _, _ in data[n])
        own = sum(len(o) for n in data for _, o, _ in data[n])
        print(f"({related} related units, {own} other units of the same workspaces, "
              f"{NEGATIVES_PER_QUESTION} unrelated units per question)")
        for memory in memories.values():
            memory.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
