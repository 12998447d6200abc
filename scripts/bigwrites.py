"""Large memory files made from real LoCoMo text, for the big-write benchmark and its tests.

Three kinds, each of about ``size`` bytes: a ClawGPT sync file (the dev set's messages repeated
under fresh ids, re-dated one day later per round so a year of history routes to many day
files), a session transcript (``sessions/*.jsonl``: one session header, then the same turns as
``type: "message"`` records), and a daily log (the dev set's Markdown logs, each repeated round's
lines tagged with the round so no line repeats).
"""

from __future__ import annotations

import json
from pathlib import Path

DEV = Path(__file__).resolve().parent.parent.parent / "shared" / "bench" / "locomo-dev"
# A fresh clone (CI) has no dev set beside it: then the LoCoMo day the tests ship is the text.
OWN = Path(__file__).resolve().parent.parent / "tests" / "data"
DAY_MS = 86_400_000
# Each round is dated a day later, up to this many days: the dev set starts in 2023, and rounds
# past late 2026 would be dated ahead of the day the tests run (refused as "more than a day ahead").
ROUND_DAYS = 1000


def _messages(dev: Path) -> list[dict]:
    out = []
    for path in sorted(dev.glob("conv-*/clawgpt-memory/*.jsonl")) or sorted(OWN.glob("locomo-*.jsonl")):
        out += [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    if not out:
        raise SystemExit(f"no LoCoMo sync files under {dev}")
    out.sort(key=lambda m: m["timestamp"])
    return out


def _rounds(size: int, dev: Path, first_round: int, record_of) -> bytes:
    """The dev set's messages made into records by ``record_of(message, round)``, round after
    round, until ``size`` bytes or a little more."""
    base = _messages(dev)
    lines: list[bytes] = []
    total = 0
    round_ = first_round
    while total < size:
        for m in base:
            line = json.dumps(record_of(m, round_), ensure_ascii=False).encode() + b"\n"
            lines.append(line)
            total += len(line)
            if total >= size:
                break
        round_ += 1
    return b"".join(lines)


def _said(m: dict, r: int, distinct: bool) -> str:
    """A message's text in round ``r``: tagged with the round after the first when ``distinct``
    (as daily_log tags lines), so no text repeats and the embedding cache answers for none."""
    return f"{m['content']} (r{r})" if distinct and r else m["content"]


def sync_lines(size: int, dev: Path = DEV, tag: str = "b", distinct: bool = False) -> bytes:
    """JSONL sync lines, ``size`` bytes or a little more."""
    return _rounds(size, dev, 0, lambda m, r: {**m, "id": f"{m['id']}-{tag}{r}", "content": _said(m, r, distinct),
                                               "timestamp": m["timestamp"] + (r % ROUND_DAYS) * DAY_MS})


def session_header(ident: str = "import") -> bytes:
    return json.dumps({"type": "session", "id": ident, "timestamp": "2023-05-08T13:56:00Z"}).encode() + b"\n"


def session_records(size: int, dev: Path = DEV, start_round: int = 0, distinct: bool = False) -> bytes:
    """Transcript message records (no header), ``size`` bytes or a little more."""
    return _rounds(size, dev, start_round, lambda m, r: {
        "type": "message", "id": f"{m['id']}-{r}", "timestamp": m["timestamp"] + (r % ROUND_DAYS) * DAY_MS,
        "message": {"role": m["role"], "content": _said(m, r, distinct)}})


def transcript(size: int, dev: Path = DEV, distinct: bool = False) -> bytes:
    head = session_header()
    return head + session_records(size - len(head), dev, distinct=distinct)


def daily_log(size: int, dev: Path = DEV) -> bytes:
    """Markdown: the dev set's daily logs, in rounds; a round after the first tags each line."""
    logs = [p.read_text() for p in sorted(dev.glob("conv-*/memory/*.md")) or sorted(OWN.glob("locomo-*.md"))]
    if not logs:
        raise SystemExit(f"no LoCoMo daily logs under {dev}")
    parts: list[str] = []
    total = 0
    round_ = 0
    while total < size:
        for text in logs:
            if round_:
                text = "\n".join(f"{line} (r{round_})" if line.strip() and not line.startswith("#") else line
                                 for line in text.split("\n"))
            block = text.rstrip("\n") + "\n\n"
            parts.append(block)
            total += len(block.encode())
            if total >= size:
                break
        round_ += 1
    return "".join(parts).encode()


def last_word(data: bytes) -> str:
    """A word of the data's last line only (for checking the end was indexed)."""
    return data.rstrip(b"\n").rsplit(b"\n", 1)[-1].decode()
