"""What each CLI command that reads or feeds the memory answers, as text: ``search``, ``get``,
``context``, ``status``, ``sync`` and ``index`` (and ``append``, the MCP server's; ``hook``, what
a runtime's hook asks, answered in :mod:`memfs.capture.answering`).

The CLI runs these in its own process when no daemon serves the workspace, and a daemon runs the
very same functions for a client (:mod:`memfs.serve.server`), so the bytes printed are the same
either way.  Each takes the caller's settled configuration (its mode above all: a daemon of a
main mount may answer a shared-mode command, and must answer it as shared) and returns an
:class:`Answer`; nothing here prints or exits.
"""

from __future__ import annotations

import base64
import json
import os
from pathlib import Path
from typing import Any

from memfs import longpath
from memfs.config import Config
from memfs.memory import (
    CLI,
    MCP,
    AppendError,
    BadOption,
    Forgotten,
    GetError,
    Memory,
    NotAllowed,
    NotReadable,
    Progress,
    Provenance,
    SyncError,
    UnknownMode,
    Version,
    VersionsError,
    parse_options,
)
from memfs.mounttable import live_record, memfs_mount_containing
from memfs.render.results import render_json, render_markdown
from memfs.render.status import render_status
from memfs.serve.listing import serving
from memfs.serve.wire import Answer
from memfs.sync.protocol import PREFIX
from memfs.userdirs import trusted_state_dir

SEARCH_OPTIONS = ("n", "min", "in", "after", "before", "mmr", "decay")
INDEX_BATCH = 32  # passages embedded per take of the embedding lock by `memfs index`


def _bad_text(**fields: object) -> str | None:
    """A NUL in a path, query or name: refused with a message rather than failing deep inside."""
    for name, value in fields.items():
        if isinstance(value, str) and "\0" in value:
            return f"the {name} holds a NUL character"
    return None


def search(memory: Memory, cfg: Config, args: dict[str, Any]) -> Answer:
    """``args``: query, json, the raw options (n, min, in, after, before, mmr, decay), ``line``
    when the query is one line of ``memfs search -`` (a blank one is answered too), and
    ``agents``: other agents to search as well (``--agent`` given more than once)."""
    given = {k: str(v) for k, v in (args.get("options") or {}).items() if k in SEARCH_OPTIONS and v is not None}
    try:
        options = parse_options(given)
    except BadOption as exc:
        return Answer(error=str(exc), usage=True)
    query = str(args.get("query", ""))
    if problem := _bad_text(query=query):
        return Answer(error=problem)
    if not args.get("line") and not query.strip():
        return Answer(error="the query is empty", usage=True)
    agents = args.get("agents") or []
    if not isinstance(agents, list) or not all(isinstance(a, str) for a in agents):
        return Answer(error="agents must be a list of agent names", usage=True)
    try:
        response = memory.search(query, options=options, mode=cfg.mode, agents=tuple(agents))
    except NotReadable as exc:
        return Answer(error=str(exc))
    rendered = render_json(response) if args.get("json") else render_markdown(response)
    # The search file's bytes, and (the index's server away) a non-zero exit saying why.
    return Answer(stdout=rendered, error=response.unavailable or None)


def _caller_folder(cfg: Config, cwd: str) -> tuple[Path, Path | None]:
    """The caller's folder on the workspace's side, and the mount it stands in (if any)."""
    here = Path(cwd).resolve()
    point = memfs_mount_containing(here)
    if point is not None:  # inside a mount of this workspace: the same folder in the workspace
        record = live_record(trusted_state_dir(), point)
        if record is not None and Path(record.workspace) == cfg.workspace:
            return cfg.workspace / here.relative_to(point), point
    return here, None


def _workspace_path(cfg: Config, path: str, cwd: str) -> str:
    """``path`` as given, unless it only exists relative to the caller's folder inside the
    workspace (``cd memory; memfs get 2026-11-22.md``)."""
    here, point = _caller_folder(cfg, cwd)
    if point is not None and os.path.isabs(path) and (path == str(point) or path.startswith(str(point).rstrip("/") + "/")):
        return str(cfg.workspace / os.path.relpath(path, point))
    if os.path.isabs(path) or longpath.exists(cfg.workspace / path):  # a memory file may be past PATH_MAX
        return path
    if (here == cfg.workspace or cfg.workspace in here.parents) and longpath.exists(here / path):
        return str(here / path)
    return path


