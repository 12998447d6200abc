#!/usr/bin/env python3
"""What the fleet saves by sharing embeddings on PostgreSQL: how many texts each tenant's model
had to read to index the same workspace text, tenant after tenant.

    python scripts/bench_pgcache.py [--conv conv-26] [--days 10]

Each tenant indexes a workspace made of the template and ``--days`` real LoCoMo daily logs of one
conversation (the dev set scripts/bench_search.py reads), through memfs itself (``Memory.index``,
its own login, the local model in this process), on a throwaway PostgreSQL (tests/pg.py) or
MEMFS_PG_DSN's.  In order:

1. agent ``a1`` of workspace W;
2. agent ``a2`` of the same workspace W (the same files: the texts two agents of one workspace share);
3. agent ``main`` of another workspace V holding copies of the same files;
4. ``a1`` again after ``memfs index --rebuild`` (its own cache, which every version keeps).

For each: the texts the model was asked to embed (every text of every call, late-chunked spans
counted by their text), the seconds the index took, and the tenant's own cache entries.  Run it
with the memfs to measure first on PYTHONPATH: the same script measures a memfs before schema v6
(one cache shared by every tenant) and after (each tenant's own).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

import psycopg  # noqa: E402
from benchdata import DEV  # noqa: E402
from pg import throwaway_server  # noqa: E402

from memfs.config import load_config  # noqa: E402
from memfs.index.embedding.choice import make_provider  # noqa: E402
from memfs.index.storage.postgres import roles, schema  # noqa: E402
from memfs.memory import Memory  # noqa: E402
from memfs.workspace import init_workspace  # noqa: E402
from memfs.workspaceid import workspace_id  # noqa: E402


class Counting:
    """A provider that counts the texts it is given and hands them to the real one."""

    def __init__(self, real: object) -> None:
        self.real = real
        self.texts = 0

    def __getattr__(self, name: str) -> object:
        return getattr(self.real, name)

    def embed(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return self.real.embed(texts)  # type: ignore[attr-defined]

    def embed_spans(self, texts: list[str], spans: list) -> tuple[np.ndarray, np.ndarray]:
        self.texts += len(texts)
        return self.real.embed_spans(texts, spans)  # type: ignore[attr-defined]


def make_workspace(ws: Path, days: list[Path]) -> None:
    init_workspace(ws)
    (ws / "memory").mkdir(exist_ok=True)
    for day in days:
        shutil.copy(day, ws / "memory" / day.name)


def index_as(admin: str, ws: Path, agent: str, state: Path, real: object, rebuild: bool = False) -> tuple[int, float, int]:
    """(texts embedded, seconds, the tenant's cache entries as its status counts them)."""
    login = roles.grant_login(admin, workspace_id(ws), agent)
    cfg = load_config(workspace=ws, agent=agent, env={}, overrides=[
        ("state_dir", str(state)), ("index.backend", "postgres"), ("index.dsn", login.dsn),
        ("embedding.service", "false")])
    counting = Counting(real)
    memory = Memory(cfg, provider=counting)  # type: ignore[arg-type]
    try:
        began = time.perf_counter()
        memory.rebuild() if rebuild else memory.index()
        seconds = time.perf_counter() - began
        counts = memory.store.counts()
        assert counts["pending"] == 0, counts
        return counting.texts, seconds, int(counts["cached_embeddings"])
    finally:
        memory.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conv", default="conv-26")
    parser.add_argument("--days", type=int, default=10)
    args = parser.parse_args()
    days = sorted((DEV / args.conv / "memory").glob("*.md"))[: args.days]
    if not days:
        print(f"no daily logs in {DEV / args.conv / 'memory'}", file=sys.stderr)
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        w, v, state = root / "w", root / "v", root / "state"
        make_workspace(w, days)
        make_workspace(v, days)
        size = sum(p.stat().st_size for p in w.rglob("*.md"))
        real = make_provider(load_config(workspace=w, env={}, overrides=[
            ("state_dir", str(state)), ("embedding.service", "false")]).embedding)
        real.embed(["warm up"])  # the model's load is no tenant's cost
        with throwaway_server() as server:
            with psycopg.connect(server.dsn, autocommit=True) as conn:
                conn.execute("CREATE DATABASE memfs_cache_bench")
            from psycopg.conninfo import make_conninfo

            admin = make_conninfo(server.dsn, dbname="memfs_cache_bench")
            try:
                _, version, _ = schema.init(admin)
                print(f"memfs schema v{version} ({'a cache per tenant' if version >= 6 else 'one cache for the fleet'});"
                      f" workspace: template + {len(days)} LoCoMo days of {args.conv}, {size / 1024:.0f} KB of Markdown;"
                      f" {real.name} {real.model} ({os.cpu_count()} cores, load {os.getloadavg()[0]:.1f})")
                runs = [("a1 of W (first)", w, "a1", False), ("a2 of W (same workspace)", w, "a2", False),
                        ("main of V (same files)", v, "main", False), ("a1 of W, rebuilt", w, "a1", True)]
                for label, ws, agent, rebuild in runs:
                    texts, seconds, cached = index_as(admin, ws, agent, state, real, rebuild)
                    print(f"  {label:28s} {texts:6d} texts embedded  {seconds:6.1f} s  {cached:6d} entries in its status")
            finally:
                from pg import drop_database

                drop_database(server.dsn, "memfs_cache_bench")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
