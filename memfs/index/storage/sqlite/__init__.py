"""The SQLite index of one (workspace, agent): a file in the state directory, FTS5 and sqlite-vec."""
