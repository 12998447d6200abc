"""Appending Markdown for agents that cannot write files (the MCP tool ``memory_append``): to
today's daily log, or to the end of a ``## section`` of MEMORY.md (created when missing).

A daily log only grows (an append, like ``echo >>``); MEMORY.md is rewritten whole, through a
temporary file renamed over it, so a reader sees the old text or the new, never half.  The caller
(``Memory.append``) indexes the file afterwards, as a write on the mount would be.
"""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

from memfs.privacy import Privacy, resolve_within

MAX_APPEND_CHARS = 100_000


class AppendError(ValueError):
    """Why nothing was appended."""


def _heading(line: str) -> tuple[int, str] | None:
    match = re.match(r"^(#{1,6})\s+(.*?)\s*#*\s*$", line)
    return (len(match.group(1)), match.group(2).strip()) if match else None


def insert_in_section(text: str, section: str, addition: str) -> str:
    """``text`` with ``addition`` at the end of the section headed ``section`` (any level,
    compared without case), before the next heading of the same or a higher level; a new
    ``## section`` at the end when there is none."""
    lines = text.splitlines(keepends=True)
    wanted = section.strip().lstrip("#").strip().lower()
    start = level = None
    for number, line in enumerate(lines):
        found = _heading(line.rstrip("\n"))
        if found and found[1].lower() == wanted:
            start, level = number, found[0]
            break
    block = addition if addition.endswith("\n") else addition + "\n"
    if start is None:
        prefix = text if not text or text.endswith("\n") else text + "\n"
        gap = "\n" if prefix.strip() else ""
        return f"{prefix}{gap}## {section.strip().lstrip('#').strip()}\n\n{block}"
    end = len(lines)
    for number in range(start + 1, len(lines)):
        found = _heading(lines[number].rstrip("\n"))
        if found and found[0] <= (level or 6):
            end = number
            break
    body = lines[:end]
    while len(body) > start + 1 and not body[-1].strip():
        body.pop()  # the new lines follow the section's last text, the blank line before the next heading stays
    if body and not body[-1].endswith("\n"):
        body[-1] += "\n"
    rest = lines[end:]
    separator = ["\n"] if rest else []
    return "".join(body) + block + "".join(separator) + "".join(rest)


def append(workspace: Path, rel: str, text: str, section: str | None, privacy: Privacy,
           writable: tuple[str, ...]) -> None:
    """Append ``text`` to ``rel`` (a section of it when ``section`` is given)."""
    if not text.strip():
        raise AppendError("nothing to append: the text is empty")
    if len(text) > MAX_APPEND_CHARS:
        raise AppendError(f"the text is {len(text)} characters; at most {MAX_APPEND_CHARS} are appended at once")
    if "\0" in text:
        raise AppendError("the text holds a NUL character")
    if privacy.hides(rel):
        raise AppendError(f"{rel} is not available in {privacy.mode} mode")
    if privacy.shared and not any(rel == w.rstrip("/") or rel.startswith(w.rstrip("/") + "/") for w in writable):
        raise AppendError(f"{privacy.mode} mode may not change {rel} (privacy.shared_writable)")
    real = resolve_within(workspace, rel)
    if real is None or (privacy.shared and privacy.hides(real)):
        raise AppendError(f"{rel} leads out of the workspace or to a private file")
    path = workspace / real
    path.parent.mkdir(parents=True, exist_ok=True)
    if section is None:
        with open(path, "ab") as out:
            previous = out.tell()
            needs_newline = False
            if previous:
                with open(path, "rb") as existing:
                    existing.seek(previous - 1)
                    needs_newline = existing.read(1) != b"\n"
            out.write((("\n" if needs_newline else "") + text + ("" if text.endswith("\n") else "\n")).encode())
            out.flush()
            os.fsync(out.fileno())
        return
    try:
        old = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        old = ""
    except UnicodeDecodeError:
        raise AppendError(f"{rel} is not valid UTF-8: edit it by hand first") from None
    new = insert_in_section(old, section, text)
    mode = path.stat().st_mode & 0o7777 if path.exists() else 0o644
    handle, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(new)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
