"""The schema of the PostgreSQL index and its versioned migrations (``memfs pg init``).

Everything lives in the schema ``memfs``.  ``memfs.schema_version`` lists the migrations applied;
:func:`init` applies the missing ones in order, under an advisory lock so two inits at once apply
each migration once, and is idempotent.  What the tables hold mirrors the SQLite index
(:mod:`memfs.index.storage.sqlite.store`) per tenant:

* ``files``, ``chunks``, ``units``, ``meta`` (fingerprint, generations): the SQLite tables of the
  same names, with ``tenant_id`` first in every key.  A chunk's vector is a pgvector column
  (``chunks.embedding``, ``halfvec`` since v7) without a fixed dimension: the model, hence the
  dimension, is a tenant's choice, so each tenant partition gets its own HNSW index on
  ``(embedding::halfvec(N))`` once its fingerprint is known.  A unit's is packed bytes (v4).
* ``chunk_terms``, ``term_df``, ``corpus_stats``: what BM25 needs (``ts_rank`` is not BM25): a
  chunk's term frequencies (its length is ``chunks.length``), and per tenant the document
  frequency of each term, the number of chunks and their total length, kept apart for private and
  public chunks (``private``) so a shared search's statistics are those of public chunks alone,
  as SQLite's separate FTS tables make them.
* ``sync_messages``: sync message ids, so hosts sharing a workspace deduplicate across hosts.
* ``tenant_embeddings``: the tenant's embedding cache, (provider, model, text hash) -> vector,
  ``private`` when a private file holds the text.  Every entry is the tenant's own, guarded like
  its other rows: since v6 no cache is shared across tenants (v1's fleet-wide ``embedding_cache``
  let one tenant plant a vector another would take for its own text, and read every tenant's
  text hashes to confirm a guess of its text; see :func:`_v6`).

Every tenant table carries ``private`` and is guarded by the same four policies (see
:mod:`memfs.index.storage.postgres.roles` for who gets which tenants).  The big ones are partitioned by LIST on
``tenant_id``, one partition per tenant made when the tenant is (:func:`add_partitions`): a
tenant's queries then read its partition alone, pruned at execution from ``read_tenants()``.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memfs.index.storage.postgres.connect import PgError, check_server, connect

if TYPE_CHECKING:
    import psycopg

SCHEMA = "memfs"
LOCK_KEY = 0x6D656D6673  # "memfs": one advisory lock for migrations and role changes
# Tables of tenant data: every one has tenant_id and private, RLS forced, the same policies.
TENANT_TABLES = ("meta", "files", "chunks", "units", "chunk_terms", "term_df", "corpus_stats", "sync_messages",
                 "tenant_embeddings")
PARTITIONED = ("files", "chunks", "units", "chunk_terms", "term_df")  # one partition per tenant


@dataclass(frozen=True)
class Names:
    """The cluster-wide names of one memfs database.  Roles belong to the whole cluster, so they
    carry this database's install id: two memfs databases on one server never share a role."""

    install: str

    @property
    def tenant_group(self) -> str:
        return f"memfs_{self.install}_tenant"

    def login_role(self, tenant_id: int, shared: bool = False) -> str:
        return f"memfs_{self.install}_t{tenant_id}{'_shared' if shared else ''}"


def _visible(column: str = "tenant_id") -> str:
    return (f"{column} = ANY (memfs.read_tenants()) "
            f"AND (NOT private OR {column} = ANY (memfs.private_tenants()))")


def _writable(column: str = "tenant_id") -> str:
    return (f"{column} = ANY (memfs.write_tenants()) "
            f"AND (NOT private OR {column} = ANY (memfs.private_tenants()))")


