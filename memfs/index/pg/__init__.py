"""The PostgreSQL + pgvector index for a fleet of agents (preview: schema, roles and isolation;
the search index itself still runs on SQLite, see memfs.index.store).

Each (workspace, agent) is a tenant.  Every table that holds a tenant's data is keyed by
``tenant_id``, partitioned by it (LIST: one partition per tenant, so a tenant's KNN and keyword
queries read its partition alone) and guarded by row-level security (FORCE) against the login
role of that tenant (:mod:`memfs.index.pg.roles`).  :mod:`~memfs.index.pg.connect` opens
connections with one-line errors; :mod:`~memfs.index.pg.schema` holds the versioned migrations.
"""
