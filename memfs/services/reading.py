"""``memfs get``: part of a workspace file, bounded, read through the one rule for leaving the
workspace (:func:`memfs.privacy.read_visible`), as text or (``--messages``) as the messages a
sync file or transcript holds.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from memfs.cleantext import clean_text, describe
from memfs.index.text.messages import as_text as messages_as_text
from memfs.index.text.messages import parse_jsonl, parse_transcript, session_header, transcript_runtime
from memfs.privacy import read_visible
from memfs.services.lifecycle import Engine
from memfs.workspace import (
    FileKind,
    OutsideWorkspace,
    classify,
    relative,
)

log = logging.getLogger(__name__)

GET_DEFAULT_LINES = 200
GET_MAX_CHARS = 20_000


@dataclass(frozen=True)
class GetResult:
    path: str
    from_line: int
    to_line: int  # last line included (from_line - 1 when nothing was returned)
    total_lines: int
    text: str
    next_from: int | None  # where to continue, None at the end
    bad_bytes: int = 0  # bytes of the file that are not text (shown as U+FFFD)

    @property
    def warning(self) -> str:
        return f"{self.path}: {describe(self.bad_bytes)}" if self.bad_bytes else ""

    def as_dict(self) -> dict[str, object]:
        return {
            "path": self.path,
            "from": self.from_line,
            "to": self.to_line,
            "total_lines": self.total_lines,
            "next_from": self.next_from,
            "text": self.text,
            "warnings": [self.warning] if self.warning else [],
        }


class GetError(ValueError):
    pass


class Reader:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    def get(self, path: str, from_line: int = 1, lines: int | None = None, mode: str | None = None,
            messages: bool = False) -> GetResult:
        """Read part of a workspace file, bounded, saying where to continue.  ``messages``: a sync
        file's or transcript's lines as the messages they hold, under their chat's title (what
        search indexes), instead of the JSON; the line numbers stay the file's."""
        if from_line < 1:
            raise GetError("--from must be 1 or more")
        count = GET_DEFAULT_LINES if lines is None else lines
        if count < 1:
            raise GetError("--lines must be 1 or more")
        try:
            rel = relative(self.engine.cfg.workspace, path)
        except OutsideWorkspace as exc:
            raise GetError(str(exc)) from None
        # A private file answers exactly like a missing one: a shared reader learns nothing.
        try:
            data = read_visible(self.engine.cfg.workspace, rel, self.engine.privacy(mode))
        except IsADirectoryError:
            raise GetError(f"{rel} is a folder, not a file (ls it, or name a file in it)") from None
        except OSError:
            raise GetError(f"{rel}: no such file in the workspace") from None
        text, bad = clean_text(data)  # as search shows it: a stray byte is a mark, not a refusal
        all_lines = text.split("\n")
        if all_lines and all_lines[-1] == "":
            all_lines.pop()
        total = len(all_lines)
        if from_line > max(total, 1):
            raise GetError(f"{rel} has {total} line{'s' if total != 1 else ''}: --from {from_line} is past its end")
        picked: list[str] = []
        size = 0
        for line in all_lines[from_line - 1 : from_line - 1 + count]:
            if picked and size + len(line) + 1 > GET_MAX_CHARS:
                break
            if len(line) > GET_MAX_CHARS:
                line = line[:GET_MAX_CHARS] + " …[line truncated]"
            picked.append(line)
            size += len(line) + 1
        to_line = from_line + len(picked) - 1
        next_from = to_line + 1 if to_line < total else None
        body = "\n".join(picked) + ("\n" if picked else "")
        if messages:
            body = self._as_messages(rel, body, from_line, to_line, text)
        return GetResult(rel, from_line, to_line, total, body, next_from, bad)

    def _as_messages(self, rel: str, body: str, from_line: int, to_line: int, whole: str) -> str:
        kind = classify(rel, self.engine.cfg.index.extra_paths)
        if not kind.is_jsonl:
            raise GetError(f"{rel} is not a sync file or session transcript: --messages reads JSONL messages "
                           "(leave it out to read the file)")
        session = kind is FileKind.SESSION
        runtime = transcript_runtime(whole[:4096]) if session else None
        if runtime:
            # A runtime's own session file is read whole (as the index reads it): the messages
            # that start on the lines asked for.
            return messages_as_text([m for m in parse_transcript(whole, runtime) if from_line <= m.line <= to_line])
        header = session_header(whole.split("\n", 1)[0]) if session and from_line > 1 else ("", "")
        return messages_as_text(parse_jsonl(body, session=session, first_line=from_line, header=header))