def _v1(conn: psycopg.Connection, names: Names) -> None:
    """Tenants, access, the tenant tables and their policies, the shared embedding cache."""
    g = names.tenant_group
    conn.execute(f"""
        CREATE TABLE memfs.installation(
            one boolean PRIMARY KEY DEFAULT true CHECK (one), install text NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now());
        INSERT INTO memfs.installation(install) VALUES ('{names.install}');
        CREATE ROLE {g} NOLOGIN NOINHERIT;

        -- A tenant: one agent of one workspace (the workspace's own id, .memfs-id, not a path).
        CREATE TABLE memfs.tenants(
            tenant_id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            workspace_id uuid NOT NULL, agent text NOT NULL CHECK (agent <> ''),
            created_at timestamptz NOT NULL DEFAULT now(),
            UNIQUE (workspace_id, agent));
        -- Which login role sees which tenant: its own (private rows too, writes), its shared
        -- role (public rows, writes), readers granted explicitly (public rows, no writes).
        CREATE TABLE memfs.access(
            role name NOT NULL, tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            private boolean NOT NULL, writes boolean NOT NULL,
            PRIMARY KEY (role, tenant_id));
        CREATE INDEX access_tenant ON memfs.access(tenant_id);

        -- STABLE, so the planner evaluates them once per query and prunes partitions with them.
        CREATE FUNCTION memfs.read_tenants() RETURNS bigint[] LANGUAGE sql STABLE PARALLEL SAFE
            SET search_path = pg_catalog
            AS $$ SELECT coalesce(array_agg(tenant_id), '{{}}') FROM memfs.access WHERE role = current_user $$;
        CREATE FUNCTION memfs.write_tenants() RETURNS bigint[] LANGUAGE sql STABLE PARALLEL SAFE
            SET search_path = pg_catalog
            AS $$ SELECT coalesce(array_agg(tenant_id), '{{}}') FROM memfs.access
                  WHERE role = current_user AND writes $$;
        CREATE FUNCTION memfs.private_tenants() RETURNS bigint[] LANGUAGE sql STABLE PARALLEL SAFE
            SET search_path = pg_catalog
            AS $$ SELECT coalesce(array_agg(tenant_id), '{{}}') FROM memfs.access
                  WHERE role = current_user AND private $$;

        CREATE TABLE memfs.meta(
            tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            key text NOT NULL, value text NOT NULL, private boolean NOT NULL DEFAULT false,
            PRIMARY KEY (tenant_id, key));
        CREATE TABLE memfs.files(
            tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            path text NOT NULL, kind text NOT NULL, hash text NOT NULL,
            mtime double precision NOT NULL, size bigint NOT NULL, chunks integer NOT NULL,
            error text NOT NULL DEFAULT '', indexed_at double precision NOT NULL,
            private boolean NOT NULL DEFAULT false, warning text NOT NULL DEFAULT '',
            tail_hash text NOT NULL DEFAULT '', resume_line integer NOT NULL DEFAULT 0,
            resume_offset bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant_id, path)) PARTITION BY LIST (tenant_id);
        -- chunk_id and unit_id are the tenant's own numbers (no shared sequence: its gaps would
        -- tell a tenant how much the others write).
        CREATE TABLE memfs.chunks(
            tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            chunk_id bigint NOT NULL, path text NOT NULL, start_line integer NOT NULL,
            end_line integer NOT NULL, hash text NOT NULL, text text NOT NULL,
            embedded boolean NOT NULL DEFAULT false, private boolean NOT NULL DEFAULT false,
            jsonl boolean NOT NULL DEFAULT false, first_day text, last_day text,
            chat_id text NOT NULL DEFAULT '', chat_title text NOT NULL DEFAULT '',
            length integer NOT NULL DEFAULT 0,  -- BM25's document length, in terms
            embedding vector,
            PRIMARY KEY (tenant_id, chunk_id)) PARTITION BY LIST (tenant_id);
        CREATE INDEX chunks_path ON memfs.chunks(tenant_id, path, start_line);
        CREATE INDEX chunks_pending ON memfs.chunks(tenant_id, chunk_id) WHERE NOT embedded;
        CREATE INDEX chunks_day ON memfs.chunks(tenant_id, last_day);
        CREATE TABLE memfs.units(
            tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            unit_id bigint NOT NULL, chunk_id bigint NOT NULL, start_line integer NOT NULL,
            end_line integer NOT NULL, hash text NOT NULL, text text NOT NULL,
            context text NOT NULL DEFAULT '', reading text NOT NULL DEFAULT '', vector vector,
            private boolean NOT NULL DEFAULT false,
            PRIMARY KEY (tenant_id, unit_id)) PARTITION BY LIST (tenant_id);
        CREATE INDEX units_chunk ON memfs.units(tenant_id, chunk_id);
        CREATE INDEX units_pending ON memfs.units(tenant_id, unit_id) WHERE vector IS NULL;
        -- BM25 from stored statistics: btree equality on text is leakproof, so these indexes are
        -- used under RLS (a GIN index on a tsvector is not: @@ is not leakproof).
        CREATE TABLE memfs.chunk_terms(
            tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            chunk_id bigint NOT NULL, term text NOT NULL, tf integer NOT NULL CHECK (tf > 0),
            private boolean NOT NULL DEFAULT false,
            PRIMARY KEY (tenant_id, chunk_id, term)) PARTITION BY LIST (tenant_id);
        CREATE INDEX chunk_terms_term ON memfs.chunk_terms(tenant_id, term);
        CREATE TABLE memfs.term_df(
            tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            private boolean NOT NULL, term text NOT NULL, df integer NOT NULL CHECK (df >= 0),
            PRIMARY KEY (tenant_id, private, term)) PARTITION BY LIST (tenant_id);
        CREATE TABLE memfs.corpus_stats(
            tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            private boolean NOT NULL, chunks bigint NOT NULL DEFAULT 0, total_length bigint NOT NULL DEFAULT 0,
            PRIMARY KEY (tenant_id, private));
        CREATE TABLE memfs.sync_messages(
            tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            message_id text NOT NULL, path text NOT NULL, private boolean NOT NULL DEFAULT false,
            PRIMARY KEY (tenant_id, message_id));
        CREATE TABLE memfs.tenant_embeddings(
            tenant_id bigint NOT NULL REFERENCES memfs.tenants ON DELETE CASCADE,
            provider text NOT NULL, model text NOT NULL, hash text NOT NULL, dims integer NOT NULL,
            vector vector NOT NULL, private boolean NOT NULL DEFAULT true,
            PRIMARY KEY (tenant_id, provider, model, hash));

        -- Shared by every tenant: no text, no tenant.  Tenants add rows and read them; none may
        -- change or remove one (a changed vector would be another tenant's wrong search).
        CREATE TABLE memfs.embedding_cache(
            provider text NOT NULL, model text NOT NULL, hash text NOT NULL, dims integer NOT NULL,
            vector vector NOT NULL, created_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (provider, model, hash));

        GRANT USAGE ON SCHEMA memfs TO {g};
        GRANT EXECUTE ON FUNCTION memfs.read_tenants(), memfs.write_tenants(), memfs.private_tenants() TO {g};
        REVOKE EXECUTE ON FUNCTION memfs.read_tenants(), memfs.write_tenants(), memfs.private_tenants() FROM PUBLIC;
        GRANT SELECT ON memfs.access, memfs.tenants, memfs.installation TO {g};
        GRANT SELECT, INSERT ON memfs.embedding_cache TO {g};
        ALTER TABLE memfs.access ENABLE ROW LEVEL SECURITY;
        CREATE POLICY own ON memfs.access FOR SELECT TO {g} USING (role = current_user);
        ALTER TABLE memfs.tenants ENABLE ROW LEVEL SECURITY;
        CREATE POLICY visible ON memfs.tenants FOR SELECT TO {g} USING (tenant_id = ANY (memfs.read_tenants()));
    """)
    for table in TENANT_TABLES:
        _guard(conn, table, g)


