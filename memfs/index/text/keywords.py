"""Text preparation for the keyword index: CJK segmentation, symbols as words, safe FTS5 query
building, and the query's terms as FTS5 itself stems them.

FTS5's unicode61 tokenizer keeps a run of Han/Kana/Hangul characters as one token, so a Chinese
query word would only match a whole sentence.  Both the indexed text and the query put spaces
between CJK characters; a query's CJK run then becomes a phrase of adjacent characters.  It also
drops symbols (emoji, €, →) as separators: both sides write each as a word of its own
(``sym1f680``) so they can be searched for.
"""

from __future__ import annotations

import contextlib
import functools
import re
import threading
import unicodedata
from collections.abc import Iterable, Iterator

import apsw

# How the keyword index (SQLite FTS5, and PostgreSQL's terms made to match it) cuts and stems words.
FTS_TOKENIZER = "porter unicode61 remove_diacritics 2"
_CJK = (
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3400-\u4dbf"  # CJK Extension A
    "\u4e00-\u9fff"  # CJK Unified Ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\U00020000-\U0002ffff"  # Extensions B..F
)
CJK_CHAR = re.compile(f"[{_CJK}]")
_CJK_RUN = re.compile(f"[{_CJK}]+")
# Word characters as unicode61 sees them: letters, digits, marks; everything else separates.
_WORD = re.compile(r"[\w]+", re.UNICODE)

STOPWORDS = frozenset(
    """a an and are as at be but by did do does for from had has have how i if in into is it its
    me my of on or our so that the their them then there these they this to was we were what when
    where which who whom why will with would you your""".split()
)


def segment_cjk(text: str) -> str:
    """Space out CJK characters so each is its own FTS token."""
    if not CJK_CHAR.search(text):
        return text
    return _CJK_RUN.sub(lambda m: " " + " ".join(m.group(0)) + " ", text)


_SYMBOLS = frozenset({"So", "Sc", "Sm"})  # other, currency and maths symbols (emoji are "So")


def symbols_as_words(text: str) -> str:
    """Every non-ASCII symbol as a word of its own (skin-tone modifiers and joiners dropped, so
    👍🏽 finds 👍)."""
    if text.isascii():
        return text
    # Only the non-ASCII characters are looked at (a chunk of English with one curly quote
    # would otherwise be walked character by character).
    return _NON_ASCII.sub(_as_word, text)


_NON_ASCII = re.compile(r"[^\x00-\x7f]")


@functools.lru_cache(maxsize=4096)
def _symbol_word(char: str) -> str:
    if char == "\ufffd":
        return " "  # a mark for bytes that were not text (memfs.cleantext): no word to search for
    category = unicodedata.category(char)
    if category in _SYMBOLS:
        return f" sym{ord(char):x} "
    if category == "Sk":
        return " "  # skin tones and other modifiers qualify a symbol, they are no word
    return char


def _as_word(match: re.Match[str]) -> str:
    return _symbol_word(match.group(0))


def fts_body(text: str) -> str:
    """What the keyword index reads of a text."""
    if text.isascii():
        return text  # no CJK, no symbols: scanning 30 MB for them cost 1.5 s, this 10 ms
    return symbols_as_words(segment_cjk(text))


_local = threading.local()


def _tokenizer() -> apsw.FTS5Tokenizer:
    if not hasattr(_local, "tokenizer"):
        _local.connection = apsw.Connection(":memory:")
        _local.tokenizer = _local.connection.fts5_tokenizer("porter", ["unicode61", "remove_diacritics", "2"])
    return _local.tokenizer


@functools.lru_cache(maxsize=65_536)
def stems(text: str) -> frozenset[str]:
    """The terms FTS5 indexes for ``text`` (the same tokenizer: porter over unicode61)."""
    tokens = _tokenizer()(fts_body(text).encode("utf-8", "surrogatepass"), apsw.FTS5_TOKENIZE_DOCUMENT, None,
                          include_offsets=False, include_colocated=False)
    return frozenset(tokens)


MAX_QUERY_TERMS = 64  # a 10,000-character query still searches quickly, on its first words


