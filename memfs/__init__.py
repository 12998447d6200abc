"""memfs: agent memory as a filesystem (plain Markdown and JSONL, indexed for hybrid search)."""

__version__ = "0.1.0"
