#!/usr/bin/env python3
"""Moving an index (``memfs index --to postgres|sqlite``) against indexing the same files anew with
the model, on the LoCoMo dev set's real text and the real local model, with a throwaway PostgreSQL
(tests/pg.py) unless MEMFS_PG_DSN names a server.

    python scripts/bench_move.py [--chunks 10000]

1. Re-index: one copy of the dev set (its Markdown daily logs and sync JSONL) indexed from the
   files with an empty embedding cache, the model in this process: seconds and chunks/s.
2. A workspace of at least --chunks chunks: the dev set's files, copied under new names (copies
   take their vectors from the cache: only the first copy is embedded), indexed in SQLite.
3. That index moved to its PostgreSQL tenant, and back to a SQLite file: seconds each, and what
   was moved (chunks, units, vectors, cache entries).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from pg import scratch_database, throwaway_server  # noqa: E402

from memfs.config import load_config  # noqa: E402
from memfs.index.storage.postgres import roles, schema  # noqa: E402
from memfs.indexmove import move_index  # noqa: E402
from memfs.memory import Memory  # noqa: E402
from memfs.workspaceid import workspace_id  # noqa: E402

DEV = ROOT.parent / "shared" / "bench" / "locomo-dev"


def copy_dev(dev: Path, ws: Path, copies: int) -> None:
    """The dev set's daily logs and sync files; Markdown copies after the first under memory/copy-N/."""
    for conv in sorted(p for p in dev.iterdir() if p.is_dir() and p.name.startswith("conv-")):
        for path in sorted((conv / "memory").glob("*.md")):
            for n in range(copies):
                folder = ws / "memory" / (f"{conv.name}" if n == 0 else f"copy-{n}/{conv.name}")
                folder.mkdir(parents=True, exist_ok=True)
                shutil.copy(path, folder / path.name)
        sync = ws / "clawgpt-memory"
        sync.mkdir(parents=True, exist_ok=True)
        for path in sorted((conv / "clawgpt-memory").glob("*.jsonl")):
            target = sync / path.name
            with open(target, "a") as out:
                out.write(path.read_text())


def config(ws: Path, state: Path, **settings: str):
    overrides = [("state_dir", str(state)), ("embedding.service", "false")]
    overrides += [(k.replace("__", "."), v) for k, v in settings.items()]
    return load_config(workspace=ws, agent="main", env={}, overrides=overrides)


def index(ws: Path, state: Path) -> tuple[float, dict[str, int]]:
    memory = Memory(config(ws, state))
    try:
        began = time.perf_counter()
        memory.index()
        return time.perf_counter() - began, memory.store.counts()
    finally:
        memory.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--chunks", type=int, default=10_000)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="memfs-bench-move-"))
    try:
        one = root / "one"
        copy_dev(args.dev, one, 1)
        seconds, counts = index(one, root / "state-one")
        per_second = counts["chunks"] / seconds
        print(f"re-index from files with the model (empty cache): {counts['chunks']} chunks, {counts['units']} units "
              f"in {seconds:.1f} s ({per_second:.1f} chunks/s; 10k chunks would take ~{10_000 / per_second:.0f} s)",
              flush=True)
        copies = max(1, -(-args.chunks // counts["chunks"]) + 1)
        big = root / "big"
        while True:
            shutil.rmtree(big, ignore_errors=True)
            copy_dev(args.dev, big, copies)
            seconds, counts = index(big, root / "state")
            if counts["chunks"] >= args.chunks:
                break
            copies += 1
        print(f"workspace: {counts['files']} files, {counts['chunks']} chunks, {counts['units']} units "
              f"(indexed in {seconds:.1f} s, copies' vectors from the cache)", flush=True)
        with throwaway_server() as server, scratch_database(server.dsn, "memfs_move") as admin:
            schema.init(admin)
            dsn = roles.grant_login(admin, workspace_id(big), "main").dsn
            cfg = config(big, root / "state", index__backend="postgres", index__dsn=dsn)
            for to in ("postgres", "sqlite", "postgres"):
                moved, source, target = move_index(cfg, to)
                print(f"move to {to}: {moved.seconds:.1f} s ({moved.chunks / moved.seconds:.0f} chunks/s): "
                      f"{moved.files} files, {moved.chunks} chunks, {moved.units} units, {moved.vectors} vectors, "
                      f"{moved.cached} cache entries", flush=True)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
