"""Versions of memory files: every content a memory file had, kept with who made it.

``store`` keeps the bytes (content-addressed, an append stored as its new bytes only) and the
version records in SQLite; ``provenance`` says who made a change; ``keeper`` decides when a
version is taken (before a change, after it, beside the mount), restores one and prunes by age
and size.  Imports config and workspace only, like the layer table says.
"""
