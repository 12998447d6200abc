"""Which texts are not language: a passage or a query whose meaning an embedding model cannot read.

A model reads random bytes, a base64 blob, a hex dump or a run of one letter as something: the
local model turns a word longer than 100 characters, and a mark (U+FFFD, what memfs.cleantext
makes of bytes that are not text), into one unknown piece, so ``'q' * 252`` and a line of random
bytes read the same and met at cosine 1.000 (score 0.949), and a random base64 query met a stored
base64 blob at 0.61.  Such a passage is kept and found by its exact tokens (keyword search), but
its vector says nothing, and neither does such a query's: search scores them by keyword alone
(:mod:`memfs.index.search.hybrid`).

Judged by characters, not by a model's vocabulary, so it holds for any provider:

- a token holding a mark is noise; a passage with a mark and fewer than ``MIN_LETTERS`` letters
  (what is left of a line of random bytes: ``"ĨڡV \\ufffd"``) is noise whole;
- a token of at least ``RANDOM_MIN`` letters and digits whose character class (upper, lower,
  digit) changes at ``RANDOM_SWITCHES`` or more of its steps is random (base64 switches at about
  .64 of its steps, random hex .47; words in camelCase or snake_case about .3 and less);
- a token of four or more hex digits with both digits and letters a-f (``a61f``: a hex dump);
- numbers and punctuation count for neither side;
- a text is noise when noise holds ``NOISE_SHARE`` of the characters that count, or when it has
  fewer than two letters or digits (a leftover of random bytes, a query of one letter).

Measured on 9,045 LoCoMo passages, 9,801 passages of real coding-agent sessions (code, paths,
hashes, tables) and the probe set's 164 passages (tests/data/probes): one flagged, a block of
generated C whose identifiers are random-looking (``v_15s_0CD``); the largest share among the
others .45 (a message listing commit hashes).  Of the probe workspace's 66 junk passages, all
but seven one- or two-character leftovers of random bytes (``n``, ``8:```) are noise.

A query is also unreadable when most of it is one token of ``LONG_TOKEN`` or more letters and
digits (``'q' * 252``, ``'ab' * 100``): no word is that long (CJK runs, written without spaces,
aside).
"""

from __future__ import annotations

import functools
import re
import string

from memfs.index.text.keywords import CJK_CHAR

NOISE_SHARE = 0.6
MIN_LETTERS = 12
RANDOM_MIN = 16
RANDOM_SWITCHES = 0.4
LONG_TOKEN = 30
_EDGES = string.punctuation + "“”‘’«»…"
_HEX = re.compile(r"(?=[0-9a-f]*[0-9])(?=[0-9a-f]*[a-f])[0-9a-f]{4,}", re.IGNORECASE)


def _kind(char: str) -> int:
    return 0 if char.isupper() else 1 if char.islower() else 2 if char.isdigit() else 3


def _random(core: str) -> bool:
    """A token that reads as random characters: its case and digits switch at most steps."""
    chars = [c for c in core if c.isalnum()]
    if len(chars) < RANDOM_MIN:
        return False
    switches = sum(_kind(a) != _kind(b) for a, b in zip(chars, chars[1:]))
    return switches / (len(chars) - 1) >= RANDOM_SWITCHES


@functools.lru_cache(maxsize=65_536)
def noise_share(text: str) -> float:
    """The share of a text's characters (those that count: see the module docstring) that are
    noise, 0..1."""
    if "\ufffd" in text and sum(c.isalpha() for c in text) < MIN_LETTERS:
        return 1.0
    if sum(c.isalnum() for c in text) < 2:
        return 1.0  # one character (a leftover of random bytes, a lone "q"): nothing to read
    counted = noisy = 0
    for token in text.split():
        core = token.strip(_EDGES)
        if "\ufffd" in token or _random(core) or _HEX.fullmatch(core):
            counted += len(token)
            noisy += len(token)
        elif any(c.isalpha() for c in core) and sum(c.isalnum() for c in core) * 2 >= len(token):
            counted += len(token)
        # numbers, and tokens mostly punctuation, count for neither side
    return noisy / counted if counted else 0.0


def is_noise(text: str) -> bool:
    """A passage whose vector says nothing: search finds it by its words alone."""
    return noise_share(text) >= NOISE_SHARE


@functools.lru_cache(maxsize=4096)
def unreadable_query(query: str) -> bool:
    """A query whose vector says nothing (noise, or mostly one endless token): searched by its
    words alone."""
    if is_noise(query):
        return True
    counted = long = 0
    for token in query.split():
        letters = sum(c.isalnum() for c in token)
        counted += letters
        if letters >= LONG_TOKEN and not CJK_CHAR.search(token):
            long += letters
    return counted > 0 and long >= NOISE_SHARE * counted
