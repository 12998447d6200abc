"""Appending Markdown for agents that cannot write files (the MCP tool ``memory_append``): to
today's daily log, or to the end of a ``## section`` of MEMORY.md (created when missing only if
the caller asks: a mistyped name must not start a stray section).

A daily log only grows (an append, like ``echo >>``); MEMORY.md is rewritten whole, through a
temporary file renamed over it, so a reader sees the old text or the new, never half.  The caller
(``Memory.append``) indexes the file afterwards, as a write on the mount would be.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import stat
import threading
from pathlib import Path

from memfs.privacy import Privacy, resolve_within
from memfs.replacing import staged_replacement

MAX_APPEND_CHARS = 100_000


class AppendError(ValueError):
    """Why nothing was appended."""


def _heading(line: str) -> tuple[int, str] | None:
    # A closing run of #s counts only after a space (CommonMark): "## C#" is the section "C#".
    match = re.match(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$", line)
    return (len(match.group(1)), match.group(2).strip()) if match else None


def _headings(lines: list[str]) -> list[tuple[int, int, str]]:
    """(line index, level, title) of the Markdown headings, skipping fenced code blocks."""
    found, fence = [], ""
    for number, line in enumerate(lines):
        stripped = line.strip()
        marker = re.match(r"^(`{3,}|~{3,})", stripped)
        if marker:
            if not fence:
                fence = marker.group(1)
            elif stripped.startswith(fence[0] * len(fence)) and not stripped.strip(fence[0]):
                fence = ""
            continue
        if not fence and (heading := _heading(line.rstrip("\n"))):
            found.append((number, *heading))
    return found


class NoSuchSection(AppendError):
    """The section asked for is not there, and creating it was not asked for."""


def section_names(text: str) -> list[str]:
    """The titles of ``text``'s sections (headings below the top level, or all of them when
    there are only top-level ones), in order, each once."""
    headings = _headings(text.splitlines(keepends=True))
    below = [title for _, level, title in headings if level > 1] or [title for _, _, title in headings]
    return list(dict.fromkeys(below))


def insert_in_section(text: str, section: str, addition: str, create: bool = True) -> str:
    """``text`` with ``addition`` at the end of the section headed ``section`` (any level,
    compared without case), before the next heading of the same or a higher level; a new
    ``## section`` at the end when there is none and ``create`` (NoSuchSection otherwise)."""
    lines = text.splitlines(keepends=True)
    wanted = section.strip().lstrip("#").strip()
    headings = _headings(lines)
    match = next(((n, level) for n, level, title in headings if title.lower() == wanted.lower()), None)
    block = addition if addition.endswith("\n") else addition + "\n"
    if match is None and not create:
        names = section_names(text)
        have = ("its sections are " + ", ".join(repr(n) for n in names)) if names else "it has no sections yet"
        raise NoSuchSection(f"no section {wanted!r}: {have}; name one of them, or ask for the section to be "
                            "created")
    if match is None:
        prefix = text if not text or text.endswith("\n") else text + "\n"
        gap = "\n" if prefix.strip() else ""
        return f"{prefix}{gap}## {wanted}\n\n{block}"
    start, level = match
    end = next((n for n, other, _ in headings if n > start and other <= level), len(lines))
    body = lines[:end]
    while len(body) > start + 1 and not body[-1].strip():
        body.pop()  # the new lines follow the section's last text, the blank line before the next heading stays
    if body and not body[-1].endswith("\n"):
        body[-1] += "\n"
    rest = lines[end:]
    separator = ["\n"] if rest else []
    return "".join(body) + block + "".join(separator) + "".join(rest)


def daily_entry(text: str, moment: dt.datetime) -> str:
    """``text`` as a daily log entry: under a ``## HH:MM - topic`` heading (AGENTS.md's form),
    so it does not run into the entry before it; several lines give their first as the topic.
    Text that brings its own heading is kept as it is."""
    if text.lstrip().startswith("#"):
        return text
    lines = text.strip().splitlines()
    if len(lines) > 1 and len(lines[0]) <= 80:
        return f"\n## {moment:%H:%M} - {lines[0].strip()}\n\n" + "\n".join(lines[1:]).strip() + "\n"
    return f"\n## {moment:%H:%M} - note\n\n{text.strip()}\n" if lines else text


