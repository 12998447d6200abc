"""Parsing ``[CLAWGPT-SYNC]`` envelopes and JSONL message lines into validated messages.

A message is ``{id, chatId, chatTitle, role: user|assistant, content, timestamp (ms), deviceId?}``.
Anything else is rejected as a whole with the line and the reason, so a bad batch applies nothing.

Input is bounded before it is parsed (:class:`Limits`): a JSONL line (one message) by
``sync.max_message_kb``, an envelope by ``sync.max_envelope_mb``, and every message of an envelope
by the line it is stored as.  A message's fields are flat strings and numbers: JSON nested
deeper than :data:`MAX_DEPTH` (an envelope: two levels more, its object and its list) is refused
too, judged before the json module (which recurses, and raises RecursionError some 1000 levels
down) ever reads it.  A file of many lines is not bounded as a whole: a year's import is one.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import re
import time
from typing import Any, NamedTuple

import orjson

PREFIX = "[CLAWGPT-SYNC]"
FIELDS = ("id", "chatId", "chatTitle", "role", "content", "timestamp")
ROLES = ("user", "assistant")
EARLIEST_MS = 946_684_800_000  # 2000-01-01T00:00:00Z: nothing older was ever synced by ClawGPT
AHEAD_MS = 86_400_000  # a clock may run a little fast, not more than a day
MAX_MS = 2**63  # beyond any clock; larger integers are not converted to floats at all
# A message is flat: 1 level (its own object).  Fields memfs does not know are let through, and
# may nest a little (a client's own metadata); beyond this it is no message, but an attempt on
# the parsers (a line nested 200,000 deep made the json module raise RecursionError).
MAX_DEPTH = 16
ENVELOPE_DEPTH = MAX_DEPTH + 2  # the envelope's object and its "messages" list around each message
KEPT_OF_OVERSIZED = 64 * 1024  # of input refused for its size, the head kept in .rejected/


class Limits(NamedTuple):
    """Bytes one message and one envelope may have (``sync.max_message_kb``, ``sync.max_envelope_mb``)."""

    message: int = 1024 * 1024
    envelope: int = 32 * 1024 * 1024

    def message_problem(self, size: int) -> str:
        if size <= self.message:
            return ""
        return (f"a message of {size:,} bytes is larger than sync.max_message_kb "
                f"({self.message / 1024:,g} KiB = {self.message:,} bytes)")

    def envelope_problem(self, size: int, what: str = "a [CLAWGPT-SYNC] envelope") -> str:
        if size <= self.envelope:
            return ""
        return (f"{what} of {size:,} bytes is larger than sync.max_envelope_mb "
                f"({self.envelope / 1048576:g} MiB = {self.envelope:,} bytes)")


DEFAULT_LIMITS = Limits()


class SyncError(ValueError):
    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {reason}" if line else reason)
        self.reason = reason
        self.line = line


class NotJSON(SyncError):
    """Text that is not (yet) JSON: wrong for good once the data is complete."""


class TooLarge(SyncError):
    """Input over a size bound: refused before it is parsed, and only its head is kept."""


def _too_deep(limit: int, line: int | None) -> SyncError:
    return SyncError(f"JSON nested deeper than {limit} levels: a message's fields are strings and numbers", line)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether a parsed JSON value nests containers more than ``limit`` deep (a flat object is
    1).  Recurses at most ``limit + 1`` levels, whatever the value."""
    if type(value) is dict:
        items: Any = value.values()
    elif type(value) is list:
        items = value
    else:
        return False
    if limit < 1:
        return True
    for item in items:
        if (type(item) is dict or type(item) is list) and _deeper_than(item, limit - 1):
            return True
    return False


