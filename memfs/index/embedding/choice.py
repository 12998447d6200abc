"""Which embedding provider a configuration names, made once per process: the local model through
the user's embedding service (or loaded here), an OpenAI-compatible server, or none.  Apart from
:mod:`memfs.index.embedding.providers` so the providers know nothing of the service's client,
which is built on them."""

from __future__ import annotations

import logging
import os
import threading
import time

from memfs.config import EmbeddingConfig
from memfs.index.embedding.client import ServiceProvider
from memfs.index.embedding.providers import (
    EmbeddingError,
    LocalProvider,
    NoProvider,
    OpenAIProvider,
    Provider,
)

log = logging.getLogger(__name__)
_cache: dict[tuple[str, ...], Provider | None] = {}
_cache_lock = threading.Lock()


def make_provider(cfg: EmbeddingConfig) -> Provider:
    """The configured provider.  The local model is loaded once per user, by the embedding
    service (``embedding.service``), or else once per process."""
    if cfg.provider == "none":
        return NoProvider()
    if cfg.provider == "openai":
        return OpenAIProvider(cfg)
    if cfg.provider == "local":
        # The runtime folder too: the service a process asks is the one its environment names.
        key = ("local", cfg.model_path, cfg.tokenizer_path,
               f"service:{os.environ.get('XDG_RUNTIME_DIR', '')}:{cfg.service_idle_s}" if cfg.service else "here")
        with _cache_lock:
            if key not in _cache:
                _cache[key] = _service_provider(cfg) if cfg.service else None
            if _cache[key] is None:
                started = time.perf_counter()
                _cache[key] = LocalProvider(cfg.model_path, cfg.tokenizer_path)
                log.info("loaded local embedding model in %.2fs", time.perf_counter() - started)
            return _cache[key]
    raise EmbeddingError(f"unknown embedding provider {cfg.provider!r}")


def _service_provider(cfg: EmbeddingConfig) -> Provider | None:
    """The per-user service's client, or None (with a warning) when the service cannot be used."""
    try:
        return ServiceProvider(cfg)
    except OSError as exc:
        log.warning("no embedding service (%s): loading the model in this process", exc)
        return None