_rewrite_lock = threading.Lock()  # one section append at a time in this process (MCP tools run in threads)


def _check_section(section: str) -> None:
    if not section.strip().lstrip("#").strip():
        raise AppendError("the section name is empty")
    if any(ord(c) < 32 for c in section) or len(section) > 200:
        raise AppendError("a section name is one line of at most 200 characters")


def append(workspace: Path, rel: str, text: str, section: str | None, privacy: Privacy,
           writable: tuple[str, ...], create_section: bool = False) -> None:
    """Append ``text`` to ``rel`` (a section of it when ``section`` is given, which must exist
    unless ``create_section``)."""
    if not text.strip():
        raise AppendError("nothing to append: the text is empty")
    if len(text) > MAX_APPEND_CHARS:
        raise AppendError(f"the text is {len(text)} characters; at most {MAX_APPEND_CHARS} are appended at once")
    if "\0" in text:
        raise AppendError("the text holds a NUL character")
    if section is not None:
        _check_section(section)

    def may_write(path: str) -> bool:
        return not privacy.shared or any(path == w.rstrip("/") or path.startswith(w.rstrip("/") + "/")
                                         for w in writable)

    if privacy.hides(rel):
        raise AppendError(f"{rel} is not available in {privacy.mode} mode")
    if not may_write(rel):
        raise AppendError(f"{privacy.mode} mode may not change {rel} (privacy.shared_writable)")
    real = resolve_within(workspace, rel)
    # Where a link leads counts as much as its name: a shared writer may not reach a private
    # or unwritable file through a symlink in a folder it may write.
    if real is None or privacy.hides(real) or not may_write(real):
        raise AppendError(f"{rel} leads out of the workspace, or to a file {privacy.mode} mode may not change")
    path = workspace / real
    path.parent.mkdir(parents=True, exist_ok=True)
    if section is None:
        _append_to(path, text, privacy.shared)
    else:
        _append_to_section(path, rel, section, text, create_section)


def _append_to(path: Path, text: str, shared: bool) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise AppendError(f"{path.name} is not a regular file")
        if shared and st.st_nlink > 1:  # a hard link may be another name of a private file
            raise AppendError(f"{path.name} has more than one name; shared mode does not write to it")
        needs_newline = False
        if st.st_size:
            with open(path, "rb") as existing:
                existing.seek(st.st_size - 1)
                needs_newline = existing.read(1) != b"\n"
        data = ("\n" if needs_newline else "") + text + ("" if text.endswith("\n") else "\n")
        os.write(fd, data.encode())
        os.fsync(fd)
    finally:
        os.close(fd)


def _append_to_section(path: Path, rel: str, section: str, text: str, create: bool) -> None:
    """Rewrite ``path`` whole with ``text`` at the end of ``section``: through a temporary file
    renamed over it, keeping its line endings, mode and owner, and only if nobody changed it
    meanwhile (an editor on the mount, another client): then it is read again."""
    with _rewrite_lock:
        for _ in range(5):
            try:
                raw = path.read_bytes()
                before = path.stat()
            except FileNotFoundError:
                raw, before = b"", None
            try:
                old = raw.decode("utf-8")
            except UnicodeDecodeError:
                raise AppendError(f"{rel} is not valid UTF-8: edit it by hand first") from None
            crlf = "\r\n" in old
            try:
                new = insert_in_section(old.replace("\r\n", "\n"), section, text.replace("\r\n", "\n"), create)
            except NoSuchSection as exc:
                raise NoSuchSection(f"{rel} has {exc}") from None
            if crlf:
                new = new.replace("\n", "\r\n")
            temp = staged_replacement(path, new.encode("utf-8"), before)
            try:
                try:
                    now = path.stat()
                except FileNotFoundError:
                    now = None
                same = (before is None and now is None) or (
                    before is not None and now is not None
                    and (now.st_ino, now.st_size, now.st_mtime_ns) == (before.st_ino, before.st_size, before.st_mtime_ns))
                if not same:
                    continue  # changed while this was written: start again from what is there now
                os.replace(temp, path)
                return
            finally:
                temp.unlink(missing_ok=True)
        raise AppendError(f"{rel} kept changing while the text was being added; nothing was written, try again")
