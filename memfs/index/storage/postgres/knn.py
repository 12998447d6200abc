"""Nearest chunks by cosine on PostgreSQL + pgvector, one tenant at a time.

``memfs.chunks.embedding`` (a ``halfvec``, float16, since schema v7) has no fixed dimension (each
tenant picks its model), so each tenant partition gets its own HNSW index on
``(embedding::halfvec(N))`` once it holds :data:`EXACT_MAX` chunks: the tenant's own store asks
for it (:func:`build_index`, through the schema's ``memfs.vector_index``, which runs as the
schema's owner since a tenant role owns nothing, and indexes the caller's own partition only);
:func:`create_index` is the same for an admin.  A query names its tenant (``tenant_id = %s``:
the planner reads that partition and its index alone) and uses the same expression, so the index
matches.

Filtered HNSW is the trap: an index scan returns ``hnsw.ef_search`` (40) candidates and the
filter (here: public rows only, or what row-level security hides) runs after, so a filter that
keeps 5% of a partition returned 2 of 20 rows.  Every query therefore runs with
``hnsw.iterative_scan = relaxed_order`` (pgvector 0.8: the scan goes on until enough rows pass),
and re-sorts what it got, since relaxed order may hand rows back slightly out of order.  A small
tenant is scanned exactly instead (``enable_indexscan`` off for the statement): below
:data:`EXACT_MAX` vectors a sequential scan of the partition is as fast and never misses.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

# Below this many vectors in a tenant, an exact scan.  Not yet measured well: at 500 and 1,000
# vectors of 384 dimensions (scripts/bench_pg.py) exact and HNSW took the same time within the
# noise of a shared machine; the crossover lies above, to be measured with larger tenants.
EXACT_MAX = 3_000
EF_SEARCH = 100  # candidates per HNSW round; recall 0.99 at k=50 in the benchmark
MAX_SCAN_TUPLES = 20_000  # how far an iterative scan may go before it stops (pgvector's default)


def _literal(vector: Sequence[float]) -> str:
    return "[" + ",".join(repr(float(x)) for x in vector) + "]"


def create_index(conn: psycopg.Connection, tenant_id: int, dims: int) -> str:
    """The HNSW index of a tenant's chunk vectors of ``dims`` dimensions (idempotent); its name.
    Run by the owner of the schema (``memfs pg init``'s role)."""
    tenant, dims = int(tenant_id), int(dims)
    name = index_name(tenant, dims)
    conn.execute(f"CREATE INDEX IF NOT EXISTS {name} ON memfs.chunks_t{tenant} "
                 f"USING hnsw ((embedding::halfvec({dims})) halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)")
    return name


def index_name(tenant_id: int, dims: int) -> str:
    return f"chunks_t{int(tenant_id)}_hnsw_{int(dims)}"


def has_index(conn: psycopg.Connection, tenant_id: int, dims: int) -> bool:
    """Whether the tenant's partition has its HNSW index for ``dims`` (the catalog is readable by
    every role)."""
    return conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"memfs.{index_name(tenant_id, dims)}",)).fetchone()[0]


def stale_indexes(conn: psycopg.Connection, tenant_id: int, dims: int) -> list[str]:
    """The partition's HNSW indexes for other dimensions than ``dims`` (an earlier model's)."""
    prefix = f"chunks_t{int(tenant_id)}_hnsw_"
    rows = conn.execute("SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'memfs'::regnamespace "
                        "AND c.relkind = 'i' AND starts_with(c.relname, %s) AND c.relname <> %s",
                        (prefix, index_name(tenant_id, dims))).fetchall()
    return [str(r[0]) for r in rows]


def build_index(conn: psycopg.Connection, dims: int, build: bool = True) -> str | None:
    """As a tenant's login: drop its partition's HNSW indexes of other dimensions and (with
    ``build``) make the one of ``dims``; its name.  Outside any transaction of the caller's: the
    build holds a lock on the partition until it commits."""
    row = conn.execute("SELECT memfs.vector_index(%s, %s)", (int(dims), build)).fetchone()
    return None if row[0] is None else str(row[0])


def tenant_vectors(conn: psycopg.Connection, tenant_id: int) -> int:
    """How many chunks the tenant has (those this role may see), from its statistics row."""
    row = conn.execute("SELECT coalesce(sum(chunks), 0) FROM memfs.corpus_stats WHERE tenant_id = %s::bigint",
                       (int(tenant_id),)).fetchone()
    return int(row[0])


def vector_candidates(conn: psycopg.Connection, tenant_id: int, query: Sequence[float], k: int,
                      include_private: bool = True, exact: bool | None = None) -> list[tuple[int, float]]:
    """(chunk id, cosine similarity) of the tenant's nearest chunks, best first.  ``exact``:
    force a sequential scan (True) or the index (False); None decides by the tenant's size."""
    if k <= 0:
        return []
    dims = len(query)
    if exact is None:
        exact = tenant_vectors(conn, tenant_id) < EXACT_MAX
    scope = "" if include_private else " AND NOT private"
    vector = _literal(query)
    with conn.transaction():
        # One statement for all the settings (set_config(..., true) is SET LOCAL): a statement
        # costs a round trip and a planning, which added up to a fifth of a search.
        if exact:
            settings = {"enable_indexscan": "off", "enable_bitmapscan": "off"}
        else:
            settings = {"enable_seqscan": "off",  # the planner may not see the index pays off yet
                        "hnsw.iterative_scan": "relaxed_order", "hnsw.ef_search": str(max(EF_SEARCH, int(k))),
                        "hnsw.max_scan_tuples": str(MAX_SCAN_TUPLES)}
        conn.execute("SELECT " + ", ".join("set_config(%s, %s, true)" for _ in settings),
                     [part for item in settings.items() for part in item])
        rows = conn.execute(
            f"SELECT chunk_id, embedding::halfvec({dims}) <=> %s::halfvec({dims}) AS distance FROM memfs.chunks "
            f"WHERE tenant_id = %s::bigint AND embedding IS NOT NULL{scope} "
            f"ORDER BY embedding::halfvec({dims}) <=> %s::halfvec({dims}) LIMIT %s",
            (vector, int(tenant_id), vector, int(k))).fetchall()
    found = [(int(r[0]), 1.0 - float(r[1])) for r in rows]
    found.sort(key=lambda item: (-item[1], item[0]))  # relaxed order: nearly sorted, not quite
    return found