def _guard(conn: psycopg.Connection, table: str, group: str) -> None:
    """RLS, forced (the table's owner too), and the four policies of a tenant table."""
    conn.execute(f"""
        GRANT SELECT, INSERT, UPDATE, DELETE ON memfs.{table} TO {group};
        ALTER TABLE memfs.{table} ENABLE ROW LEVEL SECURITY;
        ALTER TABLE memfs.{table} FORCE ROW LEVEL SECURITY;
        CREATE POLICY {table}_read ON memfs.{table} FOR SELECT TO {group} USING ({_visible()});
        CREATE POLICY {table}_add ON memfs.{table} FOR INSERT TO {group} WITH CHECK ({_writable()});
        CREATE POLICY {table}_change ON memfs.{table} FOR UPDATE TO {group}
            USING ({_writable()}) WITH CHECK ({_writable()});
        CREATE POLICY {table}_remove ON memfs.{table} FOR DELETE TO {group} USING ({_writable()});
    """)


def _v2(conn: psycopg.Connection, names: Names) -> None:
    """BM25 from an index alone (memfs.index.storage.postgres.keyword): a posting carries its chunk's length,
    and the key of chunk_terms is the postings order (tenant, private, term, chunk) with tf and
    length included, so a query reads one range of one index per term (index-only) and never
    the chunk rows.  Removing a chunk's postings goes by chunk id inside its tenant's partition:
    an index without the tenant is never a candidate for a keyword query, whatever the planner's
    statistics (with the old key, led by the chunk, a fresh tenant's planner scanned it all)."""
    conn.execute("""
        ALTER TABLE memfs.chunk_terms ADD COLUMN length integer NOT NULL DEFAULT 0;
        DROP INDEX memfs.chunk_terms_term;
        ALTER TABLE memfs.chunk_terms DROP CONSTRAINT chunk_terms_pkey;
        ALTER TABLE memfs.chunk_terms ADD CONSTRAINT chunk_terms_pkey
            PRIMARY KEY (tenant_id, private, term, chunk_id) INCLUDE (tf, length);
        CREATE INDEX chunk_terms_chunk ON memfs.chunk_terms(chunk_id);  -- in a tenant's partition
    """)


