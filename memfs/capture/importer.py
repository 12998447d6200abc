"""``memfs import``: every session of the files found for a runtime into the workspace, with
what was new, what was there already and what could not be read, counted.

Nothing here is fatal but a workspace that cannot be written: a file that is not a session, a
bad record inside one, an export that breaks off, each is counted and named in the report, and
the rest is imported.  Memory stays bounded by one session (one conversation of an export).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from memfs.capture import sources
from memfs.capture.writer import SessionWriter
from memfs.index.text.transcripts import AIDER, CHATGPT, CLAUDE_AI, Stats, UnknownFormat

Progress = Callable[[int, int], None]


class WriteFailed(RuntimeError):
    """The workspace (or its mount) refused a session file: the import stops there."""


@dataclass
class Report:
    runtime: str
    files: int = 0  # files read
    other_files: int = 0  # files in the folders searched that were not this runtime's
    sessions: int = 0  # sessions with messages
    empty: int = 0  # sessions without a message worth keeping
    created: int = 0  # session files made
    new: int = 0  # messages appended
    already: int = 0  # messages the workspace held already
    bytes: int = 0
    bad: dict[str, int] = field(default_factory=dict)  # file -> bad records (lines, conversations)
    failed: dict[str, str] = field(default_factory=dict)  # file -> why nothing of it was read
    written: list[str] = field(default_factory=list)  # session files appended to (workspace-relative)

    def as_json(self) -> dict[str, object]:
        return {"runtime": self.runtime, "files": self.files, "sessions": self.sessions, "empty_sessions": self.empty,
                "session_files_created": self.created, "messages_new": self.new, "messages_already": self.already,
                "bytes": self.bytes, "bad_records": self.bad, "failed": self.failed,
                "other_files": self.other_files, "written": self.written}

    def summary(self) -> str:
        """One line: ``imported 12 sessions, 3,412 messages new, 210 already there; skipped: 2 bad
        lines in X``."""
        line = (f"imported {self.sessions:,} session{'s' if self.sessions != 1 else ''}, {self.new:,} message"
                f"{'s' if self.new != 1 else ''} new, {self.already:,} already there")
        if self.created:
            line += f" ({self.created:,} new session file{'s' if self.created != 1 else ''})"
        skipped = [f"{n:,} bad record{'s' if n != 1 else ''} in {path}" for path, n in self.bad.items()]
        skipped += [f"{path} ({why})" for path, why in self.failed.items()]
        if self.empty:
            skipped.append(f"{self.empty:,} session{'s' if self.empty != 1 else ''} with no message")
        if skipped:
            line += "; skipped: " + ", ".join(skipped)
        return line


def run(runtime: str, paths: list[Path], cwd: Path, writer: SessionWriter, progress: Progress | None = None) -> Report:
    """Import what ``paths`` hold for ``runtime`` (NoSource when there is nothing to read)."""
    found = sources.find(runtime, paths, cwd)
    report = Report(runtime, other_files=found.other)
    total = sum(s.size for s in found.sources) or 1
    done = 0
    written: dict[str, None] = {}
    for source in found.sources:
        report.files += 1
        stats = Stats()
        bad = 0
        try:
            for session, read in sources.sessions(runtime, source, stats):
                bad += session.stats.bad_lines
                if progress:
                    progress(min(done + read, total), total)
                if not session.messages:
                    report.empty += 1
                    continue
                if runtime == AIDER and not session.project:
                    session.project = str(source.path.resolve().parent)  # aider writes where it runs
                # An export says per conversation which service wrote it.
                kind = session.runtime if runtime in (CHATGPT, CLAUDE_AI) else runtime
                try:
                    result = writer.write(kind, session, source.path.resolve())
                except (OSError, TimeoutError) as exc:
                    raise WriteFailed(f"cannot write into the workspace: {exc}") from None
                report.sessions += 1
                report.new += result.new
                report.already += result.already
                report.created += result.created
                if result.new or result.created:
                    written[result.rel] = None
        except (UnknownFormat, OSError, ValueError) as exc:
            report.failed[str(source.path)] = str(exc).replace(f"{source.path}: ", "")
        bad += stats.bad_lines
        if bad:
            report.bad[str(source.path)] = bad
        done += source.size
        report.bytes += source.size
        if progress:
            progress(min(done, total), total)
    report.written = list(written)
    return report
