"""The context bundle (``context/main.md``, ``memfs context``): the configured files of today and
yesterday, read through the one rule for leaving the workspace, rendered within its token budget
(:mod:`memfs.render.bundle`); the shared bundle never holds a private path.
"""

from __future__ import annotations

import datetime as dt
import logging

from memfs.cleantext import clean_text
from memfs.config import MAIN_MODE, SHARED_MODE
from memfs.index.text import secrets
from memfs.index.text.messages import as_text as messages_as_text
from memfs.index.text.messages import parse_jsonl
from memfs.privacy import read_visible
from memfs.render import bundle as bundle_render
from memfs.services.lifecycle import Engine
from memfs.workspace import (
    FileKind,
    classify,
    timezone,
    today,
)

log = logging.getLogger(__name__)

BUNDLE_MODES = (MAIN_MODE, SHARED_MODE)


class UnknownMode(ValueError):
    pass


class NotAllowed(PermissionError):
    """What a shared mode may not read (the main context bundle)."""


class Bundler:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def bundle(self, mode: str, now: dt.datetime | None = None, viewer: str | None = None) -> str:
        """The prompt bundle of ``mode`` (main: everything; shared: without private files), as
        read by ``viewer`` (default: the configured mode; a shared viewer may not read main)."""
        if mode not in BUNDLE_MODES:
            raise UnknownMode(f"unknown context mode {mode!r}: use main or shared")
        if mode == MAIN_MODE and self.engine.privacy(viewer).shared:
            raise NotAllowed("the main context is not available in shared mode: read the shared context")
        privacy = self.engine.privacy(mode)
        settings = self.engine.cfg.bundle
        day = today(timezone(settings.timezone), now)
        names = {"today": day.isoformat(), "yesterday": (day - dt.timedelta(days=1)).isoformat()}
        files = []
        for pattern in settings.files:
            rel = self.engine._long_term_spelling(pattern.format(**names))
            if privacy.hides(rel):
                continue
            bad = 0
            try:
                text: str | None
                text, bad = clean_text(read_visible(self.engine.cfg.workspace, rel, privacy))
            except OSError:
                text = None  # missing, or private for this mode: the same word for both
            kind = classify(rel, self.engine.cfg.index.extra_paths)
            if text is not None and kind.is_jsonl:
                # An agent reads a chat as words under its title, not as JSON keys.
                rendered = messages_as_text(parse_jsonl(text, session=kind is FileKind.SESSION))
                text, escaped = clean_text(rendered.encode("utf-8", "surrogatepass"))  # "\u001b" in JSON
                bad += escaped
            if text is not None:
                text = secrets.mask(text)  # a key pasted into a note is not handed to the model again
            files.append(bundle_render.BundleFile(rel, text, bad, kind.is_jsonl))
        return bundle_render.bundle(mode, day.isoformat(), files, settings.total_tokens, settings.per_file_tokens)