def get(memory: Memory, cfg: Config, args: dict[str, Any], cwd: str) -> Answer:
    if problem := _bad_text(path=args.get("path")):
        return Answer(error=problem)
    try:
        result = memory.get(_workspace_path(cfg, str(args["path"]), cwd), int(args.get("from_line") or 1),
                            args.get("lines"), mode=cfg.mode, messages=bool(args.get("messages")))
    except GetError as exc:
        return Answer(error=str(exc))
    if args.get("json"):
        return Answer(stdout=json.dumps(result.as_dict(), ensure_ascii=False) + "\n")
    stderr = f"[memfs: {result.warning}]\n" if result.warning else ""
    if result.next_from is not None:
        stderr += (f"[memfs: lines {result.from_line}-{result.to_line} of {result.total_lines}; continue with "
                  f"memfs get {result.path} --from {result.next_from}]\n")
    return Answer(stdout=result.text, stderr=stderr)


def status(memory: Memory, cfg: Config, args: dict[str, Any]) -> Answer:
    info = memory.status(mode=cfg.mode)
    # Which processes serve the workspace (mounts, daemons): names and pids only, for any mode.
    info["processes"] = serving(trusted_state_dir(), cfg.workspace, cfg.agent)
    if cfg.mode == "main":  # what the runtimes' hooks did last (their problems name sessions)
        from memfs.capture import hookstate

        if hooks := hookstate.summary(cfg):
            info["hooks"] = hooks
    if args.get("json"):
        return Answer(stdout=json.dumps(info) + "\n")
    stderr = ""
    if not info["indexed"]:
        stderr = f"warning: this workspace has not been indexed yet for agent {cfg.agent}: run `memfs index`\n"
    return Answer(stdout=render_status(info, bar=bool(args.get("tty"))), stderr=stderr)


def context(memory: Memory, cfg: Config, args: dict[str, Any]) -> Answer:
    bundle_mode = str(args.get("mode") or cfg.mode).strip().lower()
    try:
        return Answer(stdout=memory.bundle(bundle_mode, viewer=cfg.mode))
    except (UnknownMode, NotAllowed) as exc:
        return Answer(error=str(exc))


def sync(memory: Memory, cfg: Config, args: dict[str, Any]) -> Answer:
    """``args``: data (base64 of what stdin held), json."""
    data = base64.b64decode(args.get("data") or b"")
    if not data.strip():
        return Answer(error="no sync message on stdin (expected a [CLAWGPT-SYNC] message or JSONL lines)")
    # One sync is bounded whatever its form (JSONL lines too): an import larger than that goes
    # into clawgpt-memory/ on a mount, where only each line is.
    if problem := memory.sync_limits.envelope_problem(len(data), "a sync message on stdin"):
        return Answer(error=f"sync message rejected: {problem}")
    head = data.lstrip(b"\xef\xbb\xbf").lstrip()
    if not memory.sync_is_envelope(data) and head.startswith(b"{") and b'"messages"' in head.split(b"\n", 1)[0]:
        return Answer(error=f"not a {PREFIX} message: an envelope starts with {PREFIX}, then its JSON")
    if not memory.sync_is_envelope(data) and not head.startswith(b"{"):
        return Answer(error=f"not a {PREFIX} message: it must start with {PREFIX} followed by the JSON "
                            "envelope (or be JSON Lines of messages)")
    try:
        result = memory.ingest_sync(data, "stdin", mode=cfg.mode, who=_caller(args, CLI))
    except SyncError as exc:
        return Answer(error=f"sync message rejected: {exc} (kept under clawgpt-memory/.rejected/)")
    stderr = f"stored {result.stored}, duplicates {result.duplicates}\n"
    if args.get("json"):
        return Answer(stdout=json.dumps({"stored": result.stored, "duplicates": result.duplicates,
                                         "files": result.files}) + "\n", stderr=stderr)
    return Answer(stdout="NO_REPLY\n", stderr=stderr)


def index(memory: Memory, cfg: Config, args: dict[str, Any], files_progress: Progress | None = None,
          embed_progress: Progress | None = None) -> Answer:
    """Reconcile the index with the files and embed what is pending (a rebuild is not this: it
    replaces the index file, which only a process that owns it alone may do)."""
    outcomes = memory.reconcile(files_progress)
    total = memory.pending
    done = 0
    # In batches: each takes the embedding lock briefly, so searches (a mount's search/ files,
    # other clients of a daemon) are answered meanwhile instead of waiting for all of it.
    while embedded := memory.embed_pending(limit=cfg.embedding.texts_per_call(INDEX_BATCH)):
        done += embedded
        if embed_progress:
            embed_progress(done, max(total, done))
    return index_report(memory, cfg, outcomes, bool(args.get("json")))


