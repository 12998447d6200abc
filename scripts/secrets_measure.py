#!/usr/bin/env python3
"""Precision and recall of memfs.index.text.secrets on the generated corpus (tests/secrets_corpus.py).

    PYTHONPATH=. python scripts/secrets_measure.py [-n 50]

Recall: planted fake credentials whose value no longer appears after masking, per kind.
Precision: findings that fall on a planted credential, over all findings (those in the ordinary
corpus, and any in the planted texts outside the credential, are false positives).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from secrets_corpus import negatives, positives

from memfs.index.text import secrets


def measure(n: int) -> dict:
    pos = positives(n)
    neg = negatives()
    per_kind: Counter = Counter()
    found_kind: Counter = Counter()
    tp = fp = 0
    false: list[str] = []
    t0 = time.perf_counter()
    for text, secret, kind in pos:
        per_kind[kind] += 1
        masked = secrets.mask(text)
        at = text.index(secret)
        for f in secrets.find(text):
            if f.start < at + len(secret) and at < f.end:
                tp += 1
            else:
                fp += 1
                false.append(f"{f.rule}: {text[f.start:f.end][:60]!r} in {text[:60]!r}")
        # Found when what is left of the secret is at most the head the rule keeps on purpose.
        found_kind[kind] += secret not in masked and secret[12:] not in masked
    for text in neg:
        for f in secrets.find(text):
            fp += 1
            false.append(f"{f.rule}: {text[f.start:f.end][:60]!r} in {text[:60]!r}")
    took = time.perf_counter() - t0
    chars = sum(len(t) for t, _, _ in pos) + sum(len(t) for t in neg)
    return {"positives": len(pos), "negatives": len(neg), "recall": sum(found_kind.values()) / len(pos),
            "precision": tp / max(tp + fp, 1), "tp": tp, "fp": fp, "per_kind": {k: (found_kind[k], per_kind[k])
                                                                                for k in per_kind},
            "false": false, "chars_per_s": chars / took}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=50, help="fake credentials per kind")
    a = ap.parse_args()
    r = measure(a.n)
    for kind, (found, total) in r["per_kind"].items():
        print(f"  {kind:24s} {found}/{total}")
    for line in r["false"]:
        print("  FALSE POSITIVE", line)
    print(f"secrets: {r['positives']} planted ({len(r['per_kind'])} kinds), {r['negatives']} ordinary texts: "
          f"recall={r['recall']:.3f} precision={r['precision']:.3f} (tp={r['tp']} fp={r['fp']}) "
          f"{r['chars_per_s'] / 1e6:.1f} M chars/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
