#!/usr/bin/env python3
"""What memfs keeps on disk per byte of text (issue #45): the index, the embedding cache and the
history of a fully embedded workspace, file by file and table by table (SQLite's ``dbstat``).

    python scripts/bench_disk.py [--corpus dev|mix|import ...] [--mix-mb 3] [--import-mb 30]
                                 [--state DIR] [--keep] [--json OUT]

Corpora (each made from real text, embedded with the real default local model):

- ``dev``: the LoCoMo dev conversations (../shared/bench/locomo-dev), each its own workspace with
  both copies of its turns (daily logs ``memory/*.md`` and ClawGPT sync ``clawgpt-memory/*.jsonl``)
  and its own agent (so its own embedding cache file), as scripts/eval_locomo.py makes them;
  figures are given per conversation and summed.
- ``mix``: a newcomer's workspace: daily logs, a MEMORY.md, a ClawGPT sync file and an OpenClaw
  session transcript, together about --mix-mb MB (LoCoMo dialogue, each round of it tagged so no
  text repeats: scripts/bigwrites.py).
- ``import``: a sync file and a session transcript, --import-mb MB in all (scripts/bigwrites.py),
  as scripts/bench_import.py copies in.

Each workspace is indexed through :class:`memfs.memory.Memory` (reconcile with history, then every
passage embedded) and its files measured three times: still open (WAL files as a running mount
has them), closed, and after a ``wal_checkpoint(TRUNCATE)`` of each database; then table by table.  Text bytes are the memory files' sizes.
With ``--state DIR`` the state folder (indexes and caches) is kept there for other scripts (the
recall study, scripts/bench_quant.py, reuses the dev set's caches).

For an index of schema 7 (as memfs built them before issue #45), then a prototype of smaller storage on copies of the built files, step by step (each VACUUMed):
chunk vectors as int8 + scale in a plain rowid table instead of sqlite-vec's float32 ``vec0``
(which allocates room for 1,024 vectors at a time), the embedding cache's vectors as int8, the
cache without the entries the index holds (the index as the cache), unit vectors at int4 (the
size only: blobs of that length).  ``--measure-only DIR``: measure (and prototype) a state folder
bench_disk.py built before, without building.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import apsw

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bigwrites  # noqa: E402

from memfs.config import load_config  # noqa: E402
from memfs.memory import Memory  # noqa: E402
from memfs.state import locate  # noqa: E402
from memfs.workspace import FileKind, classify  # noqa: E402

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo-dev"
MB = 1 << 20


# -- corpora ------------------------------------------------------------------------------------

def dev_workspaces(root: Path, dev: Path) -> list[tuple[Path, str]]:
    """(workspace, agent) per LoCoMo dev conversation, its Markdown logs and sync files both."""
    out = []
    for conv in sorted(p for p in dev.iterdir() if p.is_dir() and p.name.startswith("conv-")):
        ws = root / "dev" / conv.name
        for folder in ("memory", "clawgpt-memory"):
            shutil.copytree(conv / folder, ws / folder)
        out.append((ws, conv.name))
    return out


LONG_TERM = """# Long-term memory

## About the user
- Prefers short answers with the command first, explanation after.
- Works in Europe/Berlin; usually online 08:00-18:00, rarely on weekends.
- Main projects: a Rust CLI for photo archives (`shoebox`), a Django site for a climbing club.
- Uses fish shell, neovim, and keeps dotfiles in ~/src/dotfiles (stow).

## Decisions
- 2024-02-11: shoebox stores thumbnails as WebP at quality 80; JPEG XL was slower to decode.
- 2024-03-02: the club site moved from Heroku to a Hetzner VM (CX22) with Caddy in front.
- 2024-04-19: database backups run nightly at 03:15 with restic to Backblaze B2, kept 30 days.