def query_terms(query: str) -> list[str]:
    """The searchable terms of a user query: words (lower-cased), CJK runs and symbols.

    FTS5 operators, quotes, parentheses, column filters and other punctuation are dropped here,
    so no user input can form FTS5 syntax.
    """
    text = symbols_as_words(unicodedata.normalize("NFKC", query))
    terms: list[str] = []
    for match in _WORD.finditer(text):
        word = match.group(0).replace("_", " ").strip()
        if not word:
            continue
        for part in word.split():
            for piece in _split_mixed(part):
                terms.append(piece.lower())
    seen: set[str] = set()
    unique = []
    for term in terms:
        if term not in seen:
            seen.add(term)
            unique.append(term)
    return unique[:MAX_QUERY_TERMS]


def _split_mixed(word: str) -> list[str]:
    """Separate CJK runs from Latin/digit runs inside one \\w+ match."""
    if not CJK_CHAR.search(word):
        return [word]
    pieces = []
    last = 0
    for match in _CJK_RUN.finditer(word):
        if match.start() > last:
            pieces.append(word[last : match.start()])
        pieces.append(match.group(0))
        last = match.end()
    if last < len(word):
        pieces.append(word[last:])
    return [p for p in pieces if p]


def search_terms(query: str) -> list[str]:
    """The query's terms worth searching for: stopwords are dropped, so "what did we decide"
    searches for "decide" only, and a query of stopwords alone ("the and of") has no keyword
    side at all: matching "the" says nothing about relevance."""
    return [t for t in query_terms(query) if t not in STOPWORDS]


def match_expression(terms: list[str]) -> str | None:
    """An FTS5 MATCH expression that ORs the terms, each quoted (a CJK run as a phrase of its
    characters); None for no terms."""
    quoted = []
    for term in terms:
        if CJK_CHAR.search(term):
            quoted.append('"' + " ".join(term) + '"')
        else:
            quoted.append('"' + term.replace('"', '""') + '"')
    return " OR ".join(quoted) or None


@functools.lru_cache(maxsize=65_536)
def phrase_tokens(term: str) -> tuple[str, ...]:
    """The tokens FTS5 makes of the phrase :func:`match_expression` writes for ``term`` (a CJK
    run: one token a character)."""
    return query_tokens(" ".join(term) if CJK_CHAR.search(term) else term)


def query_tokens(phrase: str) -> tuple[str, ...]:
    """The tokens FTS5 makes of the text of one quoted phrase of a MATCH expression."""
    return tuple(_tokenizer()(phrase.encode("utf-8", "surrogatepass"), apsw.FTS5_TOKENIZE_QUERY, None,
                              include_offsets=False, include_colocated=False))


def fts_query(query: str) -> str | None:
    return match_expression(search_terms(query))


_tokenizing = threading.local()  # a connection per thread: tokenized() below


def _connection() -> apsw.Connection:
    if not hasattr(_tokenizing, "connection"):
        conn = apsw.Connection(":memory:")
        # ``passage_sets`` keeps which terms each body holds and nothing more (no positions, no
        # lengths): what terms_present asks, 15-20% quicker to fill than ``passages``.
        conn.execute(f"CREATE VIRTUAL TABLE passages USING fts5(body, tokenize='{FTS_TOKENIZER}', content='');"
                     "CREATE VIRTUAL TABLE passage_terms USING fts5vocab(passages, instance);"
                     f"CREATE VIRTUAL TABLE passage_sets USING fts5(body, tokenize='{FTS_TOKENIZER}', content='', "
                     "detail=none, columnsize=0);"
                     "CREATE VIRTUAL TABLE passage_set_terms USING fts5vocab(passage_sets, instance);")
        _tokenizing.connection = conn
    return _tokenizing.connection


@contextlib.contextmanager
def tokenized(bodies: Iterable[str], positions: bool = True) -> Iterator[apsw.Connection]:
    """A connection (this thread's) whose table ``passage_terms`` (FTS5's ``instance`` vocabulary:
    ``doc``, ``term``, ``offset``) holds the tokens of ``bodies`` as the index would make them,
    ``doc`` being each body's position; nothing is kept after the block.  Without ``positions``
    the table is ``passage_set_terms``, one row per term a body holds (``offset`` is NULL)."""
    conn = _connection()
    conn.execute("BEGIN")
    try:
        table = "passages" if positions else "passage_sets"
        conn.executemany(f"INSERT INTO {table}(rowid, body) VALUES (?, ?)", enumerate(bodies))
        yield conn
    finally:
        conn.execute("ROLLBACK")  # the passages were only needed for this answer
