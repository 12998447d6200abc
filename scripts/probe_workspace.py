"""The probe workspace: everyday memory (health, home, work, people, travel, money, code) written
the ways people write it, with the junk real workspaces hold, and the queries asked of it.

    python scripts/probe_workspace.py DIR      # writes the workspace into DIR (for a look, or a mount)

Facts (``tests/data/probes/facts.jsonl``) are placed by their ``form``:

- ``memory``: a list item of ``MEMORY.md`` under ``## heading``;
- ``log``: a daily log entry, ``memory/DATE.md``: ``## HH:MM - heading`` then the text;
- ``note``: a list item of a topical note (``path``, ``# title``, ``## heading``);
- ``chat``: a ClawGPT sync message, ``clawgpt-memory/DATE.jsonl`` (chat id, title, role, time).

Junk beside them: 200 KB of random bytes in ``memory/attachment.md``, a base64 key backup and a
hex dump in notes, and ANSI-coloured terminal output inside log entries (facts whose text holds
escape sequences).  Everything random is seeded, so the workspace is the same on every run.

Queries (``tests/data/probes/probes.jsonl``) may be written as a recipe instead of literally:
``@repeat:TEXT:N`` (TEXT N times), ``@base64:N:SEED`` (N characters of random base64),
``@hex:N:SEED`` (N random hex digits).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import random
import sys
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parent.parent / "tests" / "data" / "probes"
NOISE_BYTES = 200_000


@dataclass(frozen=True)
class Place:
    """Where a fact ended up: its file and the lines that hold it (1-based, inclusive)."""

    path: str
    start_line: int
    end_line: int


def load_facts() -> list[dict]:
    return [json.loads(line) for line in (DATA / "facts.jsonl").read_text().splitlines() if line.strip()]


def load_probes() -> list[dict]:
    probes = [json.loads(line) for line in (DATA / "probes.jsonl").read_text().splitlines() if line.strip()]
    for number, probe in enumerate(probes, start=1):
        probe["id"] = f"{probe['kind']}-{number:03d}"
        probe["text"] = expand(probe["query"])
    return probes


def expand(query: str) -> str:
    """A query as searched: a recipe (``@repeat``, ``@base64``, ``@hex``) made into its text."""
    if not query.startswith("@"):
        return query
    kind, _, rest = query[1:].partition(":")
    if kind == "repeat":
        text, _, count = rest.rpartition(":")
        return text * int(count)
    length, _, seed = rest.partition(":")
    rng = random.Random(f"probe-{kind}-{seed}")
    if kind == "base64":
        return base64.b64encode(rng.randbytes(int(length))).decode()[: int(length)]
    if kind == "hex":
        return rng.randbytes(int(length)).hex()[: int(length)]
    raise ValueError(f"unknown query recipe {query!r}")


def _signing_key_note() -> str:
    rng = random.Random("probe-signing-key")
    blob = base64.b64encode(rng.randbytes(2400)).decode()
    lines = [blob[i : i + 76] for i in range(0, len(blob), 76)]
    return "# Signing key backup\n\nKept here until the hardware token arrives.\n\n```\n" + "\n".join(lines) + "\n```\n"


def _hex_dump_note() -> str:
    rng = random.Random("probe-firmware")
    data = rng.randbytes(768)
    rows = []
    for offset in range(0, len(data), 16):
        chunk = data[offset : offset + 16]
        words = " ".join(chunk[i : i + 2].hex() for i in range(0, 16, 2))
        shown = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        rows.append(f"{offset:08x}: {words}  {shown}")
    return "# Router firmware header\n\nDumped with xxd before the update.\n\n" + "\n".join(rows) + "\n"


def build(root: Path) -> dict[str, Place]:
    """Writes the workspace into ``root``; returns where each fact is."""
    facts = load_facts()
    places: dict[str, Place] = {}
    files: dict[str, list[str]] = {}

    # MEMORY.md: headings in the order they first appear, each fact a list item.
    memory = [f for f in facts if f["form"] == "memory"]
    lines = ["# Long-term memory", "", "Durable facts about the user. Keep them current.", ""]
    for heading in dict.fromkeys(f["heading"] for f in memory):
        lines += [f"## {heading}", ""]
        for fact in (f for f in memory if f["heading"] == heading):
            lines.append(f"- {fact['text']}")
            places[fact["id"]] = Place("MEMORY.md", len(lines), len(lines))
        lines.append("")
    files["MEMORY.md"] = lines

    # Daily logs: one file a day, entries in time order.
    logs = sorted((f for f in facts if f["form"] == "log"), key=lambda f: (f["date"], f["time"]))
    for day in dict.fromkeys(f["date"] for f in logs):
        path = f"memory/{day}.md"
        lines = [f"# {day}", ""]
        for fact in (f for f in logs if f["date"] == day):
            lines += [f"## {fact['time']} - {fact['heading']}", fact["text"]]
            places[fact["id"]] = Place(path, len(lines), len(lines))
            lines.append("")
        files[path] = lines

    # Topical notes: a title, then the facts under their headings as list items.
    notes = [f for f in facts if f["form"] == "note"]
    for path in dict.fromkeys(f["path"] for f in notes):
        mine = [f for f in notes if f["path"] == path]
        lines = [f"# {mine[0]['title']}", ""]
        for heading in dict.fromkeys(f["heading"] for f in mine):
            if heading:
                lines += [f"## {heading}", ""]
            for fact in (f for f in mine if f["heading"] == heading):
                lines.append(f"- {fact['text']}")
                places[fact["id"]] = Place(path, len(lines), len(lines))
            lines.append("")
        files[path] = lines

    # Sync chats: one JSONL file a day, one message a line, in time order.
    chats = sorted((f for f in facts if f["form"] == "chat"), key=lambda f: (f["date"], f["time"]))
    for day in dict.fromkeys(f["date"] for f in chats):
        path = f"clawgpt-memory/{day}.jsonl"
        lines = []
        for fact in (f for f in chats if f["date"] == day):
            when = dt.datetime.fromisoformat(f"{fact['date']}T{fact['time']}:00+00:00")
            lines.append(json.dumps({"id": f"probe-{fact['id']}", "chatId": fact["chat"], "chatTitle": fact["title"],
                                     "role": fact["role"], "content": fact["text"],
                                     "timestamp": int(when.timestamp() * 1000), "deviceId": "probes"}))
            places[fact["id"]] = Place(path, len(lines), len(lines))
        files[path] = lines

    for path, lines in files.items():
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("\n".join(lines).rstrip("\n") + "\n")
    # Junk: what a real memory folder ends up holding beside the notes.
    (root / "memory" / "attachment.md").write_bytes(random.Random("probe-noise").randbytes(NOISE_BYTES))
    (root / "memory" / "notes" / "signing-key.md").write_text(_signing_key_note())
    (root / "memory" / "notes" / "firmware.md").write_text(_hex_dump_note())
    return places


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: probe_workspace.py DIR", file=sys.stderr)
        return 2
    root = Path(sys.argv[1])
    places = build(root)
    print(f"{len(places)} facts written into {root}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
