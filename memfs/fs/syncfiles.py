"""What is written into ``clawgpt-memory/`` on the mount: held per open file ("staged") and
validated as ``write()`` receives it, stored as sync messages when the file is flushed.

The messages of the lines judged are kept with the staged bytes, so at flush they are stored
without being parsed again.  Each write is judged as soon as it completes something: every complete JSONL line, a last line
without its newline once it is complete JSON, a whole ``[CLAWGPT-SYNC]`` envelope once it is.
An envelope is read write by write (its scan kept with the handle) and parsed once complete, so
what one write costs is bounded by the write and the bounds on a message and an envelope
(``sync.max_message_kb``, ``sync.max_envelope_mb``: a write that passes them fails at once), not
by how much was written before it.
A bad one fails that very ``write()`` with EINVAL (so ``echo >>`` and ``printf >`` report it):
appended bytes go with the line they belong to, a rewrite of staged bytes is undone whole, and
the lines accepted before stay, to be stored at flush.
"""

from __future__ import annotations

import errno
import logging
from typing import Any

from pyfuse3 import FUSEError

from memfs.memory import Memory, SyncError

log = logging.getLogger(__name__)


def stage(handle: Any, off: int, buf: bytes, memory: Memory) -> int:
    """Take one write() into the handle's staged bytes, or refuse it whole."""
    staged = handle.staged
    start = off - handle.staged_base
    if start < 0:
        log.warning("refused: overwriting synced messages in %s at offset %d", handle.path, off)
        raise FUSEError(errno.EPERM)
    before: tuple[bytes, int, int] | None = None
    if start >= len(staged):
        # Sync files are append-only: a gap only means the kernel's idea of the size was stale
        # (memfs appends canonical lines itself), so the bytes simply follow.
        staged.extend(buf)
    else:
        before = (bytes(staged), handle.checked, handle.checked_lines, handle.parsed)
        staged[start : start + len(buf)] = buf
        handle.scan = None  # bytes read before may have changed: an envelope is read again
        if start < handle.checked:  # rewriting checked lines: check them again
            handle.checked = staged.rfind(b"\n", 0, start) + 1
            handle.checked_lines = staged.count(b"\n", 0, handle.checked)
            handle.parsed = None  # which messages went with those lines is not kept: parsed at flush
    try:
        _check(handle, memory)
    except SyncError as exc:
        log.warning("refused sync write to %s: %s", handle.path, exc)
        handle.scan = None
        if before is not None:
            staged[:] = before[0]
            handle.checked, handle.checked_lines, handle.parsed = before[1], before[2], before[3]
        else:
            del staged[handle.checked :]  # the bad line, with its head from earlier writes
        raise FUSEError(errno.EINVAL) from None
    return len(buf)


def _check(handle: Any, memory: Memory) -> None:
    staged = handle.staged
    if memory.sync_is_envelope(bytes(staged[:256])):
        # Each write reads its own bytes of the envelope; all of it is parsed once it is complete.
        if handle.scan is None:
            handle.scan = memory.envelope_scan()
        memory.check_sync_unfinished(staged, handle.path, scan=handle.scan)
        return
    end = staged.rfind(b"\n") + 1
    if end > handle.checked:
        found = memory.parse_sync(bytes(staged[handle.checked : end]), handle.path, handle.checked_lines + 1)
        if handle.parsed is not None:
            handle.parsed.extend(found)
        handle.checked_lines += staged.count(b"\n", handle.checked, end)
        handle.checked = end
    if end < len(staged):
        memory.check_sync_unfinished(bytes(staged[end:]), handle.path, handle.checked_lines + 1)


def truncate(handle: Any, size: int) -> None:
    """ftruncate of a staged file to ``size`` bytes (at least what it had when opened)."""
    keep = size - handle.staged_base
    del handle.staged[keep:]
    handle.scan = None
    if keep < handle.checked:  # lines cut off must be checked again when rewritten
        handle.checked = handle.staged.rfind(b"\n", 0, keep) + 1
        handle.checked_lines = handle.staged.count(b"\n", 0, handle.checked)
        handle.parsed = None