def _loads(raw: str | bytes, limit: int, line: int | None, what: str = "invalid JSON") -> Any:
    """JSON as the json module reads it, refused when nested deeper than ``limit``.  orjson
    reads it first: it stops at 1024 levels by itself, and saying so ("depth limit exceeded") it
    spares the json module a recursion it cannot finish; what it does read is measured."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        if str(exc).startswith("depth limit"):
            raise _too_deep(limit, line) from None
        try:
            value = json.loads(raw)
        except RecursionError:  # orjson's words changed, or it refused for another reason first
            raise _too_deep(limit, line) from None
        except ValueError as exc:
            raise NotJSON(f"{what}: {exc}", line) from None
    if _deeper_than(value, limit):
        raise _too_deep(limit, line)
    return value


# What json.dumps(record, ensure_ascii=False, separators=(",", ":")) uses, made once: dumps builds
# a new encoder for every call with arguments (a third of the time of a year's messages).
_CANONICAL = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"))


class SyncMessage(NamedTuple):
    # A tuple, not a frozen dataclass: a 30 MB file is some 90k messages, and a frozen
    # dataclass's __init__ (a setattr per field) cost more than parsing their JSON.
    id: str
    chat_id: str
    chat_title: str
    role: str
    content: str
    timestamp: int | float
    device_id: str | None

    def _record(self) -> dict[str, Any]:
        record: dict[str, Any] = {
            "id": self.id, "chatId": self.chat_id, "chatTitle": self.chat_title, "role": self.role,
            "content": self.content, "timestamp": self.timestamp,
        }
        if self.device_id is not None:
            record["deviceId"] = self.device_id
        return record

    def canonical(self) -> str:
        """One JSONL line, fields in the protocol's order."""
        return _CANONICAL.encode(self._record())

    def line(self) -> bytes:
        """:meth:`canonical` as UTF-8, the same bytes, made by orjson (a quarter of the time).
        orjson writes strings and integers exactly as json.dumps(ensure_ascii=False) does; a
        float timestamp (its exponent notation differs) and text orjson refuses (a lone
        surrogate, which json.loads lets through from a \\ud800 escape) take the json module."""
        record = self._record()
        if type(self.timestamp) is int:
            try:
                return orjson.dumps(record)
            except TypeError:  # orjson.JSONEncodeError
                pass
        return _CANONICAL.encode(record).encode("utf-8")


# Between two records of a list orjson wrote: `},{"id":` can be nothing else.  Inside a string a
# quote is always escaped (`\"`), so this `"` opens a key; a string's closing quote is followed by
# `,` `}` or `:`, never by `id`; and a message's record is flat, with "id" as its first key.
_BETWEEN = b'},{"id":'


def joined_lines(messages: list[SyncMessage]) -> bytes:
    """``b"\\n".join(m.line() for m in messages)``, made by one orjson call for the whole list
    (a call per message cost seven times as much: most of it making each line's bytes object).
    Records are cut apart where one ends and the next begins (:data:`_BETWEEN`)."""
    if not messages:
        return b""
    records = []
    for message in messages:
        if type(message.timestamp) is not int:
            return b"\n".join(m.line() for m in messages)  # exponent notation: the json module's
        records.append(message._record())
    try:
        joined = orjson.dumps(records)
    except TypeError:  # orjson.JSONEncodeError: text it refuses (see line())
        return b"\n".join(m.line() for m in messages)
    return joined[1:-1].replace(_BETWEEN, b'}\n{"id":')


def _utc(ms: float) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")


def timestamp_problem(stamp: float, now_ms: float) -> str:
    """Why a message timestamp cannot be right ('' if it can), naming the likely unit mistake."""
    latest = now_ms + AHEAD_MS
    if EARLIEST_MS <= stamp <= latest:
        return ""
    for factor, unit in ((1000, "seconds"), (1 / 1000, "microseconds"), (1 / 1_000_000, "nanoseconds")):
        if EARLIEST_MS <= stamp * factor <= latest:
            return (f"field 'timestamp' {stamp!r} is not in milliseconds: it looks like {unit} "
                    f"({stamp * factor:.0f} ms would be {_utc(stamp * factor)})")
    if stamp < EARLIEST_MS:
        return f"field 'timestamp' {stamp!r} is before 2000-01-01: it must be milliseconds since 1970-01-01 UTC"
    year = "" if stamp > 2.5e14 else f" (year {dt.datetime.fromtimestamp(stamp / 1000, dt.timezone.utc).year})"
    return (f"field 'timestamp' {stamp!r} is more than a day ahead of now{year}: it must be milliseconds "
            "since 1970-01-01 UTC")


