#!/usr/bin/env python3
"""Measure what the snippet-join constants of memfs/index/search/hybrid.py are percentiles of, on the
LoCoMo dev set, for the reading mode the settings give:

    python scripts/merge_floor.py ../shared/bench/locomo-dev [--source md|jsonl] [--set key=value ...]

- own evidence of unrelated passages: every question of a conversation asked of the next
  conversation's workspace (26->30->41->42->43->26), the own evidence (search.score_units'
  growable score: the unit's own words and vector, not its chunk's) of every candidate unit there;
  MERGE_FLOOR is its 95th percentile.  The same of the best unit's neighbours there (the units a
  false match's snippet could grow by) is printed beside it.
- coherence: the cosine of two units of different conversations (other people, other lives), and
  of neighbouring units of one chunk; MERGE_COHERENCE is the first's 95th percentile for units
  read whole, and the share of neighbouring units that reach it is printed.  Units read late are
  pooled in one reading of their chunk, so neighbours read alike whatever they say (median .82
  against .59): coherence does not grow their snippets (search.py says why).  --share S prints
  the cosine that a share S of neighbouring units reaches.

Percentiles 50/90/95/99 are printed for each.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import eval_locomo  # noqa: E402  (same folder)

from memfs.config import parse_override  # noqa: E402
from memfs.index.search.hybrid import Scope, SearchOptions, score_units  # noqa: E402
from memfs.index.search.snippets import MERGE_COHERENCE  # noqa: E402


def unit_vectors(memory) -> dict[int, list[np.ndarray]]:
    """Each chunk's unit vectors in line order (twins once: the first of each span)."""
    out: dict[int, list[np.ndarray]] = {}
    ids = [int(r[0]) for r in memory.store.conn.execute("SELECT id FROM chunks ORDER BY id")]
    from memfs.index.storage.vectors import unpack_unit_vector
    seen: set[tuple[int, int, int]] = set()
    for unit in memory.store.units_of(ids):
        key = (unit.chunk_id, unit.start_line, unit.end_line)
        vector = unpack_unit_vector(unit.vector, memory.provider.dims) if unit.vector is not None else None
        if key in seen or vector is None:
            continue
        seen.add(key)
        out.setdefault(unit.chunk_id, []).append(vector / np.linalg.norm(vector))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dev", type=Path)
    parser.add_argument("--source", choices=("md", "jsonl"), default="md")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "memfs-eval-state")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--share", type=float, help="also print the neighbours' cosine this share of them reaches")
    args = parser.parse_args()
    overrides = [parse_override(o) for o in args.overrides]
    folders = [p for p in sorted(args.dev.iterdir()) if p.is_dir() and p.name.startswith("conv-")]
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as tmp:
        memories = [eval_locomo.open_memory(eval_locomo.make_workspace(c, Path(tmp), args.source), c.name,
                                            args.cache, overrides) for c in folders]
        for memory in memories:
            memory.embed_pending()
        evidence: list[float] = []
        beside: list[float] = []  # the same, of the best unit's neighbours in its chunk
        for position, conv in enumerate(folders):
            other = memories[(position + 1) % len(folders)]
            questions, _ = eval_locomo.load_conv(conv)
            for q in questions:
                vector = other.provider.embed([q["question"]])[0]
                found = score_units(other.store, q["question"], vector, True, None, Scope(SearchOptions()))
                evidence.extend(found.scores.values())
                if found.ranked:
                    best = found.ranked[0]
                    order = found.units[best.chunk.id]
                    at = next(i for i, u in enumerate(order)
                              if (u.start_line, u.end_line) == (best.unit.start_line, best.unit.end_line))
                    beside.extend(found.scores[u.id] for u in order[max(0, at - 1) : at + 2] if u is not order[at])
        vectors = [unit_vectors(m) for m in memories]
        adjacent = [float(a @ b) for per in vectors for units in per.values() for a, b in zip(units, units[1:])]
        flat = [np.array([v for units in per.values() for v in units]) for per in vectors]
        across: list[float] = []
        for position, mine in enumerate(flat):
            theirs = flat[(position + 1) % len(flat)]
            a = mine[rng.integers(0, len(mine), 5000)]
            b = theirs[rng.integers(0, len(theirs), 5000)]
            across.extend((a * b).sum(axis=1).tolist())
        for name, values in (("own evidence, unrelated workspace", evidence),
                             ("own evidence, neighbours of its best unit", beside),
                             ("cosine, units of two conversations", across),
                             ("cosine, neighbouring units of a chunk", adjacent)):
            p = np.percentile(values, [50, 90, 95, 99])
            print(f"{name} (n={len(values)}): 50th {p[0]:.3f}  90th {p[1]:.3f}  95th {p[2]:.3f}  99th {p[3]:.3f}")
        share = float(np.mean(np.array(adjacent) >= MERGE_COHERENCE))
        print(f"share of neighbouring units at or above MERGE_COHERENCE ({MERGE_COHERENCE}): {share:.3f}")
        if args.share is not None:
            print(f"cosine of neighbouring units that a share {args.share:.3f} of them reaches: "
                  f"{np.quantile(adjacent, 1 - args.share):.3f}")
        for memory in memories:
            memory.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