## People
- Mara: club treasurer, wants the membership export as CSV with semicolons.
- Jonas: co-maintainer of shoebox, reviews on Tuesdays.
"""


def mix_workspace(root: Path, total_mb: float) -> list[tuple[Path, str]]:
    """A newcomer's workspace of about ``total_mb`` MB of text: a third daily logs (split into
    day files), a third a sync file, a third a session transcript, and MEMORY.md."""
    ws = root / "mix"
    part = int(total_mb * MB / 3)
    (ws / "memory").mkdir(parents=True)
    (ws / "MEMORY.md").write_text(LONG_TERM)
    log = bigwrites.daily_log(part).decode()
    # the concatenated logs split back into days at their "# YYYY-MM-DD" headings (a day per file)
    days: dict[str, list[str]] = defaultdict(list)
    day = "2023-01-01"
    for block in log.split("\n\n# "):
        head = block.lstrip("# ").split("\n", 1)[0]
        day = head[:10] if len(head) >= 10 and head[4] == "-" else day
        days[day].append(block if block.startswith("# ") else "# " + block)
    for n, (day, blocks) in enumerate(sorted(days.items())):
        (ws / "memory" / f"{day}.md").write_text("\n\n".join(blocks).rstrip("\n") + "\n")
    (ws / "clawgpt-memory").mkdir()
    (ws / "clawgpt-memory" / "2023-05-08.jsonl").write_bytes(bigwrites.sync_lines(part, tag="mix", distinct=True))
    (ws / "sessions").mkdir()
    (ws / "sessions" / "newcomer.jsonl").write_bytes(bigwrites.transcript(part, distinct=True))
    return [(ws, "main")]


def import_workspace(root: Path, mb: float) -> list[tuple[Path, str]]:
    """A sync file and a session transcript of ``mb / 2`` MB each."""
    ws = root / "import"
    half = int(mb * MB / 2)
    (ws / "clawgpt-memory").mkdir(parents=True)
    (ws / "clawgpt-memory" / "2023-05-08.jsonl").write_bytes(bigwrites.sync_lines(half, tag="imp", distinct=True))
    (ws / "sessions").mkdir()
    (ws / "sessions" / "import.jsonl").write_bytes(bigwrites.transcript(half, distinct=True))
    return [(ws, "main")]


def text_bytes(ws: Path) -> int:
    total = 0
    for path in ws.rglob("*"):
        if path.is_file() and classify(path.relative_to(ws).as_posix()) is not FileKind.OTHER:
            total += path.stat().st_size
    return total


# -- building -----------------------------------------------------------------------------------

def build(ws: Path, agent: str, state: Path, overrides: list[tuple[str, str]]) -> dict:
    """Index and fully embed ``ws``: seconds it took, the passages left waiting (0), and the
    files' sizes while it is still open (as a running mount leaves them: WAL files and all;
    the last connection's close checkpoints and removes them)."""
    cfg = load_config(workspace=ws, agent=agent, env={},
                      overrides=[("state_dir", str(state)), ("index.max_file_mb", "100"), *overrides])
    began = time.perf_counter()
    memory = Memory(cfg)
    try:
        memory.reconcile()
        rounds = 0
        while memory.pending and rounds < 1000:
            memory.embed_pending()
            rounds += 1
        left = memory.pending
        seconds = time.perf_counter() - began
        open_sizes = sizes(files_of(ws, agent, state))
    finally:
        memory.close()
    return {"seconds": seconds, "pending": left, "files_open": open_sizes}


# -- measuring ----------------------------------------------------------------------------------

def files_of(ws: Path, agent: str, state: Path) -> dict[str, Path]:
    cfg = load_config(workspace=ws, agent=agent, env={}, overrides=[("state_dir", str(state))])
    paths = locate(cfg)
    return {"index": paths.index, "cache": paths.cache, "history": paths.history}


def sizes(files: dict[str, Path]) -> dict[str, int]:
    out = {}
    for name, path in files.items():
        for suffix in ("", "-wal", "-shm"):
            p = Path(str(path) + suffix)
            out[name + suffix] = p.stat().st_size if p.exists() else 0
    return out