def _lone_surrogate(text: str) -> bool:
    """Whether ``text`` holds a code point UTF-8 cannot write (json.loads lets a lone \\ud800
    escape through): such a message could never be stored as a line of a day file."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def validate(record: Any, line: int | None, device_id: str | None = None, now_ms: float | None = None) -> SyncMessage:
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    if not isinstance(record, dict):
        raise SyncError("a message must be a JSON object", line)
    for name in FIELDS:
        if name not in record:
            raise SyncError(f"missing field {name!r}", line)
    for name in ("id", "chatId", "chatTitle", "content"):
        if not isinstance(record[name], str):
            raise SyncError(f"field {name!r} must be a string", line)
    for name in ("id", "chatId", "chatTitle", "content"):
        if _lone_surrogate(record[name]):
            raise SyncError(f"field {name!r} holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text",
                            line)
    if not record["id"].strip():
        raise SyncError("field 'id' is empty", line)
    if record["role"] not in ROLES:
        raise SyncError(f"unknown role {record['role']!r} (user or assistant)", line)
    stamp = record["timestamp"]
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or abs(stamp) > MAX_MS \
            or not math.isfinite(stamp):
        raise SyncError("field 'timestamp' must be a number of milliseconds since 1970-01-01 UTC", line)
    problem = timestamp_problem(stamp, now_ms)
    if problem:
        raise SyncError(problem, line)
    device = record.get("deviceId", device_id)
    if device is not None and not isinstance(device, str):
        raise SyncError("field 'deviceId' must be a string", line)
    if device is not None and _lone_surrogate(device):
        raise SyncError("field 'deviceId' holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text", line)
    return SyncMessage(record["id"], record["chatId"], record["chatTitle"], record["role"], record["content"],
                       stamp, device_id if device_id is not None else device)


def _plain(record: Any, latest: float) -> SyncMessage | None:
    """The message of a record that passes every check of :func:`validate` at a glance (exact
    types, an integer timestamp in range); None for anything else, which :func:`validate` then
    judges and explains.  What this accepts, validate accepts as the same message."""
    if type(record) is not dict:
        return None
    try:
        ident, chat, title = record["id"], record["chatId"], record["chatTitle"]
        role, content, stamp = record["role"], record["content"], record["timestamp"]
    except KeyError:
        return None
    device = record.get("deviceId")
    if len(record) != 6 + ("deviceId" in record) and _deeper_than(record, MAX_DEPTH):
        return None  # fields it does not know of, nested too deep: _line refuses it, saying why
    if (type(ident) is str and type(chat) is str and type(title) is str and type(content) is str
            and (role == "user" or role == "assistant") and type(stamp) is int
            and EARLIEST_MS <= stamp <= latest and (device is None or type(device) is str) and ident.strip()):
        return SyncMessage(ident, chat, title, role, content, stamp, device)
    return None


def _line(raw: str, number: int, now_ms: float, limits: Limits) -> SyncMessage:
    """One JSONL line's message.  orjson reads it (a third of json's time) when it can, and
    :func:`_plain` accepts it; anything else is read again by the json module and judged by
    :func:`validate`, so the verdict and its reason are json's: orjson refuses some JSON that
    json takes (NaN, a lone surrogate escape) and reads an integer beyond 64 bits as a float.
    A line over the size bound, or nested too deep, is refused before the json module reads it."""
    # Bytes of UTF-8 are 1 to 4 a character: only a line near the bound is encoded to count them.
    if len(raw) * 4 > limits.message:
        problem = limits.message_problem(len(raw) if len(raw) > limits.message else len(raw.encode("utf-8")))
        if problem:
            raise TooLarge(problem, number)
    try:
        message = _plain(orjson.loads(raw), now_ms + AHEAD_MS)
    except orjson.JSONDecodeError:
        message = None
    if message is not None:
        return message
    return validate(_loads(raw, MAX_DEPTH, number), number, now_ms=now_ms)


def parse(data: bytes, first_line: int = 1, now_ms: float | None = None,
          limits: Limits = DEFAULT_LIMITS) -> list[SyncMessage]:
    """Messages from a sync envelope or from JSONL lines; raises SyncError for anything invalid.
    ``first_line`` numbers the lines of ``data`` as lines of a longer file."""
    now_ms = time.time() * 1000 if now_ms is None else now_ms
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SyncError(f"not valid UTF-8 (byte {exc.start})") from None
    stripped = text.lstrip("\ufeff").strip()
    if not stripped:
        return []
    if stripped.startswith(PREFIX):
        if problem := limits.envelope_problem(len(data)):
            raise TooLarge(problem)
        after = stripped[len(PREFIX):]
        body = after.strip()
        # The line of the data the envelope's JSON starts on (the prefix's own, if it shares it).
        line = first_line + stripped[: len(PREFIX) + len(after) - len(after.lstrip())].count("\n") + \
            text[: len(text) - len(text.lstrip("\ufeff").lstrip())].count("\n")
        envelope = _loads(body, ENVELOPE_DEPTH, line, f"invalid JSON after {PREFIX}")
        if not isinstance(envelope, dict) or not isinstance(envelope.get("messages"), list):
            raise SyncError(f"the {PREFIX} envelope needs a 'messages' list", line)
        device = envelope.get("deviceId")
        if device is not None and not isinstance(device, str):
            raise SyncError("envelope 'deviceId' must be a string", line)
        if "syncedAt" in envelope and (isinstance(envelope["syncedAt"], bool)
                                       or not isinstance(envelope["syncedAt"], (int, float))):
            raise SyncError("envelope 'syncedAt' must be a number", line)
        messages = []
        for index, record in enumerate(envelope["messages"]):
            try:
                message = validate(record, line, device, now_ms)
                _check_stored_size(message, limits)
                messages.append(message)
            except SyncError as exc:
                # Which message of the envelope: its position (counted from 1) and id.
                ident = record.get("id") if isinstance(record, dict) else None
                named = f" (id {ident!r})" if isinstance(ident, str) and ident else ""
                raise type(exc)(f"message {index + 1} of {len(envelope['messages'])}{named}: {exc.reason}",
                                line) from None
        return messages
    return [_line(raw, number, now_ms, limits) for number, raw in enumerate(text.split("\n"), start=first_line)
            if raw and not raw.isspace()]


def _check_stored_size(message: SyncMessage, limits: Limits) -> None:
    """An envelope's message is bounded as the line it is stored as (its bytes in the envelope
    are not known apart).  Escaping writes a character in at most 6 bytes (\\u001f): only a
    message whose text might come near the bound is written out to be measured."""
    text = len(message.id) + len(message.chat_id) + len(message.chat_title) + len(message.content) + \
        len(message.device_id or "")
    if text * 6 + 160 > limits.message and (problem := limits.message_problem(len(message.line()))):
        raise TooLarge(problem + " (as the line it would be stored as)")


_OUTSIDE = re.compile(rb'["{}\[\]]')  # what changes the state outside a string
_IN_STRING = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*', re.S)  # a string's text up to its quote (or the data's end)


class EnvelopeScan:
    """Where an envelope that is being written stands: how deep its JSON is open, and whether
    in a string, up to the bytes read so far.  Each write reads only its own bytes (a string a
    write cut in two, from the cut on), so the whole envelope is read once, not once per write
    that happens to end in a '}': that is when :func:`check_unfinished` parses it, once its
    outermost value has closed.  Made again whenever bytes already read are rewritten."""

    def __init__(self) -> None:
        self.pos = -1  # where to read on; -1: the prefix is not behind us yet
        self.depth = 0
        self.in_string = False
        self.closed = False  # the outermost value has closed: the JSON is complete (or wrong for good)

    def read(self, data: bytes | bytearray) -> bool:
        """Read what ``data`` holds past what was read before; whether the JSON is complete."""
        if self.pos < 0:
            start = data.find(PREFIX.encode(), 0, 256)
            if start < 0:
                return False  # the prefix itself is still being written
            self.pos = start + len(PREFIX)
        i, end = self.pos, len(data)
        while not self.closed and i < end:
            if self.in_string:
                i = _IN_STRING.match(data, i).end()  # type: ignore[union-attr]  (it matches the empty text)
                if i >= end or data[i] != 0x22:  # the data ends in the string (or in an escape: read it again)
                    break
                i += 1
                self.in_string = False
                continue
            token = _OUTSIDE.search(data, i)
            if token is None:
                i = end
                break
            i = token.end()
            char = data[token.start()]
            if char == 0x22:
                self.in_string = True
            elif char in b"{[":
                self.depth += 1
            else:
                self.depth -= 1
                self.closed = self.depth <= 0
        self.pos = i
        return self.closed


def check_unfinished(data: bytes | bytearray, first_line: int = 1, now_ms: float | None = None,
                     limits: Limits = DEFAULT_LIMITS, scan: EnvelopeScan | None = None) -> None:
    """Judge data that may still grow (an envelope, or a last line without its newline) as
    soon as it is complete JSON: raises SyncError if it is a complete but invalid message, so
    the write() that completed it can fail.  JSON that is not complete yet is left for later,
    unless it is over its size bound already (then it is refused at once: the write() that
    crossed the bound fails, and nothing more of it is held).  ``scan``: an envelope's
    :class:`EnvelopeScan`, kept from write to write, which says when it is complete."""
    envelope = is_envelope_start(data[:256])
    if envelope:
        if problem := limits.envelope_problem(len(data)):
            raise TooLarge(problem)
    elif problem := limits.message_problem(len(data)):
        raise TooLarge(problem, first_line)
    if envelope and scan is not None:
        if not scan.read(data):
            return
        try:
            parse(bytes(data), first_line, now_ms, limits)
        except SyncError as exc:
            if "not valid UTF-8" in exc.reason and not data.rstrip().endswith(b"}"):
                return  # the outermost value closed, and a character after it was cut in two
            raise  # closed: invalid JSON stays invalid, whatever comes after
        return
    # A last line (at most a message long), or an envelope judged without a scan.
    if not data[-4096:].rstrip().endswith(b"}") or _cut_short(data):
        return
    try:
        parse(data, first_line, now_ms, limits)
    except NotJSON:
        return  # an inner object closed, not the whole message: wait for the rest
    except SyncError as exc:
        if "not valid UTF-8" in exc.reason:
            return  # a character cut in two by the write boundary
        raise


def _cut_short(data: bytes | bytearray) -> bool:
    """Whether JSON data (after the envelope's prefix, if any) is cut short, as orjson says,
    reading it without a copy.  The json module then need not read it as well: each write of an
    envelope ending in a '}' had both read all of it (a 30 MB envelope written in 128 KiB writes
    cost the mount 20 s of CPU more that way).  Complete but wrong JSON is for :func:`parse` to judge."""
    start = data.find(PREFIX.encode(), 0, 256)
    try:
        orjson.loads(memoryview(data)[start + len(PREFIX) :] if start >= 0 else data)
    except orjson.JSONDecodeError as exc:
        return str(exc).startswith("unexpected end of data")
    return False


def is_envelope_start(data: bytes) -> bool:
    """Whether ``data`` begins (or may yet begin, if cut short) a [CLAWGPT-SYNC] envelope rather
    than JSONL lines: an envelope spans lines, so it can only be judged whole."""
    head = data.lstrip(b"\xef\xbb\xbf").lstrip()[: len(PREFIX)]
    return bool(head) and PREFIX.encode().startswith(head)
