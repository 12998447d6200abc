"""What an index was built with, and what the settings now want: its fingerprint (provider,
model, dimensions, how text is cut, how the model reads it), how two fingerprints differ in the
settings' words, the names the embedding cache files vectors under, and a text's hash (the
cache's key).  An index whose fingerprint the settings no longer serve is rebuilt (its vectors
come back from the cache wherever the same text was read the same way)."""

from __future__ import annotations

import hashlib

from memfs.config import Config
from memfs.index.embedding.late import read_as
from memfs.index.text.chunking import CHUNKER_VERSION
from memfs.workspace import FileKind


def unit_key(text: str, chunk_hash: str, by_chunk: bool) -> str:
    """A unit's cache key: its text's hash, or with its chunk's (see Indexer._keyed_by_chunk)."""
    return text_hash(f"{chunk_hash}\n{text}") if by_chunk else text_hash(text)


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def fingerprint(cfg: Config, identity: tuple[str, str, int]) -> dict[str, object]:
    provider, model, dims = identity
    return {
        "provider": provider,
        "model": model,
        "dims": dims,
        "chunk_tokens": cfg.chunking.tokens,
        "chunk_overlap": cfg.chunking.overlap,
        "chunker": CHUNKER_VERSION,
        # Only when not "whole", so indexes read whole keep the fingerprint they had before the
        # settings existed, and changing how passages are read re-embeds.
        **({"readings": mode} if (mode := reading_mode(cfg, provider)) != "whole" else {}),
    }


# Readings an index keeps when a setting's default comes to read otherwise: "chats" read Markdown
# whole (an index's reading "late-chats") until it read it once.  Moving an index means reading all
# its Markdown again, as a backlog: at the first mount after an upgrade that would hold the mount
# for as long as the backlog takes (an hour for 200k passages).  So such an index is read as it was
# built until its owner runs `memfs index --rebuild`; a new index reads the new way.
KEPT_READINGS: dict[str, tuple[str, ...]] = {"late-chats-once": ("late-chats",)}


def kept_reading(built: dict[str, object], wanted_reading: str) -> str | None:
    """``wanted_reading`` when an index built with the fingerprint ``built`` keeps an older
    reading in its place (KEPT_READINGS), else None."""
    return wanted_reading if str(built.get("readings", "whole")) in KEPT_READINGS.get(wanted_reading, ()) else None


def serves(built: dict[str, object], wanted: dict[str, object]) -> bool:
    """Whether an index built with the fingerprint ``built`` serves settings that want ``wanted``
    as it is: the same, or the same but for a reading it keeps (KEPT_READINGS)."""
    if built == wanted:
        return True
    return (kept_reading(built, str(wanted.get("readings", "whole"))) is not None
            and {**built, "readings": wanted.get("readings")} == wanted)


def index_reading(built: dict[str, object] | None, cfg: Config, provider: str) -> str:
    """How an index is read: as it was built (its fingerprint's reading), else as the settings
    say (an index without a fingerprint yet)."""
    if built is None:
        return reading_mode(cfg, provider)
    return str(built.get("readings", "whole"))


# What each key of the fingerprint is, in the words of the settings that decide it.
_FINGERPRINT_WORDS = {
    "provider": "embedding.provider",
    "model": "embedding.model",
    "dims": "the embedding's dimensions",
    "chunk_tokens": "chunking.tokens",
    "chunk_overlap": "chunking.overlap",
    "chunker": "the chunker's version",
    "readings": "how passages are read (embedding.late_chunking, embedding.read_once)",
}


# How passages are read, in the settings' words (the fingerprint's "readings").
_READINGS_WORDS = {"whole": "everything read whole", "late-chats": "chats read late, Markdown whole",
                   "late-chats-once": "chats read late, Markdown each text once", "late": "everything read late",
                   "late-auto": "chats and Markdown but MEMORY.md read late", "once": "each text read once"}


def reading_words(mode: str) -> str:
    """How an index with this reading reads its passages, in the settings' words."""
    return _READINGS_WORDS.get(mode, mode)


def fingerprint_change(built: dict[str, object], wanted: dict[str, object]) -> str:
    """How the settings an index was built with differ from ``wanted``, for a person:
    ``chunking.tokens 400 -> 300; ...``."""
    def value(fp: dict[str, object], key: str) -> object:
        if key == "readings":
            mode = str(fp.get(key, "whole"))
            return _READINGS_WORDS.get(mode, mode)
        return fp.get(key, "none")

    order = list(_FINGERPRINT_WORDS)
    keys = sorted(set(built) | set(wanted), key=lambda k: (order.index(k) if k in order else len(order), k))
    return "; ".join(f"{_FINGERPRINT_WORDS.get(key, key)} {value(built, key)} -> {value(wanted, key)}"
                     for key in keys if value(built, key) != value(wanted, key))


def reading_mode(cfg: Config, provider: str) -> str:
    """How the settings have the model read: "once" (each text once, vectors of several made as
    means: embedding.read_once), "late-chats-once" (the default: chats late, Markdown each text
    once), "late-auto" (chats and daily logs late, MEMORY.md's facts once), "late" (everything
    late), else "whole" (each chunk and each unit read whole).  Late chunking
    (embedding.late_chunking) needs the local model, which gives its output states."""
    if cfg.embedding.read_once:
        return "once"
    if cfg.embedding.late_chunking != "off" and provider == "local":
        return {"all": "late", "chats": "late-chats-once", "auto": "late-auto"}[cfg.embedding.late_chunking]
    return "whole"


def cache_model(mode: str, model: str, kind: FileKind) -> str:
    """The model name the embedding cache files a chunk's (or its units') vectors under: a vector
    made another way than by reading its text whole is not a whole reading, so it is kept apart
    (turning a setting off again must not find them).  Names say how a file is read, not which
    setting made it read so, so a change of setting re-embeds only the files it reads otherwise:
    a whole reading is filed as one whatever the setting, Markdown read once (each text once:
    the default, and MEMORY.md under "auto") under "+once" as embedding.read_once files it, and
    a late reading under "+late" -- a chat's under "+late-chats", the name it had when chats alone
    were read late, so moving between "chats" and "auto", or an index built when "chats" read
    Markdown whole, re-embeds the Markdown, not a year of chats."""
    how = read_as(mode, kind)
    if how == "late" and kind.is_jsonl:
        return f"{model}+late-chats"
    return model if how == "whole" else f"{model}+{how}"
