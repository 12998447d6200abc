"""Reading a JSONL session file one record at a time, in bounded memory.

A line is read, decoded and dropped before the next: memory is one line (a 5 MB tool output is
5 MB, once), never the file.  A line that is not JSON is counted as bad and skipped; a last
line without its newline that is not JSON is what a runtime leaves while it is still writing,
and is counted apart (``Stats.partial_tail``), not as damage.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import IO, Any

import orjson

from .model import Stats


def loads(raw: bytes) -> Any:
    """One JSON value from bytes; orjson first (several times faster), the standard library for
    what orjson refuses that Python reads (invalid UTF-8 in a string, NaN)."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return json.loads(raw.decode("utf-8", "replace"))


def records(fp: IO[bytes], stats: Stats, first_line: int = 1) -> Iterator[tuple[int, Any]]:
    """(line number, decoded record) for each JSON line of a binary file; blank lines are
    skipped, bad lines counted in ``stats``."""
    number = first_line - 1
    pending: tuple[int, bytes] | None = None  # a bad line that may turn out to be the last
    for raw in fp:
        number += 1
        stats.bytes_read += len(raw)
        if pending is not None:
            stats.bad_lines += 1
            pending = None
        if not raw.strip():
            continue
        try:
            record = loads(raw)
        except ValueError:
            pending = (number, raw)
            continue
        stats.records += 1
        yield number, record
    if pending is not None:
        if pending[1].endswith(b"\n"):
            stats.bad_lines += 1
        else:
            stats.partial_tail = True
