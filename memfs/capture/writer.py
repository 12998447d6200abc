"""Writing a decoded session into the workspace: a new file, or what an existing one lacks.

A session file is only ever appended to, in one ``write()`` per session, so the index takes each
change as an append (new lines indexed, the old ones kept) and a reader never sees half a line
of ours.  Which messages are new is told by the ids the file holds, so importing a session twice,
or capturing it after every turn, adds each message once.  Two writers of one session (a hook
fired twice, an import beside a hook) take turns on a lock in the state folder.

Files are read from the workspace and written through ``write_root``: the workspace itself, or a
mount of it, which indexes what is written there when it is closed.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import fcntl
import hashlib
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from memfs.capture import layout
from memfs.index.text.transcripts import AIDER, Session

LOCK_WAIT_S = 30.0


@dataclass
class Written:
    rel: str  # the session file, relative to the workspace
    created: bool
    new: int  # messages appended
    already: int  # messages the file held already


class SessionWriter:
    def __init__(self, workspace: Path, write_root: Path, lock_dir: Path) -> None:
        self.workspace = workspace
        self.write_root = write_root
        self.lock_dir = lock_dir
        self._names: dict[str, dict[str, str]] = {}  # runtime -> id slug -> rel path

    def session_id(self, runtime: str, session: Session, source: Path) -> str:
        """The session's id for its file: the runtime's own; an aider history numbers its
        sessions by line, so the history file's path is part of it; a file with no id is
        named by its path."""
        where = hashlib.sha256(str(source).encode()).hexdigest()[:10]
        if runtime == AIDER:
            return f"{where}-{session.id.rsplit(':', 1)[-1]}"
        return session.id or f"{source.stem}-{where}"

    def _known(self, runtime: str) -> dict[str, str]:
        """The session files there are for ``runtime``, by the id slug in their names (read once)."""
        if runtime not in self._names:
            found: dict[str, str] = {}
            base = self.workspace / layout.SESSIONS / runtime
            try:
                projects = sorted(p for p in os.listdir(base) if not p.startswith("."))
            except OSError:
                projects = []
            for project in projects:
                try:
                    names = sorted(os.listdir(base / project))
                except OSError:
                    continue
                for name in names:
                    slug = layout.slug_of_name(name)
                    if slug is not None:
                        found.setdefault(slug, f"{layout.SESSIONS}/{runtime}/{project}/{name}")
            self._names[runtime] = found
        return self._names[runtime]

    def where(self, runtime: str, session: Session, source: Path) -> tuple[str, str]:
        """(session id, its file relative to the workspace): the file it has, else a new name."""
        session_id = self.session_id(runtime, session, source)
        slug = layout.id_slug(session_id)
        rel = self._known(runtime).get(slug)
        if rel is None:
            try:
                fallback = dt.datetime.fromtimestamp(source.stat().st_mtime, dt.UTC)
            except OSError:
                fallback = dt.datetime.now(dt.UTC)
            rel = f"{layout.folder(runtime, session.project)}/{layout.file_name(session.started, slug, fallback)}"
        return session_id, rel

    def write(self, runtime: str, session: Session, source: Path) -> Written:
        """Append what the session file lacks (creating it): the messages it does not hold, and
        the part a message it holds grew by since (a response captured while it was being
        written), under the message's id with ``~+`` and where the part starts."""
        session_id, rel = self.where(runtime, session, source)
        messages = layout.unique_ids(session.messages)
        with self._lock(rel):
            existing = self.workspace / rel
            held = layout.Held.read(existing) if existing.exists() else None
            chunks: list[bytes] = []
            if held is None:
                if not messages:
                    return Written(rel, False, 0, 0)
                chunks.append(layout.header(runtime, session_id, session, str(source)))
            elif not held.complete:
                chunks.append(b"\n")  # a write of ours that broke off: its line stays bad, apart
            fresh = []
            for m, ident in messages:
                part = m.text if held is None else held.missing(ident, m.text)
                if part is None:
                    continue
                if held is not None and ident in held.texts:  # it grew: only what is new, under its own id
                    fresh.append(layout.message(m, f"{ident}{layout.GREW}{len(held.texts[ident])}", part))
                else:
                    fresh.append(layout.message(m, ident))
            chunks += fresh
            if held is not None and session.title and session.title != held.title:
                chunks.append(layout.title_line(session.title))
            if chunks:
                self._append(rel, b"".join(chunks), created=held is None)
            self._known(runtime)[layout.id_slug(session_id)] = rel
            return Written(rel, held is None, len(fresh), len(messages) - len(fresh))

    def _append(self, rel: str, data: bytes, created: bool) -> None:
        target = self.write_root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_EXCL if created else 0)
        fd = os.open(target, flags, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
        finally:
            os.close(fd)

    @contextlib.contextmanager
    def _lock(self, rel: str) -> Iterator[None]:
        self.lock_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        name = hashlib.sha256(f"{self.workspace}\0{rel}".encode()).hexdigest()[:24]
        with open(self.lock_dir / f"{name}.lock", "a") as lock:
            deadline = time.monotonic() + LOCK_WAIT_S
            while True:
                try:
                    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"another writer holds {rel} for more than {LOCK_WAIT_S:g} s") from None
                    time.sleep(0.02)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)
