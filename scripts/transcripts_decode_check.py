#!/usr/bin/env python3
"""How well memfs.index.text.transcripts decodes real sessions: the transcripts-dev set's files, each read
by content (no runtime given), and every question's evidence looked for in the decoded text.

    PYTHONPATH=. python scripts/transcripts_decode_check.py [--bench ../shared/bench/transcripts-dev]

Per file: messages by kind, what was skipped by type, bytes of text kept against the file's
size, parse time and MB/s.  Then the key figure: how many questions have an evidence string
found in one decoded message of their file, normalised as the bench's measure.py does (an
evidence set counts as covered when every one of its strings is found; "any" is printed too).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from memfs.index.text.transcripts import read_sessions


def norm(s: str) -> str:
    """measure.py's normalisation: JSON escapes, backticks, asterisks, whitespace, case."""
    s = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m.group(1), 16)), s)
    s = s.replace("\\n", " ").replace("\\t", " ").replace('\\"', '"').replace("\\\\", "\\")
    s = s.replace("`", "").replace("*", "")
    return re.sub(r"\s+", " ", s).strip().lower()


def main() -> int:
    ap = argparse.ArgumentParser()
    default = Path(__file__).resolve().parent.parent.parent / "shared/bench/transcripts-dev"
    ap.add_argument("--bench", type=Path, default=default if default.exists() else Path("/work/shared/bench/transcripts-dev"))
    ap.add_argument("--show-misses", action="store_true")
    a = ap.parse_args()
    raw = sorted(p for p in (a.bench / "raw").rglob("*") if p.is_file())
    decoded: dict[str, list[str]] = {}
    total_bytes = total_time = 0.0
    for path in raw:
        rel = str(path.relative_to(a.bench))
        size = path.stat().st_size
        t0 = time.perf_counter()
        sessions = list(read_sessions(path))
        took = time.perf_counter() - t0
        total_bytes += size
        total_time += took
        kinds: Counter = Counter()
        skipped: Counter = Counter()
        kept = bad = 0
        partial = False
        texts: list[str] = []
        for s in sessions:
            kinds.update(m.kind for m in s.messages)
            skipped.update(s.stats.skipped)
            bad += s.stats.bad_lines
            partial |= s.stats.partial_tail
            kept += sum(len(m.text.encode()) for m in s.messages)
            texts += [norm(m.text) for m in s.messages]
        decoded[rel] = texts
        s0 = sessions[0] if sessions else None
        print(f"{rel}  [{s0.runtime if s0 else '?'}] {size / 1e6:.2f} MB, {took * 1000:.0f} ms "
              f"({size / 1e6 / max(took, 1e-9):.0f} MB/s)")
        if s0:
            print(f"  title: {s0.title!r}  project: {s0.project!r}  started: {s0.started}")
        print(f"  messages: {sum(kinds.values())} {dict(kinds)}")
        print(f"  text kept: {kept / 1e3:.0f} kB of {size / 1e3:.0f} kB ({100 * kept / max(size, 1):.1f}%)  "
              f"bad lines: {bad}  partial tail: {partial}")
        print(f"  skipped: {dict(skipped.most_common())}")
    with open(a.bench / "questions.jsonl", encoding="utf-8") as fh:
        qs = [json.loads(line) for line in fh if line.strip()]
    covered_all = covered_any = 0
    misses = []
    for q in qs:
        texts = decoded.get(q["file"], [])
        found = [any(norm(e) in t for t in texts) for e in q["evidence"]]
        covered_all += all(found)
        covered_any += any(found)
        if not all(found):
            misses.append((q["file"], [e for e, f in zip(q["evidence"], found) if not f]))
    print(f"\nparse: {total_bytes / 1e6:.1f} MB in {total_time:.2f} s ({total_bytes / 1e6 / max(total_time, 1e-9):.0f} MB/s)")
    print(f"evidence sets covered: {covered_all}/{len(qs)} (every string), {covered_any}/{len(qs)} (any string)")
    for rel, evs in misses:
        print(f"  MISS {rel}: " + " | ".join(e[:90] for e in evs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
