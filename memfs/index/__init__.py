"""The search engine: chunking, embedding providers and their cache, the SQLite store, hybrid
search and the indexer that keeps the store in step with the workspace files."""
