"""What ``memfs status`` and ``.memfs/status`` report: what the index holds, how far embedding has
got, files not indexed or not all text; a shared view counts only what it may see and is not
told what moves with private text.
"""

from __future__ import annotations

import logging

from memfs.index.embedding.backlog import still_to_chunk
from memfs.index.embedding.fingerprint import (
    kept_reading,
    reading_mode,
    reading_words,
)
from memfs.index.storage.interface import IndexOffline
from memfs.services.lifecycle import Engine
from memfs.services.problems import problems

log = logging.getLogger(__name__)


class Reporter:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def status(self, mode: str | None = None) -> dict[str, object]:
        """What the index holds.  A shared mode counts only what it may see, and is not told what
        moves with private text (the index's size and generation, the embedding cache): watching
        those change would tell when, and roughly how much, MEMORY.md was edited."""
        try:
            info = self._status(mode)
        except IndexOffline as exc:
            self.engine.outage.down(exc)
            info = {"workspace": str(self.engine.cfg.workspace), "agent": self.engine.cfg.agent, "mode": self.engine.privacy(mode).mode,
                    "indexed": True, "provider": self.engine.cfg.embedding.provider, "index_unavailable": str(exc)}
        if owed := self.engine._owed_now(mode):
            info["owed"] = owed
        return info

    def _status(self, mode: str | None) -> dict[str, object]:
        privacy = self.engine.privacy(mode)
        counts = self.engine.store.counts(include_private=not privacy.shared, exclude=self.engine._hidden_now(privacy))
        # As the index records it: status never loads the model (nor calls a server) to say so.
        recorded = self.engine.store.fingerprint or {}
        info: dict[str, object] = {
            "workspace": str(self.engine.cfg.workspace),
            "agent": self.engine.cfg.agent,
            "mode": privacy.mode,
            "indexed": self.engine.store.get_meta("reconciled_at") is not None,
            **{key: n for key, n in counts.items() if not key.startswith("provisional_")},
            **self._progress(counts, include_private=not privacy.shared),
            # Big writes keyword-indexed whose exact chunks are still being made (memfs.index.bigwrites).
            "provisional": [p for p in self.engine.store.provisional_paths(include_private=not privacy.shared)
                            if not privacy.hides(p)],
            "provider": self.engine.cfg.embedding.provider,
            "reading": reading_words(str(recorded.get("readings", "whole"))),
            "model": recorded.get("model", ""),
            "dims": recorded.get("dims", 0),
            "provider_error": self.engine.provider_error,
            "generation": self.engine.store.generation,
            "index_path": self.engine.store.location,  # the file, or the server (no password) and tenant
            "index_bytes": self.engine.store.size_bytes(),
            "problems": [{"path": path, "not_indexed": error, "warning": warning}
                         for path, (error, warning) in sorted(problems(self.engine, privacy).items())],
        }
        if kept := kept_reading(recorded, reading_mode(self.engine.cfg, self.engine.cfg.embedding.provider)):
            info["reading_wanted"] = reading_words(kept)  # until `memfs index --rebuild`
        if self.engine.cfg.embedding.provider == "local" and self.engine.cfg.embedding.service:
            from memfs.index.embedding.client import service_record

            info["embedding_service"] = service_record(self.engine.cfg.embedding)
        if self.engine.history is not None and not privacy.shared:
            # Not for a shared view: the history grows when MEMORY.md is edited.
            info.update(self.engine.history.status())
        if privacy.shared:
            for key in ("generation", "index_path", "index_bytes", "cached_embeddings"):
                info.pop(key)
        return info

    def _progress(self, counts: dict[str, int], include_private: bool) -> dict[str, object]:
        """How far embedding has got: the rate, the time left, whether a process embeds now.
        ``passages`` is every passage to embed, those the big writes still being chunked will
        make among them (``pending_estimated``, an estimate); a provisional chunk is none
        (keyword rows, never embedded, replaced by those): embedded passages plus ``pending``
        plus ``pending_estimated`` make ``passages``, so a share of it does not fall back when the
        exact chunks arrive (unless they are more than estimated)."""
        provisional = counts.get("provisional_chunks", 0)
        coming = (still_to_chunk(counts.get("provisional_lines", 0), counts.get("provisional_jsonl_lines", 0))
                  if self.engine.store.has_vectors else 0)
        backlog = self.engine.backlog(counts["pending"] + coming, include_private).as_dict()
        backlog.pop("pending")
        return {**backlog, "pending_estimated": coming,
                "passages": counts["chunks"] - provisional + counts["units"] + coming}
