"""The PostgreSQL + pgvector index for a fleet of agents (``index.backend = "postgres"``):
:mod:`~memfs.index.pg.store` is the :class:`memfs.index.interface.IndexStore` of one tenant.

Each (workspace, agent) is a tenant.  Every table that holds a tenant's data is keyed by
``tenant_id``, partitioned by it (LIST: one partition per tenant, so a tenant's KNN and keyword
queries read its partition alone) and guarded by row-level security (FORCE) against the login
role of that tenant (:mod:`memfs.index.pg.roles`).  :mod:`~memfs.index.pg.connect` opens
connections with one-line errors; :mod:`~memfs.index.pg.schema` holds the versioned migrations.
"""