def index_report(memory: Memory, cfg: Config, outcomes: list, as_json: bool) -> Answer:
    status_info = memory.status(mode=cfg.mode)
    privacy = memory.privacy(cfg.mode)
    quiet = privacy.shared  # a shared caller gets the counts only
    shown = [o for o in outcomes if not privacy.hides(o.path)]
    summary: dict[str, int] = {}
    for outcome in shown:
        summary[outcome.action] = summary.get(outcome.action, 0) + 1
    skipped = [] if quiet else [o for o in shown if o.action == "skipped"]
    warned = [] if quiet else [o for o in shown if o.action == "indexed" and o.reason]
    if as_json:
        return Answer(stdout=json.dumps({
            "summary": summary, "skipped": [{"path": o.path, "reason": o.reason} for o in skipped],
            "warnings": [{"path": o.path, "warning": o.reason} for o in warned], "status": status_info}) + "\n")
    stderr = "".join(f"skipped {o.path}: {o.reason.removeprefix('skipped: ')}\n" for o in skipped)
    stderr += "".join(f"warning: {o.path}: {o.reason}; the rest is indexed\n" for o in warned)
    parts = ", ".join(f"{n} {action}" for action, n in sorted(summary.items())) or "no memory files"
    stdout = (f"{parts}; {status_info['files']} files, {status_info['chunks']} chunks, "
              f"{status_info['pending']} pending\n")
    if status_info["provider_error"]:
        stderr += f"warning: embeddings unavailable: {status_info['provider_error']}\n"
    return Answer(stdout=stdout, stderr=stderr)


def append(memory: Memory, cfg: Config, args: dict[str, Any]) -> Answer:
    """``args``: text, section (a MEMORY.md section; without it, today's daily log),
    create_section (start the section when MEMORY.md has none of that name)."""
    section = args.get("section")
    if problem := _bad_text(section=section):
        return Answer(error=problem)
    try:
        rel = memory.append(str(args.get("text", "")), None if section is None else str(section), mode=cfg.mode,
                            who=_caller(args, MCP), create_section=bool(args.get("create_section")))
    except AppendError as exc:
        return Answer(error=str(exc))
    where = f"section {str(section).strip()!r} of {rel}" if section else rel
    return Answer(stdout=f"appended to {where}\n")


def _caller(args: dict[str, Any], default_via: str) -> Provenance:
    """Who asked, as a version records it: the client process (a daemon answers for another
    process) and its route.  The daemon has already checked that the client is its own user."""
    via = args.get("via") if args.get("via") in (CLI, MCP) else default_via
    pid = args.get("pid") if isinstance(args.get("pid"), int) else os.getpid()
    return Provenance.of_process(str(via), os.getuid(), pid)


HISTORY_FOLDER = "history"  # the mount's virtual root of versions (memfs.fs.virtual.HISTORY)


def _history_path(memory: Memory, cfg: Config, path: str, cwd: str) -> str | Answer:
    """The workspace path whose history is asked for.  Unlike a live file, the one asked about
    may be gone (``rm draft.md; memfs history draft.md``), so a path relative to the caller's
    folder is taken by its letters, not by what exists; inside ``history/`` on a mount, the
    folder of a file's versions stands for the file (``cd history/MEMORY.md; memfs history .``)."""
    from memfs.workspace import OutsideWorkspace, relative

    if problem := _bad_text(path=path):
        return Answer(error=problem)
    candidates: list[str] = []
    here, point = _caller_folder(cfg, cwd)
    if not os.path.isabs(path) and (here == cfg.workspace or cfg.workspace in here.parents):
        rel = os.path.relpath(os.path.normpath(here / path), cfg.workspace)
        folder = "/".join(p for p in (cfg.mount.virtual_prefix.strip("/"), HISTORY_FOLDER) if p)
        if point is not None and rel.startswith(folder + "/"):
            rel = rel[len(folder) + 1 :]
        if rel not in (".", "..", folder) and not rel.startswith("../"):
            candidates.append(rel)
    try:
        candidates.append(relative(cfg.workspace, _workspace_path(cfg, path, cwd)))
    except OutsideWorkspace as exc:
        if not candidates:
            return Answer(error=str(exc))
    versions = memory.versions(cfg.mode)
    for rel in candidates:
        if longpath.exists(cfg.workspace / rel) or rel in versions.paths():
            return rel
    return candidates[0]