def _v3(conn: psycopg.Connection, names: Names) -> None:
    """The policies call the access functions once per statement, not once per row: wrapped in
    a scalar subquery they become an init plan (a 200-row insert of postings per chunk ran the
    WITH CHECK's two queries on memfs.access 200 times).  Same predicates, same pruning."""
    once_visible = ("tenant_id = ANY ((SELECT memfs.read_tenants())::bigint[]) "
                    "AND (NOT private OR tenant_id = ANY ((SELECT memfs.private_tenants())::bigint[]))")
    once_writable = ("tenant_id = ANY ((SELECT memfs.write_tenants())::bigint[]) "
                     "AND (NOT private OR tenant_id = ANY ((SELECT memfs.private_tenants())::bigint[]))")
    for table in TENANT_TABLES:
        conn.execute(f"""
            ALTER POLICY {table}_read ON memfs.{table} USING ({once_visible});
            ALTER POLICY {table}_add ON memfs.{table} WITH CHECK ({once_writable});
            ALTER POLICY {table}_change ON memfs.{table} USING ({once_writable}) WITH CHECK ({once_writable});
            ALTER POLICY {table}_remove ON memfs.{table} USING ({once_writable});
        """)


def _v4(conn: psycopg.Connection, names: Names) -> None:
    """What the index itself (memfs.index.storage.postgres.store) needs beyond v1-v3.  A unit's vector is kept
    as SQLite keeps it (``packed``: int8 and a scale, :func:`memfs.index.storage.vectors.pack_unit_vector`,
    dims + 4 bytes instead of pgvector's 4 x dims): unit vectors are never searched by the server,
    only read back with their chunk, and the same bytes give the same scores on both backends; the
    queue of units to embed is the ones without it.  ``provisional``: a big write's keyword-only
    chunks (SQLite's ``embedded = 2``), never embedded and never waiting for a vector.  Tenants may
    read the schema's version, to refuse a schema older than they need with one line."""
    conn.execute(f"GRANT SELECT ON memfs.schema_version TO {names.tenant_group}")
    conn.execute("""
        ALTER TABLE memfs.units ADD COLUMN packed bytea;
        DROP INDEX memfs.units_pending;
        CREATE INDEX units_unembedded ON memfs.units(tenant_id, unit_id) WHERE packed IS NULL;
        ALTER TABLE memfs.chunks ADD COLUMN provisional boolean NOT NULL DEFAULT false;
    """)


