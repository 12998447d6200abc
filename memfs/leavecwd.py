"""A long-running process (a mount, ``memfs serve`` by hand or on demand) leaves the folder it was
started from: a process whose current directory is inside a mount keeps that mount busy, and
``memfs umount`` refuses it.  Before it leaves, every path it may still read relative to that
folder is made absolute: its settings' file paths, and the environment it loads its settings
from again."""

from __future__ import annotations

import os
from typing import Any

# What a process of memfs reads as a path from its environment, then or later (a mount loads
# its settings again when .memfs.toml changes).
PATH_VARIABLES = ("HOME", "MEMFS_CONFIG", "MEMFS_STATE_DIR", "MEMFS_EMBEDDING_MODEL_PATH",
                  "MEMFS_EMBEDDING_TOKENIZER_PATH", "XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_RUNTIME_DIR")
PATH_SETTINGS = ("embedding.model_path", "embedding.tokenizer_path")


def absolute(path: str) -> str:
    """``path`` as it is meant from here ("" stays "": not set)."""
    return os.path.abspath(os.path.expanduser(path)) if path else path


def absolute_launch(launch: dict[str, Any]) -> dict[str, Any]:
    """load_config's arguments with their paths made absolute, to load the same settings again
    from anywhere."""
    settled = dict(launch)
    if settled.get("config_file"):
        settled["config_file"] = absolute(str(settled["config_file"]))
    settled["overrides"] = [(key, absolute(str(value)) if key in PATH_SETTINGS else value)
                            for key, value in settled.get("overrides", ())]
    return settled


def leave_folder(embedding: Any) -> None:
    """Make this process's paths absolute (its environment's, and ``embedding``'s model and
    tokenizer, read when first used), then stand in /."""
    for name in PATH_VARIABLES:
        if os.environ.get(name):
            os.environ[name] = absolute(os.environ[name])
    embedding.model_path = absolute(embedding.model_path)
    embedding.tokenizer_path = absolute(embedding.tokenizer_path)
    os.chdir("/")