def _when(time_ns: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(time_ns / 1e9, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")


def _who(version: Version | Forgotten) -> str:
    if version.process is None and version.pid is None:
        if version.via == "watcher":
            return "changed outside memfs, seen"  # "... via watcher": no process is known
        if version.via == "scan":
            return "changed while nothing watched, found"  # "... via scan" (memfs index, a mount's start)
        return "an unknown process"
    ids = ", ".join(f"{k} {v}" for k, v in (("pid", version.pid), ("uid", version.uid)) if v is not None)
    return f"{version.process or 'a process that had exited'} ({ids})"


def history(memory: Memory, cfg: Config, args: dict[str, Any], cwd: str) -> Answer:
    """``args``: path; versions (0, 1 or 2 names); diff, json, deleted."""
    versions = memory.versions(cfg.mode)
    if args.get("deleted"):
        gone = versions.deleted()
        if args.get("json"):
            return Answer(stdout=json.dumps({"deleted": [{"path": p, "deleted": _iso(t)} for p, t in gone]}) + "\n")
        if not gone:
            return Answer(stdout="no deleted memory files with history\n")
        return Answer(stdout="".join(f"{p}\tdeleted {_when(t)}\n" for p, t in gone))
    if not args.get("path"):
        return Answer(error="name a memory file (memfs history MEMORY.md), or pass --deleted", usage=True)
    rel = _history_path(memory, cfg, str(args["path"]), cwd)
    if isinstance(rel, Answer):
        return rel
    names = [str(n) for n in args.get("versions") or []]
    try:
        if args.get("diff"):
            if len(names) > 2:
                return Answer(error="--diff takes at most two versions: OLDER NEWER", usage=True)
            if not names:
                names = [versions.list(rel)[-1].name]
            older, newer = (names[0], names[1]) if len(names) == 2 else (None, names[0])
            return Answer(stdout=versions.diff(rel, older, newer))
        if len(names) == 1:
            data = versions.content(versions.get(rel, names[0]))
            # Exact bytes, even ones that are not UTF-8: the CLI writes them back undecoded.
            return Answer(stdout=data.decode("utf-8", "surrogateescape"))
        if names:
            return Answer(error="name one version to print it, or two with --diff", usage=True)
        gone = versions.forgotten(rel)
        try:
            found = versions.list(rel)
        except VersionsError:
            if not gone:  # every version of it forgotten: the listing still says so
                raise
            found = []
    except VersionsError as exc:
        return Answer(error=str(exc))
    deleted = versions.deleted_at(rel)
    if args.get("json"):
        return Answer(stdout=json.dumps({"path": rel, "versions": [v.as_json() for v in found],
                                         "deleted": _iso(deleted) if deleted else None,
                                         "forgotten": [f.as_json() for f in gone]}) + "\n")
    width = max(len(v.name) for v in [*found, *gone])
    lines = [f"{rel}: {len(found)} version{'s' if len(found) != 1 else ''}, oldest first"
             + (f"; {len(gone)} forgotten" if gone else "") + (f"; deleted {_when(deleted)}" if deleted else "")]
    rows: list[tuple[int, str]] = [
        (v.id, f"{v.name:<{width}}  {v.size:>9,} B  {_when(v.time_ns)}  {_who(v)} via {v.via}") for v in found]
    rows += [(f.version, f"{f.name:<{width}}  {'forgotten':>11}  {_when(f.forgotten_ns)}  by {_who(f)} via {f.via}")
             for f in gone]
    lines += [line for _, line in sorted(rows)]
    return Answer(stdout="\n".join(lines) + "\n")


def _listing(chosen: list[Version]) -> str:
    """What forgetting takes: paths, names, sizes and times; never a byte of content."""
    files = len({v.path for v in chosen})
    head = (f"{len(chosen)} version{'s' if len(chosen) != 1 else ''} of {files} file{'s' if files != 1 else ''}"
            " to forget (their bytes leave the history for good):\n")
    width = max(len(v.path) for v in chosen)
    return head + "".join(f"  {v.path:<{width}}  {v.name}  {v.size:>9,} B  made {_when(v.time_ns)}\n" for v in chosen)


def _main_only(cfg: Config, cwd: str) -> str:
    """Why a shared caller may not forget, and where the main mode can be had: not inside a
    shared-mode mount (its mode is not left by a flag there), but from any folder outside one,
    naming the workspace."""
    point = memfs_mount_containing(Path(cwd).resolve())
    record = live_record(trusted_state_dir(), point) if point is not None else None
    inside = (f"{cwd} is inside the {record.mode}-mode mount {point}, where the main mode is not available; "
              if record is not None and record.mode != "main" else "")
    return (f"{cfg.mode} mode may not forget versions: only the main mode, which sees every version, may: {inside}"
            f"run it from a folder outside any shared-mode mount with --mode main -w {cfg.workspace}")


def forget(memory: Memory, cfg: Config, args: dict[str, Any], cwd: str) -> Answer:
    """``args``: path and versions (names), or containing (a text); dry: only say what would be
    forgotten (JSON: count, listing), for the CLI to ask before it forgets."""
    text = args.get("containing")
    names = [str(n) for n in args.get("versions") or []]
    path = args.get("path")
    if text is not None and (path or names):
        return Answer(error="forget takes PATH VERSION, or --containing TEXT, not both", usage=True)
    if text is None and (not path or not names):
        return Answer(error="name what to forget: memfs history forget PATH VERSION..., or memfs history forget "
                            "--containing TEXT", usage=True)
    if text is not None and not str(text):
        return Answer(error="--containing needs a text (an empty one is in every version)", usage=True)
    rel: str | None = None
    if path:
        found = _history_path(memory, cfg, str(path), cwd)
        if isinstance(found, Answer):
            return found
        rel = found
    versions = memory.versions(cfg.mode)
    if versions.privacy.shared:
        return Answer(error=_main_only(cfg, cwd))
    try:
        chosen = versions.to_forget(rel, names, None if text is None else str(text))
        if args.get("dry"):
            return Answer(stdout=json.dumps({"count": len(chosen), "listing": _listing(chosen) if chosen else ""}) + "\n")
        done = versions.forget(chosen, _caller(args, CLI), None if text is None else str(text))
    except VersionsError as exc:
        return Answer(error=str(exc))
    if not done.forgotten:
        stdout = "nothing to forget: no kept version of any file contains that text\n"
    else:
        files = len({f.path for f in done.forgotten})
        stdout = (f"forgot {len(done.forgotten)} version{'s' if len(done.forgotten) != 1 else ''} of {files} "
                  f"file{'s' if files != 1 else ''}:\n" + "".join(f"  {f.path}  {f.name}\n" for f in done.forgotten))
    what = "that text" if text is not None else "that content"
    stderr = "".join(f"note: {v.path} {v.name} holds the same bytes and is kept (forget it too, or use --containing)\n"
                     for v in done.still_held)
    stderr += "".join(f"note: {p} holds {what} now: its next version will hold it too\n" for p in done.held_now)
    if done.forgotten:
        stderr += ("note: the search index may still hold old bytes in its free pages: `memfs index --rebuild` "
                   "(with no mount running) writes it anew\n")
    if not done.emptied:
        stderr += ("warning: the history's write-ahead log could not be emptied (another process is reading it): "
                   "run this again when it is done\n")
    return Answer(stdout=stdout, stderr=stderr)


def _iso(time_ns: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(time_ns / 1e9, dt.timezone.utc).isoformat(timespec="microseconds").replace(
        "+00:00", "Z")


def restore(memory: Memory, cfg: Config, args: dict[str, Any], cwd: str) -> Answer:
    """``args``: path, version."""
    rel = _history_path(memory, cfg, str(args.get("path") or ""), cwd)
    if isinstance(rel, Answer):
        return rel
    name = str(args.get("version") or "")
    try:
        restored = memory.versions(cfg.mode).restore(rel, name, _caller(args, CLI))
    except VersionsError as exc:
        return Answer(error=str(exc))
    if restored is None:
        return Answer(stdout=f"{rel} already holds {name}: nothing to restore\n")
    return Answer(stdout=f"restored {rel} to {name}; that is now its newest version, {restored.name}\n")


def run(memory: Memory, cfg: Config, command: str, args: dict[str, Any], cwd: str) -> Answer:
    """One command for a daemon's client."""
    if command == "search":
        return search(memory, cfg, args)
    if command == "get":
        return get(memory, cfg, args, cwd)
    if command == "status":
        return status(memory, cfg, args)
    if command == "context":
        return context(memory, cfg, args)
    if command == "sync":
        return sync(memory, cfg, args)
    if command == "index":
        return index(memory, cfg, args)
    if command == "append":
        return append(memory, cfg, args)
    if command == "history":
        return history(memory, cfg, args, cwd)
    if command == "restore":
        return restore(memory, cfg, args, cwd)
    if command == "forget":
        return forget(memory, cfg, args, cwd)
    if command == "hook":  # what a runtime's hook asks (memfs.capture.hookrun)
        from memfs.capture import answering

        return answering.hook(memory, cfg, args)
    return Answer(error=f"unknown command {command!r}")