def _vector_schema(conn: psycopg.Connection) -> str:
    """The schema pgvector's types and operator classes live in."""
    return str(conn.execute("SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
                            "WHERE e.extname = 'vector'").fetchone()[0])


def _vector_index_sql(vector_schema: str, group: str, kind: str, replace: bool = False) -> str:
    """The SQL of ``memfs.vector_index`` (see :func:`_v5`) for chunk vectors of pgvector type ``kind``
    (``vector`` until v7, ``halfvec`` since)."""
    return f"""
        CREATE {"OR REPLACE " if replace else ""}FUNCTION memfs.vector_index(dims integer, build boolean DEFAULT true) RETURNS text
        LANGUAGE plpgsql SECURITY DEFINER VOLATILE
        SET search_path = pg_catalog, "{vector_schema}", pg_temp
        AS $fn$
        DECLARE
            tenant bigint;
            writers integer;
            part text;
            wanted text;
            stale text;
        BEGIN
            IF dims IS NULL OR dims < 1 OR dims > 2000 THEN
                RAISE EXCEPTION 'memfs: an HNSW index takes 1 to 2000 dimensions, not %', dims
                    USING ERRCODE = 'invalid_parameter_value';
            END IF;
            SELECT min(a.tenant_id), count(*) INTO tenant, writers FROM memfs.access a
                WHERE a.role = session_user AND a.writes;
            IF writers <> 1 THEN
                RAISE EXCEPTION 'memfs: role % is not the login of one tenant', session_user
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
            part := 'chunks_t' || tenant;
            -- Two builders of one tenant wait for each other here (the lock conflicts with
            -- itself and with writes, as the build's own does); an advisory lock would not do,
            -- since any role may take any advisory key and stall another tenant's build.
            EXECUTE format('LOCK TABLE memfs.%I IN SHARE ROW EXCLUSIVE MODE', part);
            wanted := part || '_hnsw_' || dims;
            FOR stale IN
                SELECT c.relname FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
                WHERE i.indrelid = format('memfs.%I', part)::regclass
                  AND starts_with(c.relname, part || '_hnsw_') AND c.relname <> wanted
            LOOP
                EXECUTE format('DROP INDEX memfs.%I', stale);
            END LOOP;
            IF NOT build THEN
                RETURN NULL;
            END IF;
            IF to_regclass(format('memfs.%I', wanted)) IS NULL THEN
                EXECUTE format('CREATE INDEX %I ON memfs.%I USING hnsw ((embedding::{kind}(%s)) '
                               '{kind}_cosine_ops) WITH (m = 16, ef_construction = 64)', wanted, part, dims);
                -- The planner's statistics of a partition that just grew: without them it may
                -- think the partition holds a row and keep to a btree and a sort.
                EXECUTE format('ANALYZE memfs.%I', part);
            END IF;
            RETURN wanted;
        END
        $fn$;
        REVOKE ALL ON FUNCTION memfs.vector_index(integer, boolean) FROM PUBLIC;
        GRANT EXECUTE ON FUNCTION memfs.vector_index(integer, boolean) TO {group};
    """


def _v5(conn: psycopg.Connection, names: Names) -> None:
    """A tenant builds the HNSW index of its own partition, with no admin at hand: a tenant role
    owns nothing, and only a table's owner may index it, so ``memfs.vector_index(dims, build)``
    runs as the schema's owner (SECURITY DEFINER) and takes no tenant id: the tenant is the one
    the calling login writes (``memfs.access`` for ``session_user``, the authenticated login,
    since ``current_user`` inside is the owner), so a tenant can index its own partition only.
    It drops the partition's HNSW indexes of other dimensions (a model change: the old
    expression would refuse every new vector) and, with ``build``, makes the one of ``dims``
    (idempotent; two callers of one tenant wait for each other).  A plain
    CREATE INDEX: CONCURRENTLY cannot run inside a function; the build blocks writes to that one
    partition (other tenants and every read go on) for as long as it takes, once.
    ``search_path`` is pinned to the catalog and pgvector's schema (the opclass and type), and
    the parameters are an integer and a boolean, so nothing of the caller's reaches the SQL."""
    conn.execute(_vector_index_sql(_vector_schema(conn), names.tenant_group, "vector"))



