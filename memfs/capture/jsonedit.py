"""Editing a user's JSON settings file without touching anything but what is edited.

``json.load`` then ``json.dump`` would rewrite the whole file: its spacing, its key order inside
lines, its escapes, Gemini CLI's comments.  Here the file is parsed into nodes that know where
they start and end in the text (comments and trailing commas allowed, as JSONC), and an edit
inserts or cuts exactly the characters of one member or array item, indented like its
neighbours.  Cutting what was inserted gives back the same bytes.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from json.decoder import scanstring
from typing import Any

_NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][-+]?\d+)?")
_LITERALS = {"true": True, "false": False, "null": None}


class JsonError(ValueError):
    """Not JSON (the message says where)."""


@dataclass
class Node:
    start: int
    end: int  # one past the last character


@dataclass
class Scalar(Node):
    value: Any = None


@dataclass
class Member:
    key: str
    start: int  # the key's opening quote
    value: Node


@dataclass
class Object(Node):
    members: list[Member] = field(default_factory=list)

    def get(self, key: str) -> Node | None:
        found = [m.value for m in self.members if m.key == key]
        return found[-1] if found else None


@dataclass
class Array(Node):
    items: list[Node] = field(default_factory=list)


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def fail(self, what: str) -> JsonError:
        line = self.text.count("\n", 0, self.i) + 1
        return JsonError(f"line {line}: {what}")

    def space(self) -> None:
        t = self.text
        while self.i < len(t):
            c = t[self.i]
            if c in " \t\r\n\ufeff":
                self.i += 1
            elif t.startswith("//", self.i):
                end = t.find("\n", self.i)
                self.i = len(t) if end < 0 else end
            elif t.startswith("/*", self.i):
                end = t.find("*/", self.i + 2)
                if end < 0:
                    raise self.fail("a comment that never ends")
                self.i = end + 2
            else:
                return

    def value(self) -> Node:
        self.space()
        t, start = self.text, self.i
        if start >= len(t):
            raise self.fail("the text ends where a value should be")
        c = t[start]
        if c == "{":
            return self.obj()
        if c == "[":
            return self.arr()
        if c == '"':
            text, self.i = self.string()
            return Scalar(start, self.i, text)
        for word, literal in _LITERALS.items():
            if t.startswith(word, start):
                self.i = start + len(word)
                return Scalar(start, self.i, literal)
        m = _NUMBER.match(t, start)
        if m:
            self.i = m.end()
            return Scalar(start, self.i, json.loads(m.group()))
        raise self.fail(f"unexpected {c!r}")

    def string(self) -> tuple[str, int]:
        try:
            return scanstring(self.text, self.i + 1)
        except ValueError as exc:
            raise self.fail(f"a bad string ({exc})") from None

    def obj(self) -> Object:
        node = Object(self.i, self.i)
        self.i += 1
        while True:
            self.space()
            if self.text.startswith("}", self.i):
                self.i += 1
                node.end = self.i
                return node
            if not self.text.startswith('"', self.i):
                raise self.fail("a key should be here")
            key_start = self.i
            key, self.i = self.string()
            self.space()
            if not self.text.startswith(":", self.i):
                raise self.fail("':' should follow a key")
            self.i += 1
            node.members.append(Member(key, key_start, self.value()))
            self.space()
            if self.text.startswith(",", self.i):
                self.i += 1
            elif not self.text.startswith("}", self.i):
                raise self.fail("',' or '}' should be here")

    def arr(self) -> Array:
        node = Array(self.i, self.i)
        self.i += 1
        while True:
            self.space()
            if self.text.startswith("]", self.i):
                self.i += 1
                node.end = self.i
                return node
            node.items.append(self.value())
            self.space()
            if self.text.startswith(",", self.i):
                self.i += 1
            elif not self.text.startswith("]", self.i):
                raise self.fail("',' or ']' should be here")


def parse(text: str) -> Node:
    """The document's root node (a blank document is an empty object)."""
    if not text.strip():
        return Object(0, 0)
    parser = _Parser(text)
    root = parser.value()
    parser.space()
    if parser.i != len(text):
        raise parser.fail("more text after the document")
    return root


