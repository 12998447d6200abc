"""What the search benchmarks share: the LoCoMo dev set's text and questions (real turns, real
chunks, synthetic daily logs made of them, a tenant corpus for the fleet), percentiles in ms and a
median timer.  Imported by bench_search, bench_pg, bench_fleet, bench_postings, bench_pgcache,
bench_cache and bench_quant (none of which imports another's helpers)."""

from __future__ import annotations

import json
import random
import statistics
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from memfs.index.text.chunking import chunk_markdown

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo-dev"


def real_chunks(dev: Path) -> list[str]:
    texts = []
    for path in sorted(dev.glob("conv-*/memory/*.md")):
        texts += [c.text for c in chunk_markdown(path.read_text(), 400, 80)]
    return texts


def real_turns(dev: Path) -> list[tuple[str, str]]:
    """(speaker, text) of every turn of the dev set's daily logs."""
    turns = []
    for path in sorted(dev.glob("conv-*/memory/*.md")):
        speaker = ""
        for line in path.read_text().splitlines():
            if line.startswith("## "):
                speaker = line.split(" - ", 1)[-1]
            elif line.strip() and not line.startswith("#"):
                turns.append((speaker, line.strip()))
    return turns


def synthetic_log(turns: list[tuple[str, str]], pick: random.Random, count: int) -> str:
    minute = pick.randrange(8 * 60, 20 * 60)
    out = []
    for speaker, text in pick.sample(turns, count):
        minute += pick.randrange(1, 4)
        out.append(f"## {minute // 60 % 24:02d}:{minute % 60:02d} - {speaker}\n\n{text}\n")
    return "\n".join(out)


def questions(dev: Path, n: int) -> list[str]:
    qs = []
    for path in sorted(dev.glob("conv-*/qa.json")):
        qs += [q["question"] for q in json.loads(path.read_text()) if q.get("category") != 5]
    random.Random(7).shuffle(qs)
    return qs[:n]


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) * 1000


def median_ms(action: Callable[[], object], runs: int) -> float:
    """The median wall time of ``runs`` calls of ``action``, in ms."""
    times = []
    for _ in range(runs):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1000


def build_corpus(total: int, tenants: int, seed: int = 1) -> list[list[tuple[str, list]]]:
    """Per tenant: its files as (path, chunks)."""
    turns = real_turns(DEV)
    pick = random.Random(seed)
    per = total // tenants
    corpus = []
    for _ in range(tenants):
        files, written, day = [], 0, 0
        while written < per:
            chunks = chunk_markdown(synthetic_log(turns, pick, 120), 400, 80)[: per - written]
            files.append((f"memory/bench-{day:05d}.md", chunks))
            written += len(chunks)
            day += 1
        corpus.append(files)
    return corpus
