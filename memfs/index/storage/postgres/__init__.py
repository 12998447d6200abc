"""The PostgreSQL + pgvector index for a fleet of agents (``index.backend = "postgres"``):
:mod:`~memfs.index.storage.postgres.store` is the :class:`memfs.index.storage.interface.IndexStore` of one tenant.

Each (workspace, agent) is a tenant.  Every table that holds a tenant's data is keyed by
``tenant_id``, partitioned by it (LIST: one partition per tenant, so a tenant's KNN and keyword
queries read its partition alone) and guarded by row-level security (FORCE) against the login
role of that tenant (:mod:`memfs.index.storage.postgres.roles`).  :mod:`~memfs.index.storage.postgres.connect` opens
connections with one-line errors; :mod:`~memfs.index.storage.postgres.schema` holds the versioned migrations.
"""