def plain(text: str, node: Node | None = None) -> Any:
    """The Python value of ``node`` (default: the document)."""
    node = parse(text) if node is None else node
    if isinstance(node, Object):
        return {m.key: plain(text, m.value) for m in node.members}
    if isinstance(node, Array):
        return [plain(text, item) for item in node.items]
    return node.value if isinstance(node, Scalar) else None


def indent_unit(text: str) -> str:
    """The file's indentation step: the least leading whitespace of an indented line (two
    spaces when nothing is indented)."""
    widths = [m.group(1) for m in re.finditer(r"\n([ \t]+)\S", text)]
    return min(widths, key=len) if widths else "  "


def _line_indent(text: str, at: int) -> str:
    """The whitespace that begins the line ``at`` is on."""
    start = text.rfind("\n", 0, at) + 1
    m = re.match(r"[ \t]*", text[start:at])
    return m.group() if m else ""


def render(value: Any, unit: str, indent: str) -> str:
    """``value`` as JSON indented by ``unit``, its later lines shifted to ``indent``."""
    return json.dumps(value, indent=unit, ensure_ascii=False).replace("\n", "\n" + indent)


def _place(text: str, container: Object | Array, first: int | None) -> tuple[str, str]:
    """(the indentation a new part of ``container`` takes, the container's own line's)."""
    own = _line_indent(text, container.start)
    if first is not None and "\n" in text[container.start:first]:
        return _line_indent(text, first), own
    return own + indent_unit(text), own


def _insert(text: str, container: Object | Array, parts: list[Node], first: int | None, piece: str) -> str:
    """``piece`` (a member or an item, as text) after the container's last part: on a line of
    its own when its siblings are, else after a comma and a space."""
    ind, own = _place(text, container, first)
    if parts:
        last = parts[-1].end
        if "\n" in text[container.start:first if first is not None else container.end]:
            return text[:last] + ",\n" + ind + piece + text[last:]
        return text[:last] + ", " + piece + text[last:]
    inner = text[container.start + 1:container.end - 1]
    tail = inner if "\n" in inner else "\n" + own
    return text[:container.start + 1] + "\n" + ind + piece + tail + text[container.end - 1:]


def _value(text: str, container: Object | Array, first: int | None, value: Any) -> str:
    """``value`` as its siblings are written: indented on lines, or on one line among parts
    that share one."""
    if first is not None and "\n" not in text[container.start:first]:
        return json.dumps(value, ensure_ascii=False)
    ind, _ = _place(text, container, first)
    return render(value, indent_unit(text), ind)


def add_member(text: str, obj: Object, key: str, value: Any) -> str:
    first = obj.members[0].start if obj.members else None
    piece = json.dumps(key, ensure_ascii=False) + ": " + _value(text, obj, first, value)
    return _insert(text, obj, [m.value for m in obj.members], first, piece)


def add_item(text: str, arr: Array, value: Any) -> str:
    first = arr.items[0].start if arr.items else None
    return _insert(text, arr, arr.items, first, _value(text, arr, first, value))


def _cut(text: str, container: Object | Array, spans: list[tuple[int, int]], index: int) -> str:
    """Cut the ``index``-th part (its ``spans``: start and end of each part) with its comma: an
    only part leaves the container empty; the last one goes with what separates it from the one
    before; any other with what separates it from the next."""
    start, end = spans[index]
    if len(spans) == 1:
        return text[:container.start + 1] + text[container.end - 1:]
    if index == len(spans) - 1:
        return text[:spans[index - 1][1]] + text[end:]
    return text[:start] + text[spans[index + 1][0]:]


def remove_member(text: str, obj: Object, key: str) -> str:
    spans = [(m.start, m.value.end) for m in obj.members]
    index = max(i for i, m in enumerate(obj.members) if m.key == key)
    return _cut(text, obj, spans, index)


def remove_item(text: str, arr: Array, index: int) -> str:
    return _cut(text, arr, [(n.start, n.end) for n in arr.items], index)


def replace_node(text: str, node: Node, value: Any) -> str:
    unit = indent_unit(text)
    return text[:node.start] + render(value, unit, _line_indent(text, node.start)) + text[node.end:]


def at(root: Node, *keys: str) -> Node | None:
    """The node at a path of object keys, or None."""
    node: Node | None = root
    for key in keys:
        if not isinstance(node, Object):
            return None
        node = node.get(key)
    return node
