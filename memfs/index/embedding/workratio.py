"""The embedding work ratio: word pieces the model reads per word piece of text indexed.

What is indexed is each line of a memory file once, as the model would read it: a Markdown file's
non-blank lines without their Markdown marks (:func:`memfs.index.text.units.plain`), a JSONL file's
messages as the index renders them (``[date] Role: text``) and each chat's title once.  Chunks
overlap and units repeat their context, so the model may read a line more than once; the ratio
says how much more.  What the model reads is counted by the local provider itself
(``LocalProvider.pieces_read``, [CLS] and [SEP] included).
"""

from __future__ import annotations

from typing import Protocol

from memfs.index.text.messages import parse_jsonl
from memfs.index.text.units import plain
from memfs.workspace import FileKind, classify


class _Encoder(Protocol):
    def encode_batch(self, texts: list[str], add_special_tokens: bool = ...) -> list: ...


def indexed_texts(rel: str, text: str) -> list[str]:
    """The text of a memory file as indexed, each line once."""
    kind = classify(rel)
    if kind.is_jsonl:
        messages = parse_jsonl(text, session=kind is FileKind.SESSION)
        titles = list(dict.fromkeys(m.chat_title for m in messages if m.chat_title))
        return titles + [m.text for m in messages]
    return [plain(line) for line in text.split("\n") if line.strip()]


def pieces(tokenizer: _Encoder, texts: list[str]) -> int:
    """Word pieces of the texts, without [CLS]/[SEP] (they are not text)."""
    return sum(len(e.ids) for e in tokenizer.encode_batch(texts, add_special_tokens=False)) if texts else 0