def _v6(conn: psycopg.Connection, names: Names) -> None:
    """No tenant writes what another trusts: the embedding cache is each tenant's own
    (``tenant_embeddings``, public entries too, under the policies of every tenant table) and
    v1's ``embedding_cache``, which every tenant could read and add to, is dropped with its rows.

    Shared, it let a tenant's login insert the hash of a text it guesses another tenant holds
    (a public log line, say) with a vector of its choosing, which the other then took for its
    own chunk of that text; and read every row's hash, so confirm such a guess.  Keying the
    rows with a secret only the admin holds would not help: the key is computed for the
    tenant that asks, so the same tenant could ask for it (and plant, and confirm) as well.

    The dropped rows are not moved into any tenant's cache: nobody can tell which tenant
    embedded a row and which planted it.  A tenant's chunk and unit vectors stay where they
    are; a text that is chunked again (a file edited, a rebuild) is embedded once more by its
    own tenant, which is what the fleet gives up (scripts/bench_pgcache.py measures it)."""
    conn.execute(f"""
        REVOKE ALL ON memfs.embedding_cache FROM {names.tenant_group};
        DROP TABLE memfs.embedding_cache;
    """)


def _v7(conn: psycopg.Connection, names: Names) -> None:
    """Chunk vectors and the tenant's embedding cache as pgvector's ``halfvec`` (float16: 2 bytes
    a dimension instead of 4; issue #45).  The HNSW indexes are rebuilt on ``halfvec(N)`` with
    ``halfvec_cosine_ops`` for the partitions that had one (dropped first: their expression was
    ``vector(N)``), and ``memfs.vector_index`` builds those from now on.  Ranking is that of the
    float32 vectors to float16's precision (about 3 significant digits of each component: on the
    dev set one recall column moved, by .002, docs/postgres.md).  The conversion runs
    here, in ``memfs pg init`` with the admin's DSN, in one transaction: the tables are rewritten
    once, never at a mount (a memfs that needs v7 refuses an older schema with one line)."""
    indexes = [str(r[0]) for r in conn.execute(
        "SELECT c.relname FROM pg_class c WHERE c.relnamespace = 'memfs'::regnamespace AND c.relkind = 'i' "
        "AND c.relname ~ '^chunks_t[0-9]+_hnsw_[0-9]+$'").fetchall()]
    for name in indexes:
        conn.execute(f'DROP INDEX memfs."{name}"')
    conn.execute("""
        ALTER TABLE memfs.chunks ALTER COLUMN embedding TYPE halfvec USING embedding::halfvec;
        ALTER TABLE memfs.tenant_embeddings ALTER COLUMN vector TYPE halfvec USING vector::halfvec;
    """)
    conn.execute(_vector_index_sql(_vector_schema(conn), names.tenant_group, "halfvec", replace=True))
    # Spelled out, not knn.create_index: a released migration must keep doing what it did when
    # create_index changes.
    for name in indexes:
        part, dims = name.rsplit("_hnsw_", 1)
        conn.execute(f'CREATE INDEX "{name}" ON memfs."{part}" USING hnsw ((embedding::halfvec({int(dims)})) '
                     "halfvec_cosine_ops) WITH (m = 16, ef_construction = 64)")
        conn.execute(f'ANALYZE memfs."{part}"')


