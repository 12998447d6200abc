"""The commands that bring agent runtimes in: ``import`` (their sessions and chat exports into the
workspace), ``connect`` (their MCP entry, hooks and instruction file) and ``hook`` (what those
hooks run; its quick path skips click: :mod:`memfs.capture.hookrun`)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import click

from memfs.cli.app import (
    _answerer,
    _bar,
    _config,
    _daemon_progress,
    _options,
    global_options,
    main,
)

IMPORT_NAMES = ("claude-code", "codex", "gemini", "aider", "chatgpt", "claude")


@main.command("import")
@click.argument("runtime", type=click.Choice(IMPORT_NAMES))
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print what was imported as JSON.")
@click.option("--no-index", is_flag=True,
              help="Write the session files only (a mount indexes them as they are written; else `memfs index` "
                   "or a running daemon does).")
@global_options
def import_(runtime: str, paths: tuple[Path, ...], as_json: bool, no_index: bool, **opts: Any) -> None:
    """Import RUNTIME's sessions into the workspace's sessions/ folder, where they are indexed.

    \b
    PATH: a session file or a folder of them; with none, the runtime's own folder
    (~/.claude/projects, ~/.codex/sessions, ~/.gemini/tmp; for aider, the .aider.chat.history.md
    files in and below the current folder).  chatgpt and claude take the data export:
    conversations.json, or the zip it came in.  Importing again adds only what is new."""
    from memfs.capture import importer, sources, target
    from memfs.capture.writer import SessionWriter

    cfg = _config(opts)
    if not cfg.workspace.is_dir():
        raise click.ClickException(f"workspace {cfg.workspace} does not exist: create it with `memfs init "
                                   f"{cfg.workspace}` or pass --workspace")
    if cfg.mode != "main":
        raise click.ClickException(f"sessions/ is private: import in the main mode, not {cfg.mode!r}")
    root, mount = target.write_root(cfg)
    writer = SessionWriter(cfg.workspace, root, target.lock_dir(cfg))
    bar, done = _bar("importing")
    try:
        report = importer.run(sources.NAMES[runtime], list(paths), Path.cwd(), writer, progress=bar)
    except sources.NoSource as exc:
        raise click.ClickException(str(exc)) from None
    except importer.WriteFailed as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        done()
    if report.failed and not report.sessions and not report.empty:
        raise click.ClickException(report.summary().replace("imported 0 sessions, 0 messages new, 0 already there; ",
                                                            "nothing imported: "))
    indexed: dict[str, Any] = {}
    if report.written and not no_index:
        indexed = _index_after(opts, mount)
    if as_json:
        click.echo(json.dumps({**report.as_json(), "index": indexed}, ensure_ascii=False))
        return
    click.echo(report.summary())
    if indexed.get("line"):
        click.echo(indexed["line"], err=True)


def _index_after(opts: dict[str, Any], mount: Path | None) -> dict[str, Any]:
    """Have what was written indexed: a mount did it as each file closed; else the daemon that
    serves the workspace (started on demand as for `memfs index`), else this process."""
    if mount is not None:
        return {"by": f"the mount on {mount}", "line": f"indexed by the mount on {mount} as they were written; "
                                                        "`memfs status` shows what still waits for a vector"}
    args = {"json": True}
    with _answerer(opts) as answerer:
        bar, done = _bar("embedding", rate=True)
        with _daemon_progress(answerer, bar):
            answer = answerer.remote("index", args)
        done()
        by = f"the daemon with pid {answerer.client.daemon_pid}" if answer is not None else "this process"
        if answer is None:
            from memfs import commands

            memory, cfg = answerer.local()
            files_bar, files_done = _bar("reading files")
            embed_bar, embed_done = _bar("embedding", rate=True)
            answer = commands.index(memory, cfg, args, files_bar, embed_bar)
            files_done()
            embed_done()
    if answer.error is not None:
        return {"by": by, "error": answer.error, "line": f"warning: indexing failed: {answer.error} (run `memfs index`)"}
    info = json.loads(answer.stdout)
    status = info.get("status", {})
    summary = info.get("summary", {})
    line = (f"indexed by {by}: {summary.get('indexed', 0)} file(s); {status.get('files', 0)} files, "
            f"{status.get('chunks', 0)} chunks, {status.get('pending', 0)} pending")
    return {"by": by, "summary": summary, "line": line}


@main.command()
@click.argument("runtime", type=click.Choice(("claude-code", "codex", "gemini")))
@click.argument("event")
@click.argument("payload", required=False)
@global_options
def hook(runtime: str, event: str, payload: str | None, **opts: Any) -> None:
    """What a runtime's hook runs (`memfs connect` sets it up); the runtime's JSON on stdin.

    \b
    claude-code  SessionStart, UserPromptSubmit, PreCompact, Stop, SubagentStop, SessionEnd
    codex        SessionStart, UserPromptSubmit, PreCompact, Stop, notify (its JSON as PAYLOAD)
    gemini       SessionStart, BeforeAgent, PreCompress, AfterAgent, SessionEnd
    Session start: the context bundle as added context; a prompt: what memory holds on it
    (recall.on_prompt); the others: the transcript's new part into the workspace.  Always exits
    0 within a second, printing nothing but that context; problems show in `memfs status`."""
    from memfs.capture.hookrun import main as run

    merged = _options(opts)
    argv = [runtime, event, *([payload] if payload else [])]
    for flag, key in (("--workspace", "workspace"), ("--agent", "agent"), ("--mode", "mode"), ("--config", "config_file")):
        if merged.get(key) is not None:
            argv += [flag, str(merged[key])]
    for override in merged.get("overrides") or ():
        argv += ["--set", override]
    if merged.get("no_daemon"):
        argv.append("--no-daemon")
    run(argv)


CONNECT_NEXT = {
    "claude-code": "Restart Claude Code (or start a new session) to load them; a project's .mcp.json is used once "
                   "you approve it.",
    "codex": "Codex runs hooks only once you trust them: open /hooks in Codex and trust memfs's; notify (turn "
             "ends) runs without that. Restart Codex to load the MCP server.",
    "gemini": "Restart Gemini CLI to load them.",
}


@main.command()
@click.argument("runtime", type=click.Choice(("claude-code", "codex", "gemini")))
@click.option("--project", type=click.Path(file_okay=False, exists=True, path_type=Path), default=None,
              help="Connect this project only (its .mcp.json / .claude/, .codex/, .gemini/ and CLAUDE.md, AGENTS.md, "
                   "GEMINI.md) instead of your user-wide settings.")
@click.option("--dry-run", is_flag=True, help="Print what would change, as a unified diff; write nothing.")
@click.option("--remove", is_flag=True, help="Take out what connect added (files it made are deleted).")
@global_options
def connect(runtime: str, project: Path | None, dry_run: bool, remove: bool, **opts: Any) -> None:
    """Wire RUNTIME to the workspace: its MCP server entry, its hooks (`memfs hook`: the context at
    session start, the transcript saved before compaction and after each turn) and a note in its
    instruction file telling the model how to use memory.  Merged into your files, changing nothing
    else; a backup of each is kept once (FILE.bak-memfs); running it again changes nothing."""
    from memfs.capture import connect as wiring
    from memfs.capture.target import mount_of

    cfg = _config(opts)
    if not remove and not cfg.workspace.is_dir():
        raise click.ClickException(f"workspace {cfg.workspace} does not exist: create it with `memfs init "
                                   f"{cfg.workspace}` or pass --workspace")
    target = wiring.Target(runtime, cfg.workspace, cfg.agent, cfg.mode,
                           project=project.resolve() if project else None, env=dict(os.environ),
                           mount=mount_of(cfg) if not remove else None)
    try:
        changes = wiring.plan(target, remove)
    except wiring.ConnectError as exc:
        raise click.ClickException(f"{exc} (nothing was changed)") from None
    if dry_run:
        diffs = "".join(c.diff() for c in changes if c.changed)
        click.echo(diffs, nl=False)
        if not diffs:
            click.echo("nothing to change", err=True)
        return
    for line in wiring.apply(changes, remove):
        click.echo(line)
    if not remove and any(c.changed for c in changes):
        click.echo(CONNECT_NEXT[runtime])
