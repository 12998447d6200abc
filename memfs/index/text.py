"""Text preparation for the keyword index: CJK segmentation and safe FTS5 query building.

FTS5's unicode61 tokenizer keeps a run of Han/Kana/Hangul characters as one token, so a Chinese
query word would only match a whole sentence.  Both the indexed text and the query put spaces
between CJK characters; a query's CJK run then becomes a phrase of adjacent characters.
"""

from __future__ import annotations

import re
import unicodedata

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


def query_terms(query: str) -> list[str]:
    """The searchable terms of a user query: words (lower-cased) and CJK runs.

    FTS5 operators, quotes, parentheses, column filters and other punctuation are dropped here,
    so no user input can form FTS5 syntax.
    """
    text = unicodedata.normalize("NFKC", query)
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
    return unique


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
    """The query's terms worth searching for: stopwords are dropped unless the query has nothing
    else, so "what did we decide" searches for "decide" only, while "the who" still finds something."""
    terms = query_terms(query)
    content = [t for t in terms if t not in STOPWORDS]
    return content or terms


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


def fts_query(query: str) -> str | None:
    return match_expression(search_terms(query))
