"""Parsing ``[CLAWGPT-SYNC]`` envelopes and JSONL message lines into validated messages.

A message is ``{id, chatId, chatTitle, role: user|assistant, content, timestamp (ms), deviceId?}``.
Anything else is rejected as a whole with the line and the reason, so a bad batch applies nothing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

PREFIX = "[CLAWGPT-SYNC]"
FIELDS = ("id", "chatId", "chatTitle", "role", "content", "timestamp")
ROLES = ("user", "assistant")


class SyncError(ValueError):
    def __init__(self, reason: str, line: int | None = None) -> None:
        super().__init__(f"line {line}: {reason}" if line else reason)
        self.reason = reason
        self.line = line


@dataclass(frozen=True)
class SyncMessage:
    id: str
    chat_id: str
    chat_title: str
    role: str
    content: str
    timestamp: int | float
    device_id: str | None

    def canonical(self) -> str:
        """One JSONL line, fields in the protocol's order."""
        record: dict[str, Any] = {
            "id": self.id, "chatId": self.chat_id, "chatTitle": self.chat_title, "role": self.role,
            "content": self.content, "timestamp": self.timestamp,
        }
        if self.device_id is not None:
            record["deviceId"] = self.device_id
        return json.dumps(record, ensure_ascii=False, separators=(",", ":"))


def validate(record: Any, line: int | None, device_id: str | None = None) -> SyncMessage:
    if not isinstance(record, dict):
        raise SyncError("a message must be a JSON object", line)
    for name in FIELDS:
        if name not in record:
            raise SyncError(f"missing field {name!r}", line)
    for name in ("id", "chatId", "chatTitle", "content"):
        if not isinstance(record[name], str):
            raise SyncError(f"field {name!r} must be a string", line)
    if not record["id"].strip():
        raise SyncError("field 'id' is empty", line)
    if record["role"] not in ROLES:
        raise SyncError(f"unknown role {record['role']!r} (user or assistant)", line)
    stamp = record["timestamp"]
    if isinstance(stamp, bool) or not isinstance(stamp, (int, float)) or stamp != stamp or not 0 <= stamp < 1e14:
        raise SyncError("field 'timestamp' must be a number of milliseconds", line)
    device = record.get("deviceId", device_id)
    if device is not None and not isinstance(device, str):
        raise SyncError("field 'deviceId' must be a string", line)
    return SyncMessage(record["id"], record["chatId"], record["chatTitle"], record["role"], record["content"],
                       stamp, device_id if device_id is not None else device)


def parse(data: bytes) -> list[SyncMessage]:
    """Messages from a sync envelope or from JSONL lines; raises SyncError for anything invalid."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SyncError(f"not valid UTF-8 (byte {exc.start})") from None
    stripped = text.lstrip("\ufeff").strip()
    if not stripped:
        return []
    if stripped.startswith(PREFIX):
        body = stripped[len(PREFIX):].strip()
        try:
            envelope = json.loads(body)
        except ValueError as exc:
            raise SyncError(f"invalid JSON after {PREFIX}: {exc}", 2) from None
        if not isinstance(envelope, dict) or not isinstance(envelope.get("messages"), list):
            raise SyncError(f"the {PREFIX} envelope needs a 'messages' list", 2)
        device = envelope.get("deviceId")
        if device is not None and not isinstance(device, str):
            raise SyncError("envelope 'deviceId' must be a string", 2)
        if "syncedAt" in envelope and (isinstance(envelope["syncedAt"], bool)
                                       or not isinstance(envelope["syncedAt"], (int, float))):
            raise SyncError("envelope 'syncedAt' must be a number", 2)
        return [validate(m, 2, device) for m in envelope["messages"]]
    messages = []
    for number, raw in enumerate(text.split("\n"), start=1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise SyncError(f"invalid JSON: {exc}", number) from None
        messages.append(validate(record, number))
    return messages