def dbstat(path: Path) -> dict[str, dict[str, int]]:
    """Each table and index of the database: pages' bytes, payload bytes, unused bytes, rows
    (cells of leaf pages)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute("SELECT name, sum(pgsize), sum(payload), sum(unused), "
                            "sum(CASE WHEN pagetype = 'leaf' THEN ncell ELSE 0 END) FROM dbstat GROUP BY name")
        return {str(r[0]): {"bytes": int(r[1]), "payload": int(r[2]), "unused": int(r[3]), "cells": int(r[4])}
                for r in rows}
    finally:
        conn.close()


def checkpoint(path: Path) -> None:
    if not path.exists():
        return
    conn = apsw.Connection(str(path))
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def columns(index: Path, cache: Path) -> dict[str, int]:
    """Bytes of the columns that matter most (what the rows hold, before b-tree overhead)."""
    conn = apsw.Connection(str(index), flags=apsw.SQLITE_OPEN_READONLY)
    out: dict[str, int] = {}
    try:
        q = {
            "chunks.text": "SELECT coalesce(sum(length(CAST(text AS BLOB))), 0) FROM chunks",
            "chunks.rows": "SELECT count(*) FROM chunks",
            "chunks.embedded": "SELECT count(*) FROM chunks WHERE embedded = 1",
            "units.rows": "SELECT count(*) FROM units",
            "units.vector": "SELECT coalesce(sum(length(vector)), 0) FROM units",
            "units.text": "SELECT coalesce(sum(length(CAST(text AS BLOB))), 0) FROM units",
            "units.context": "SELECT coalesce(sum(length(CAST(context AS BLOB))), 0) FROM units",
            "units.reading": "SELECT coalesce(sum(length(CAST(reading AS BLOB))), 0) FROM units",
            "units.hash": "SELECT coalesce(sum(length(hash)), 0) FROM units",
            "units.with_reading": "SELECT count(*) FROM units WHERE reading != ''",
        }
        for name, sql in q.items():
            out[name] = int(conn.execute(sql).fetchone()[0])
        conn.execute("ATTACH DATABASE ? AS cache", (str(cache),))
        # Schema 8's cache table (packed, hashes as bytes), else the float32 one of schema 7.
        packed = conn.execute("SELECT 1 FROM main.sqlite_master WHERE name = 'chunk_vectors'").fetchone() is not None
        table = "vector_cache" if packed else "embedding_cache"
        if conn.execute("SELECT 1 FROM cache.sqlite_master WHERE name = ?", (table,)).fetchone() is None:
            return out
        out["cache.rows"] = int(conn.execute(f"SELECT count(*) FROM cache.{table}").fetchone()[0])
        out["cache.vector"] = int(conn.execute(f"SELECT coalesce(sum(length(vector)), 0) FROM cache.{table}")
                                  .fetchone()[0])
        chunk_hashes = {r[0] for r in conn.execute("SELECT hash FROM chunks")}
        unit_hashes = {(r[0].hex() if isinstance(r[0], bytes) else r[0]) for r in conn.execute("SELECT hash FROM units")}
        kinds = {"cache.of_chunks": 0, "cache.of_units": 0, "cache.of_both": 0, "cache.other": 0}
        for (raw,) in conn.execute(f"SELECT hash FROM cache.{table}"):
            digest = raw.hex() if isinstance(raw, bytes) else raw
            c, u = digest in chunk_hashes, digest in unit_hashes
            kinds["cache.of_both" if c and u else "cache.of_chunks" if c else "cache.of_units" if u else "cache.other"] += 1
        out.update(kinds)
    finally:
        conn.close()
    return out


# Tables grouped by what they are for (shadow tables with their virtual table).
def group(name: str) -> str:
    for prefix, label in (("chunks_fts", "keyword index (chunks_fts*)"), ("private_fts", "keyword index, private"),
                          ("chunks_vec", "chunk vectors (chunks_vec*, sqlite-vec)"),
                          ("chunk_vectors", "chunk vectors (chunk_vectors, packed)"),
                          ("chunks_hash", "chunk vectors by hash (chunks_hash)"),
                          ("units_hash", "unit vectors by hash (units_hash)"),
                          ("embedding_cache", "embedding cache"), ("vector_cache", "embedding cache"),
                          ("units", "units (+ indexes)"),
                          ("chunks", "chunks (+ indexes)"), ("files", "files (+ indexes)"),
                          ("blobs", "history blobs"), ("versions", "history versions"),
                          ("sqlite_autoindex_blobs", "history blobs"), ("sqlite_autoindex_versions", "history versions")):
        if name.startswith(prefix):
            return label
    return "other (" + name + ")" if not name.startswith("sqlite_") else "sqlite schema/other"


def measure(ws: Path, agent: str, state: Path) -> dict:
    files = files_of(ws, agent, state)
    before = sizes(files)
    for path in files.values():
        checkpoint(path)
    after = sizes(files)
    stats = {name: dbstat(path) for name, path in files.items() if path.exists()}
    steps: dict[str, dict[str, int]] = {}
    if "chunks_vec" in stats.get("index", {}):  # the prototype starts from schema 7's layout
        with tempfile.TemporaryDirectory() as scratch:
            steps = prototype(files, Path(scratch))
    return {"text": text_bytes(ws), "files_closed": before, "files_checkpointed": after, "dbstat": stats,
            "columns": columns(files["index"], files["cache"]), "prototype": steps}


# -- prototype: the same rows stored smaller ------------------------------------------------------

def _int4(blob: bytes) -> bytes:
    """A unit vector as int4 codes with a float32 scale (two codes a byte): its size only."""
    import numpy as np

    x = np.frombuffer(blob, dtype=np.float32) if len(blob) % 4 == 0 and len(blob) >= 4 * 64 else None
    n = (len(x) if x is not None else len(blob) - 4)
    return bytes(4 + (n + 1) // 2)


PROTOTYPE_STEPS = (
    "as built (checkpointed)",
    "+ VACUUM",
    "+ chunk vectors int8 in a rowid table (no sqlite-vec)",
    "+ cache int8",
    "+ cache without what the index holds",
    "+ unit vectors int4 (size only)",
)


def prototype(files: dict[str, Path], scratch: Path) -> dict[str, dict[str, int]]:
    """Copies of the index and cache changed step by step (each step on top of the one before),
    bytes of each file after each step (VACUUMed, so pages are full as a fresh build's would be)."""
    from memfs.index.storage.sqlite.layout import _vec0_path
    from memfs.index.storage.vectors import pack_unit_vector

    scratch.mkdir(parents=True, exist_ok=True)
    index, cache = scratch / "index.sqlite", scratch / "cache.sqlite"
    shutil.copy(files["index"], index)
    shutil.copy(files["cache"], cache)
    history = files["history"].stat().st_size if files["history"].exists() else 0
    conn = apsw.Connection(str(index))
    conn.enable_load_extension(True)
    conn.load_extension(_vec0_path())
    conn.create_scalar_function("pack8", lambda b: pack_unit_vector(b) if b is not None else None, 1,
                                deterministic=True)
    conn.create_scalar_function("pack4", lambda b: _int4(b) if b is not None else None, 1, deterministic=True)
    conn.execute("ATTACH DATABASE ? AS cache", (str(cache),))
    # Rollback journals: a VACUUM in WAL mode writes the WAL, and the file shrinks at a checkpoint
    conn.execute("PRAGMA main.journal_mode=DELETE")
    conn.execute("PRAGMA cache.journal_mode=DELETE")
    out: dict[str, dict[str, int]] = {}

    def sizes_now(step: str) -> None:
        conn.execute("VACUUM main")
        conn.execute("VACUUM cache")
        out[step] = {"index": index.stat().st_size, "cache": cache.stat().st_size, "history": history}

    try:
        out[PROTOTYPE_STEPS[0]] = {"index": index.stat().st_size, "cache": cache.stat().st_size, "history": history}
        sizes_now(PROTOTYPE_STEPS[1])
        if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'chunks_vec'").fetchone():
            # The alternative kept aside: the same int8 codes in sqlite-vec's int8[N] column (its
            # cosine is blind to a vector's scale, so the codes alone do), measured, then dropped.
            dims = int(conn.execute("SELECT length(embedding) / 4 FROM chunks_vec LIMIT 1").fetchone()[0])
            with conn:
                conn.execute(f"CREATE VIRTUAL TABLE chunks_vec8 USING vec0(private integer partition key, "
                             f"embedding int8[{dims}] distance_metric=cosine)")
                conn.execute("INSERT INTO chunks_vec8(rowid, private, embedding) "
                             "SELECT rowid, private, vec_int8(substr(pack8(embedding), 5)) FROM chunks_vec")
            out["(aside) chunk vectors as sqlite-vec int8[N]: its tables' bytes"] = {"index": int(conn.execute(
                "SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'chunks_vec8%' OR name LIKE "
                "'sqlite_autoindex_chunks_vec8%'").fetchone()[0]), "cache": 0, "history": 0}
            out["(aside) today's sqlite-vec float32 tables' bytes"] = {"index": int(conn.execute(
                "SELECT sum(pgsize) FROM dbstat WHERE (name LIKE 'chunks_vec%' OR name LIKE "
                "'sqlite_autoindex_chunks_vec%') AND name NOT LIKE '%vec8%'").fetchone()[0]), "cache": 0, "history": 0}
            with conn:
                conn.execute("DROP TABLE chunks_vec8")
            with conn:
                conn.execute("CREATE TABLE chunk_vectors(id INTEGER PRIMARY KEY, private INTEGER NOT NULL, "
                             "vector BLOB NOT NULL)")
                conn.execute("INSERT INTO chunk_vectors SELECT rowid, private, pack8(embedding) FROM chunks_vec")
                conn.execute("DROP TABLE chunks_vec")
        sizes_now(PROTOTYPE_STEPS[2])
        with conn:
            conn.execute("UPDATE cache.embedding_cache SET vector = pack8(vector)")
        sizes_now(PROTOTYPE_STEPS[3])
        with conn:
            conn.execute("DELETE FROM cache.embedding_cache WHERE hash IN (SELECT hash FROM main.chunks) OR hash IN "
                         "(SELECT CASE WHEN typeof(hash) = 'blob' THEN lower(hex(hash)) ELSE hash END FROM main.units)")
        sizes_now(PROTOTYPE_STEPS[4])
        with conn:
            conn.execute("UPDATE units SET vector = pack4(vector) WHERE vector IS NOT NULL")
        sizes_now(PROTOTYPE_STEPS[5])
    finally:
        conn.close()
    return out


# -- report -------------------------------------------------------------------------------------

def add(into: dict, more: dict) -> None:
    for key, value in more.items():
        if isinstance(value, dict):
            add(into.setdefault(key, {}), value)
        else:
            into[key] = into.get(key, 0) + value


def report(name: str, m: dict, built: dict) -> None:
    text = m["text"]
    print(f"\n== {name}: {text / 1e6:.3f} MB of text; built in {built['seconds']:.0f} s "
          f"({built['pending']} passages left waiting)")
    print(f"{'file':<16} {'open (mount)':>14} {'x text':>8} {'closed':>12} {'x text':>8} {'checkpointed':>14} {'x text':>8}")
    totals = [0, 0, 0]
    for key in m["files_closed"]:
        row = (built["files_open"][key], m["files_closed"][key], m["files_checkpointed"][key])
        totals = [t + v for t, v in zip(totals, row)]
        if any(row):
            print(f"{key:<16} " + " ".join(f"{v / 1e6:>12.2f}MB {v / text:>8.2f}" for v in row))
    print(f"{'all':<16} " + " ".join(f"{v / 1e6:>12.2f}MB {v / text:>8.2f}" for v in totals))
    print(f"\n{'table / index':<44} {'bytes':>12} {'x text':>7} {'payload':>12} {'unused':>10} {'cells':>8}")
    groups: dict[str, int] = defaultdict(int)
    for db, tables in m["dbstat"].items():
        for table, s in sorted(tables.items(), key=lambda kv: -kv[1]["bytes"]):
            groups[f"{db}: {group(table)}"] += s["bytes"]
            if s["bytes"] >= 0.002 * text:
                print(f"{db + ': ' + table:<44} {s['bytes']:>12,} {s['bytes'] / text:>7.3f} {s['payload']:>12,} "
                      f"{s['unused']:>10,} {s['cells']:>8,}")
    print(f"\n{'by concern':<58} {'bytes':>12} {'x text':>7}")
    for label, b in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"{label:<58} {b:>12,} {b / text:>7.3f}")
    c = m["columns"]
    print("\ncolumns: " + ", ".join(f"{k} {v:,}" for k, v in c.items()))
    if m.get("prototype"):
        print(f"\nprototype (each step on top of those above; VACUUMed): bytes, x text")
        print(f"{'step':<58} {'index':>12} {'cache':>12} {'history':>10} {'all':>12} {'x text':>7}")
        for step, f in m["prototype"].items():
            total = sum(f.values())
            print(f"{step:<58} {f['index']:>12,} {f['cache']:>12,} {f['history']:>10,} {total:>12,} {total / text:>7.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", action="append", choices=("dev", "mix", "import"), default=[])
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--mix-mb", type=float, default=3.0)
    parser.add_argument("--import-mb", type=float, default=30.0, help="in all (half sync, half transcript)")
    parser.add_argument("--state", type=Path, help="keep the state folder (and workspaces) here")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE")
    parser.add_argument("--json", type=Path, help="also write every figure here")
    parser.add_argument("--measure-only", action="store_true",
                        help="the workspaces and state under --state are built already: measure them")
    args = parser.parse_args()
    corpora = args.corpus or ["dev"]
    overrides = [tuple(o.split("=", 1)) for o in args.overrides]
    root = args.state or Path(tempfile.mkdtemp(prefix="memfs-disk-"))
    root.mkdir(parents=True, exist_ok=True)
    results: dict[str, dict] = {}
    try:
        for corpus in corpora:
            state = root / f"state-{corpus}"
            if args.measure_only:
                found = root / "ws" / corpus
                spaces = ([(ws, ws.name) for ws in sorted(found.iterdir())] if corpus == "dev" else [(found, "main")])
            elif corpus == "dev":
                spaces = dev_workspaces(root / "ws", args.dev)
            elif corpus == "mix":
                spaces = mix_workspace(root / "ws", args.mix_mb)
            else:
                spaces = import_workspace(root / "ws", args.import_mb)
            total: dict = {}
            built_total = {"seconds": 0.0, "pending": 0}
            for ws, agent in spaces:
                built = ({"seconds": 0.0, "pending": 0, "files_open": sizes(files_of(ws, agent, state))}
                         if args.measure_only else build(ws, agent, state, overrides))
                m = measure(ws, agent, state)
                if len(spaces) > 1:
                    report(f"{corpus} {agent}", m, built)
                add(total, m)
                add(built_total, built)
                results[f"{corpus}/{agent}"] = {"built": built, **m}
            report(f"{corpus} (all)" if len(spaces) > 1 else corpus, total, built_total)
            results[corpus] = {"built": built_total, **total}
    finally:
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        if not args.state and not args.measure_only:
            shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
