"""The storage stage: the one store interface, its SQLite and PostgreSQL implementations, the
records both share, moving an index between them, and an index whose server is away."""
