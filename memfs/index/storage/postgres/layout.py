"""What every part of the PostgreSQL store shares: the columns its queries read, the statements of
the tenant's cache, how a lost connection is told and retried (:func:`_offline_on_loss`), and
the rows' conversions (:mod:`memfs.index.storage.postgres.store` and its mixins)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from memfs.index.storage.interface import IndexOffline
from memfs.index.storage.postgres.connect import (
    redacted,
)
from memfs.index.storage.records import (
    JSONL_KINDS_SQL,
    StoredUnit,
)

log = logging.getLogger(__name__)

INDEX_RETRY = 600.0  # seconds before a failed HNSW build is tried again
# The files whose chunks are provisional, each with the lines those hold and whether it is JSONL
# (provisional_lines, counts); ``{scope}`` adds conditions on ``f``.  Both tables keyed by the
# tenant itself, so the planner prunes to its partitions (tests/test_pg_tenant_keyed.py).
_PROVISIONAL_LINES = (f"SELECT f.path, f.kind IN ({JSONL_KINDS_SQL}), (SELECT coalesce(sum(c.end_line - c.start_line + 1), 0) "
                      "FROM memfs.chunks c WHERE c.tenant_id = %(t)s AND c.path = f.path AND c.provisional) "
                      "FROM memfs.files f WHERE f.tenant_id = %(t)s AND starts_with(f.hash, %(p)s){scope} "
                      "ORDER BY f.indexed_at")
RETRY_S = 1.0  # after a failed reconnect, calls fail at once for this long (no connect per call)
REFUSED_RETRY_S = 30.0  # a store never opened whose server refused it: asked again this seldom


class _Unopened:
    """The connection of a store whose server has not answered yet (:meth:`PgStore._open_later`)."""

    closed = True

    def close(self) -> None:
        pass


_UNOPENED = _Unopened()
_UNIT_COLUMNS = "unit_id, chunk_id, start_line, end_line, hash, text, context, packed, reading"
# An entry of the tenant's embedding cache: (tenant, provider, model, hash, dims, vector).  A
# private one replaces what is there and makes it private (its text is in a private file now); a
# public one leaves an entry already there alone: a shared-mode login neither sees nor may change
# a private entry (ON CONFLICT DO NOTHING asks no policy about the row it meets).
_CACHE_ENTRY = "INSERT INTO memfs.tenant_embeddings(tenant_id, provider, model, hash, dims, vector, private) "
_CACHE_PRIVATE = (_CACHE_ENTRY + "VALUES (%s, %s, %s, %s, %s, %s, true) ON CONFLICT (tenant_id, provider, model, hash) "
                  "DO UPDATE SET vector = excluded.vector, dims = excluded.dims, private = true")
_CACHE_PUBLIC = _CACHE_ENTRY + "VALUES (%s, %s, %s, %s, %s, %s, false) ON CONFLICT DO NOTHING"




def _unit(row: tuple) -> StoredUnit:
    return StoredUnit(int(row[0]), int(row[1]), row[2], row[3], row[4], row[5], row[6],
                      None if row[7] is None else bytes(row[7]), row[8])


def _float32(vector: object) -> bytes:
    """A pgvector value (pgvector.Vector, or a numpy array from older adapters) as float32 bytes."""
    as_numpy = getattr(vector, "to_numpy", None)
    return np.asarray(as_numpy() if as_numpy else vector, dtype=np.float32).tobytes()


def _first(exc: BaseException) -> str:
    return str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__


def _offline_reason(store: Any, exc: BaseException) -> str:  # a PgStore
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    text = text.rsplit("failed: ", 1)[-1].replace("FATAL:  ", "").strip()
    text = text.removeprefix("index.backend = postgres: ").removeprefix(f"cannot connect to {redacted(store.dsn)}: ")
    if "password authentication failed" in text:
        # It will not answer again by itself: the login's password was rotated under the mount.
        text += " (a new password from `memfs pg grant` takes effect when this mount or daemon starts again)"
    return f"the index is unavailable: PostgreSQL at {store._where()}: {text}"


def _offline_on_loss(method: Callable) -> Callable:
    """``method`` of PgStore, raising IndexOffline when the server is lost under it."""
    @functools.wraps(method)
    def checked(self: Any, *args: object, **kwargs: object) -> object:  # self: a PgStore
        for attempt in (1, 2):
            try:
                return method(self, *args, **kwargs)
            except IndexOffline:
                if attempt == 2 or self._depth or self._retry_at:
                    raise
            except Exception as exc:
                offline = self._lost_now(exc)
                if offline is None:
                    raise
                if attempt == 2 or self._depth or not self._conn.closed:
                    raise offline from None
            # The connection was lost under this call, outside any transaction of a caller's: once
            # more on a new one (a restarted server answers it).  Each method is one statement or
            # one transaction, rolled back whole when the connection went, so it may run again.
        raise AssertionError("unreachable")
    return checked


def _scoped(where: str) -> str:
    """A condition of memfs.index.search.hybrid.Scope (``?`` placeholders) in psycopg's style."""
    return where.replace("%", "%%").replace("?", "%s")