# (version, what it does, how): append only; a released migration is never edited.  A migration
# that adds a table to PARTITIONED must also make its partitions for the tenants already there.
MIGRATIONS: tuple[tuple[int, str, Callable[[psycopg.Connection, Names], None]], ...] = (
    (1, "tenants, access, tenant tables with RLS, shared embedding cache", _v1),
    (2, "BM25 postings: chunk length in chunk_terms, keyed in postings order", _v2),
    (3, "policies evaluate the access functions once per statement", _v3),
    (4, "the index's own columns: packed unit vectors, provisional chunks", _v4),
    (5, "memfs.vector_index: a tenant builds the HNSW index of its own partition", _v5),
    (6, "the embedding cache is each tenant's own: the fleet-wide embedding_cache is dropped", _v6),
    (7, "chunk vectors and the embedding cache as halfvec (float16), HNSW indexes rebuilt on halfvec", _v7),
)
LATEST = MIGRATIONS[-1][0]


def add_partitions(conn: psycopg.Connection, tenant_id: int) -> None:
    """A new tenant's partition of each partitioned table.  Nobody is granted anything on a
    partition (reading one directly would skip the parent's policies), and RLS is forced on it
    all the same."""
    for table in PARTITIONED:
        part = f"{table}_t{int(tenant_id)}"
        conn.execute(f"CREATE TABLE IF NOT EXISTS memfs.{part} PARTITION OF memfs.{table} "
                     f"FOR VALUES IN ({int(tenant_id)})")
        conn.execute(f"REVOKE ALL ON memfs.{part} FROM PUBLIC")
        conn.execute(f"ALTER TABLE memfs.{part} ENABLE ROW LEVEL SECURITY")
        conn.execute(f"ALTER TABLE memfs.{part} FORCE ROW LEVEL SECURITY")


def names(conn: psycopg.Connection) -> Names:
    """This database's names, PgError when it has no memfs schema yet."""
    if version(conn) == 0:
        raise PgError("this database has no memfs schema: run `memfs pg init DSN` first")
    row = conn.execute("SELECT install FROM memfs.installation").fetchone()
    return Names(str(row[0]))


def version(conn: psycopg.Connection) -> int:
    """The schema version the database is at (0: none)."""
    exists = conn.execute("SELECT to_regclass('memfs.schema_version') IS NOT NULL").fetchone()[0]
    if not exists:
        return 0
    return int(conn.execute("SELECT coalesce(max(version), 0) FROM memfs.schema_version").fetchone()[0])


def init(dsn: str) -> tuple[int, int, str]:
    """Create or upgrade the schema: (version before, version after, pgvector version)."""
    import psycopg as pg

    with connect(dsn) as conn:
        vector = check_server(conn, create_vector=True)
        try:
            with conn.transaction():
                conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
                before = version(conn)
                if before and not conn.execute(
                        "SELECT pg_has_role(current_user, nspowner, 'USAGE') FROM pg_namespace WHERE nspname = 'memfs'"
                ).fetchone()[0]:
                    # A tenant's login reads schema_version: "already current" would hide that it
                    # could create or upgrade nothing.
                    raise PgError(f"role {conn.info.user} does not own the memfs schema: `memfs pg init` takes the "
                                  "admin DSN (the one the schema was created with), not an agent's login")
                if before > LATEST:
                    raise PgError(f"the database's memfs schema is version {before}, newer than this memfs "
                                  f"knows ({LATEST}): upgrade memfs")
                if before == 0:
                    conn.execute("CREATE SCHEMA IF NOT EXISTS memfs")
                    conn.execute("REVOKE ALL ON SCHEMA memfs FROM PUBLIC")
                    conn.execute("CREATE TABLE IF NOT EXISTS memfs.schema_version(version integer PRIMARY KEY, "
                                 "description text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
                    these = Names(secrets.token_hex(4))
                else:
                    these = names(conn)
                for number, description, migrate in MIGRATIONS:
                    if number <= before:
                        continue
                    migrate(conn, these)
                    conn.execute("INSERT INTO memfs.schema_version(version, description) VALUES (%s, %s)",
                                 (number, description))
        except pg.Error as exc:
            raise PgError(f"cannot create the memfs schema: {str(exc).strip().splitlines()[0]}") from None
        return before, LATEST, vector
