"""Parsing ``[CLAWGPT-SYNC]`` envelopes and JSONL message lines into validated messages.

A message is ``{id, chatId, chatTitle, role: user|assistant, content, timestamp (ms), deviceId?}``.
Anything else is rejected as a whole with the line and the reason, so a bad batch applies nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import math
import time
from typing import Any, NamedTuple

import orjson

PREFIX = "[CLAWGPT-SYNC]"
FIELDS = ("id", "chatId", "chatTitle", "role", "content", "timestamp")
ROLES = ("user", "assistant")
EARLIEST_MS = 946_684_800_000  # 2000-01-01T00:00:00Z: nothing older was ever synced by ClawGPT
AHEAD_MS = 86_400_000  # a clock may run a little fast, not more than a day
MAX_MS = 2**63  # beyond any clock; larger integers are not converted to floats at all


class SyncError(ValueError):
    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {reason}" if line else reason)
        self.reason = reason
        self.line = line


class NotJSON(SyncError):
    """Text that is not (yet) JSON: wrong for good once the data is complete."""


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
    if (type(ident) is str and type(chat) is str and type(title) is str and type(content) is str
            and (role == "user" or role == "assistant") and type(stamp) is int
            and EARLIEST_MS <= stamp <= latest and (device is None or type(device) is str) and ident.strip()):
        return SyncMessage(ident, chat, title, role, content, stamp, device)
    return None


def _line(raw: str, number: int, now_ms: float) -> SyncMessage:
    """One JSONL line's message.  orjson reads it (a third of json's time) when it can, and
    :func:`_plain` accepts it; anything else is read again by the json module and judged by
    :func:`validate`, so the verdict and its reason are json's: orjson refuses some JSON that
    json takes (NaN, a lone surrogate escape) and reads an integer beyond 64 bits as a float."""
    try:
        message = _plain(orjson.loads(raw), now_ms + AHEAD_MS)
    except orjson.JSONDecodeError:
        message = None
    if message is not None:
        return message
    try:
        record = json.loads(raw)
    except ValueError as exc:
        raise NotJSON(f"invalid JSON: {exc}", number) from None
    return validate(record, number, now_ms=now_ms)


def parse(data: bytes, first_line: int = 1, now_ms: float | None = None) -> list[SyncMessage]:
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
        after = stripped[len(PREFIX):]
        body = after.strip()
        # The line of the data the envelope's JSON starts on (the prefix's own, if it shares it).
        line = first_line + stripped[: len(PREFIX) + len(after) - len(after.lstrip())].count("\n") + \
            text[: len(text) - len(text.lstrip("\ufeff").lstrip())].count("\n")
        try:
            envelope = json.loads(body)
        except ValueError as exc:
            raise NotJSON(f"invalid JSON after {PREFIX}: {exc}", line) from None
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
                messages.append(validate(record, line, device, now_ms))
            except SyncError as exc:
                # Which message of the envelope: its position (counted from 1) and id.
                ident = record.get("id") if isinstance(record, dict) else None
                named = f" (id {ident!r})" if isinstance(ident, str) and ident else ""
                raise SyncError(f"message {index + 1} of {len(envelope['messages'])}{named}: {exc.reason}",
                                line) from None
        return messages
    return [_line(raw, number, now_ms) for number, raw in enumerate(text.split("\n"), start=first_line)
            if raw and not raw.isspace()]


def check_unfinished(data: bytes, first_line: int = 1, now_ms: float | None = None) -> None:
    """Judge data that may still grow (an envelope, or a last line without its newline) as
    soon as it is complete JSON: raises SyncError if it is a complete but invalid message, so
    the write() that completed it can fail.  JSON that is not complete yet is left for later."""
    if not data.rstrip().endswith(b"}"):
        return
    try:
        parse(data, first_line, now_ms)
    except NotJSON:
        return  # an inner object closed, not the whole message: wait for the rest
    except SyncError as exc:
        if "not valid UTF-8" in exc.reason:
            return  # a character cut in two by the write boundary
        raise


def is_envelope_start(data: bytes) -> bool:
    """Whether ``data`` begins (or may yet begin, if cut short) a [CLAWGPT-SYNC] envelope rather
    than JSONL lines: an envelope spans lines, so it can only be judged whole."""
    head = data.lstrip(b"\xef\xbb\xbf").lstrip()[: len(PREFIX)]
    return bool(head) and PREFIX.encode().startswith(head)
