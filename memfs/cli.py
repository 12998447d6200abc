"""The ``memfs`` command line: the only place that parses argv and prints."""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from memfs.config import Config, ConfigError, load_config, parse_override, trusted_state_dir
from memfs.memory import (BadOption, GetError, IndexBusy, Memory, NotAllowed, SearchOptions, UnknownMode,
                          parse_options)
from memfs.mounttable import live_record, log_file, memfs_mount_containing
from memfs.render.results import render_json, render_markdown
from memfs.render.status import render_status
from memfs.workspace import init_workspace

log = logging.getLogger("memfs")


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s memfs[%(process)d] %(levelname)s %(name)s: %(message)s",
                        stream=sys.stderr)


def global_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """--workspace, --agent, --mode, --config, --set and -v: accepted before the command name
    (``memfs -w ws status``) and after it (``memfs status -w ws``)."""
    options = [
        click.option("--workspace", "-w", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Workspace directory (env MEMFS_WORKSPACE; default: the workspace around the "
                          "current directory, else ~/memfs)."),
        click.option("--agent", "-a", default=None, help="Agent name; each agent has its own index (default main)."),
        click.option("--mode", default=None,
                     help="main (default) sees everything; shared (or any other value) never sees the "
                          "private paths (privacy.private_paths, MEMORY.md by default). Env MEMFS_MODE."),
        click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="TOML config file (env MEMFS_CONFIG; default WORKSPACE/.memfs.toml, then ~/.config/memfs/config.toml)."),
        click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="Override a setting, e.g. --set search.min_score=0.2 (repeatable)."),
        click.option("-v", "--verbose", count=True, help="More log output (-vv for debug)."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def _options(opts: dict[str, Any]) -> dict[str, Any]:
    """A command's global options merged with those given before the command name (the
    command's own win; --set and -v add up)."""
    if opts.get("merged"):
        return opts
    outer: dict[str, Any] = click.get_current_context().find_root().obj or {}
    merged = {**opts, "merged": True}
    for key in ("workspace", "agent", "mode", "config_file"):
        if merged.get(key) is None:
            merged[key] = outer.get(key)
    merged["overrides"] = tuple(outer.get("overrides", ())) + tuple(opts.get("overrides", ()))
    merged["verbose"] = outer.get("verbose", 0) + opts.get("verbose", 0)
    return merged


def _config(opts: dict[str, Any], needs_workspace: bool = True) -> Config:
    """The effective configuration.  A workspace that is (inside) a memfs mount means the
    mount's own workspace, with the agent and the settings it was started with; inside a
    shared-mode mount the mode is shared, whatever is asked."""
    opts = _options(opts)
    _setup_logging(opts["verbose"])
    overrides = [parse_override(o) for o in opts["overrides"]] if opts["overrides"] else []
    mode = opts["mode"]
    start = Path(os.path.expanduser(str(opts["workspace"] or os.environ.get("MEMFS_WORKSPACE") or Path.cwd())))
    point = memfs_mount_containing(start.resolve()) if start.exists() else None
    workspace, agent, config_file = opts["workspace"], opts["agent"], opts["config_file"]
    if point is not None:
        record = live_record(trusted_state_dir(), point)
        if record is None:
            if needs_workspace:
                raise click.ClickException(
                    f"{start} is inside the memfs mount {point}, which has no running daemon recorded in "
                    f"{trusted_state_dir()} (another MEMFS_STATE_DIR?): pass --workspace with the workspace folder")
        else:
            if record.mode != "main":
                if mode is not None and mode.strip().lower() == "main":
                    raise click.ClickException(f"{point} is a shared-mode mount: the main mode is not available in it")
                mode = record.mode
            elif mode is None and "MEMFS_MODE" not in os.environ:
                mode = record.mode
            workspace = Path(record.workspace)
            agent = agent or (None if "MEMFS_AGENT" in os.environ else record.agent)
            config_file = config_file or record.config_file or None
            overrides = [parse_override(o) for o in record.overrides] + overrides
    try:
        cfg = load_config(workspace=workspace, agent=agent, mode=mode, config_file=config_file, overrides=overrides)
    except ConfigError as exc:
        raise click.ClickException(f"config: {exc}") from None
    if cfg.mode != "main":
        # Per-file log lines (a rebuild, a skipped file) would name private files.
        for name in ("memfs.index", "memfs.memory", "memfs.state"):
            logging.getLogger(name).setLevel(logging.ERROR)
    if point is not None and workspace is not None and Path(workspace) != Path(opts["workspace"] or "/nonexistent"):
        cfg.sources["workspace"] = f"the mount {point}"
    return cfg


def _memory(cfg: Config, must_exist: bool = True) -> Memory:
    if must_exist and not cfg.workspace.is_dir():
        raise click.ClickException(
            f"workspace {cfg.workspace} does not exist: create it with `memfs init {cfg.workspace}` "
            "or pass --workspace"
        )
    point = memfs_mount_containing(cfg.workspace)
    if point is not None:
        raise click.ClickException(
            f"{cfg.workspace} is inside the memfs mount {point}: pass --workspace with the workspace folder itself")
    return Memory(cfg)


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memfs")
@global_options
@click.pass_context
def main(ctx: click.Context, **opts: Any) -> None:
    """memfs: agent memory as plain files, indexed for hybrid search, mountable with FUSE."""
    ctx.obj = opts


@main.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@global_options
def init(directory: Path | None, **opts: Any) -> None:
    """Create a workspace from the template (never overwrites an existing file)."""
    cfg = _config(opts)
    target = (directory or cfg.workspace).expanduser().resolve()
    if target.exists() and not target.is_dir():
        raise click.ClickException(f"{target} exists and is not a directory")
    created, kept = init_workspace(target)
    for rel in created:
        click.echo(f"created {rel}")
    for rel in kept:
        click.echo(f"kept    {rel} (already there)")
    click.echo(f"workspace ready: {target}")


def _bar(label: str) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A click progress bar fed by (done, total) callbacks; drawn only on a terminal."""
    state: dict[str, Any] = {"bar": None, "done": 0}

    def update(done: int, total: int) -> None:
        if state["bar"] is None:
            if total < 20:
                return
            state["bar"] = click.progressbar(length=total, label=label, file=sys.stderr)
            state["bar"].__enter__()
        state["bar"].update(done - state["done"])
        state["done"] = done

    def finish() -> None:
        if state["bar"] is not None:
            state["bar"].__exit__(None, None, None)

    return update, finish


@main.command()
@click.option("--rebuild", is_flag=True, help="Build the index anew from the files (cache kept).")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@global_options
def index(rebuild: bool, as_json: bool, **opts: Any) -> None:
    """Index the workspace's memory files (incremental: unchanged files are skipped)."""
    cfg = _config(opts)
    privacy_quiet = cfg.mode != "main"  # a shared caller gets the counts only
    memory = _memory(cfg)
    files_bar, files_done = _bar("reading files")
    embed_bar, embed_done = _bar("embedding chunks")
    try:
        if rebuild:
            try:
                outcomes = memory.rebuild(progress=files_bar)
            except IndexBusy as exc:
                raise click.ClickException(str(exc)) from None
            files_done()
        else:
            outcomes = memory.indexer.reconcile(files_bar)
            files_done()
            memory.embed_pending(progress=embed_bar)
            embed_done()
        status = memory.status()
    finally:
        memory.close()
    privacy = memory.privacy()
    shown = [o for o in outcomes if not privacy.hides(o.path)]
    summary: dict[str, int] = {}
    for outcome in shown:
        summary[outcome.action] = summary.get(outcome.action, 0) + 1
    skipped = [] if privacy_quiet else [o for o in shown if o.action == "skipped"]
    warned = [] if privacy_quiet else [o for o in shown if o.action == "indexed" and o.reason]
    if as_json:
        click.echo(json.dumps({"summary": summary, "skipped": [{"path": o.path, "reason": o.reason} for o in skipped],
                               "warnings": [{"path": o.path, "warning": o.reason} for o in warned],
                               "status": status}))
        return
    for outcome in skipped:
        click.echo(f"skipped {outcome.path}: {outcome.reason}", err=True)
    for outcome in warned:
        click.echo(f"warning: {outcome.path}: {outcome.reason}; the rest is indexed", err=True)
    parts = ", ".join(f"{n} {action}" for action, n in sorted(summary.items())) or "no memory files"
    click.echo(f"{parts}; {status['files']} files, {status['chunks']} chunks, {status['pending']} pending")
    if status["provider_error"]:
        click.echo(f"warning: embeddings unavailable: {status['provider_error']}", err=True)


def _search_one(memory: Memory, query: str, as_json: bool, options: SearchOptions) -> str:
    response = memory.search(query, options=options)
    return render_json(response) if as_json else render_markdown(response)


@main.command()
@click.argument("query")
@click.option("--json", "as_json", is_flag=True, help="JSON output; with QUERY '-', JSON Lines.")
@click.option("-n", "--max-results", "limit", default=None, help="How many results at most, 1-100 (default search.max_results).")
@click.option("--min-score", default=None, help="Drop results scoring below this, 0-1 (default search.min_score).")
@click.option("--in", "scope", default=None, metavar="WHERE",
              help="Only memory, sessions, sync, MEMORY.md, or a path prefix of the workspace.")
@click.option("--after", default=None, metavar="YYYY-MM-DD", help="Only what is dated on or after this day.")
@click.option("--before", default=None, metavar="YYYY-MM-DD", help="Only what is dated before this day.")
@click.option("--mmr", default=None, metavar="LAMBDA", help="Diversify: maximal marginal relevance, 0-1 (0.7 is usual).")
@click.option("--decay", default=None, metavar="DAYS", help="Prefer recent: halve a dated result's score every DAYS days.")
@global_options
def search(query: str, as_json: bool, limit: str | None, min_score: str | None, scope: str | None,
           after: str | None, before: str | None, mmr: str | None, decay: str | None, **opts: Any) -> None:
    """Hybrid search of the memory.  QUERY '-' reads one query per line from stdin."""
    given = {"n": limit, "min": min_score, "in": scope, "after": after, "before": before, "mmr": mmr, "decay": decay}
    try:
        options = parse_options({k: v for k, v in given.items() if v is not None})
    except BadOption as exc:
        raise click.UsageError(str(exc)) from None
    cfg = _config(opts)
    memory = _memory(cfg)
    try:
        if query == "-":
            for line in sys.stdin:
                text = line.rstrip("\n")
                # One answer per input line, blank or not, so answers match questions by position.
                click.echo(_search_one(memory, text, as_json, options), nl=False)
                sys.stdout.flush()
            return
        if not query.strip():
            raise click.ClickException("the query is empty")
        click.echo(_search_one(memory, query, as_json, options), nl=False)
    finally:
        memory.close()


@main.command()
@click.argument("path")
@click.option("--from", "from_line", type=click.IntRange(min=1), default=1, show_default=True,
              help="First line (1-based).")
@click.option("--lines", type=click.IntRange(min=1), default=None,
              help="How many lines (default 200; output is capped).")
@click.option("--json", "as_json", is_flag=True)
@global_options
def get(path: str, from_line: int, lines: int | None, as_json: bool, **opts: Any) -> None:
    """Read part of a memory file, bounded; says where to continue.  PATH is relative to the
    workspace (as search results cite it), or to the current folder inside the workspace."""
    cfg = _config(opts)
    memory = _memory(cfg)
    try:
        result = memory.get(_workspace_path(cfg, path), from_line, lines)
    except GetError as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        memory.close()
    if as_json:
        click.echo(json.dumps(result.as_dict(), ensure_ascii=False))
        return
    click.echo(result.text, nl=False)
    if result.next_from is not None:
        click.echo(
            f"[memfs: lines {result.from_line}-{result.to_line} of {result.total_lines}; continue with "
            f"memfs get {result.path} --from {result.next_from}]", err=True)


def _workspace_path(cfg: Config, path: str) -> str:
    """``path`` as given, unless it only exists relative to the current folder inside the
    workspace (``cd memory; memfs get 2026-11-22.md``)."""
    if os.path.isabs(path) or (cfg.workspace / path).exists():
        return path
    here = Path.cwd().resolve()
    if (here == cfg.workspace or cfg.workspace in here.parents) and (here / path).exists():
        return str(here / path)
    return path


@main.command()
@click.option("--json", "as_json", is_flag=True)
@global_options
def status(as_json: bool, **opts: Any) -> None:
    """Files, chunks, pending embeddings, provider and index size."""
    cfg = _config(opts)
    memory = _memory(cfg)
    try:
        info = memory.status()
    finally:
        memory.close()
    click.echo(json.dumps(info) if as_json else render_status(info), nl=not as_json)
    if not info["indexed"] and not as_json:
        click.echo(f"warning: this workspace has not been indexed yet for agent {cfg.agent}: run `memfs index`",
                   err=True)


@main.command()
@click.argument("bundle_mode", metavar="[main|shared]", required=False, default=None)
@global_options
def context(bundle_mode: str | None, **opts: Any) -> None:
    """Print the context bundle (main, or shared without private files); same bytes as
    context/MODE.md.  Without an argument: the bundle of --mode (main by default)."""
    cfg = _config(opts)
    memory = _memory(cfg)
    try:
        click.echo(memory.bundle((bundle_mode or cfg.mode).strip().lower()), nl=False)
    except (UnknownMode, NotAllowed) as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        memory.close()


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print what was stored as JSON instead of NO_REPLY.")
@global_options
def sync(as_json: bool, **opts: Any) -> None:
    """Store one [CLAWGPT-SYNC] message read from stdin; prints NO_REPLY on success."""
    from memfs.sync.protocol import SyncError

    cfg = _config(opts)
    data = sys.stdin.buffer.read()
    if not data.strip():
        raise click.ClickException("no sync message on stdin (expected a [CLAWGPT-SYNC] message or JSONL lines)")
    memory = _memory(cfg)
    try:
        result = memory.ingest_sync(data, "stdin")
    except SyncError as exc:
        raise click.ClickException(f"sync message rejected: {exc} (kept under clawgpt-memory/.rejected/)") from None
    finally:
        memory.close()
    if as_json:
        click.echo(json.dumps({"stored": result.stored, "duplicates": result.duplicates, "files": result.files}))
    else:
        click.echo("NO_REPLY")


@main.command("config")
@click.option("--json", "as_json", is_flag=True)
@global_options
def config_cmd(as_json: bool, **opts: Any) -> None:
    """Print the effective settings and where each came from."""
    cfg = _config(opts, needs_workspace=False)
    leaves = cfg.leaves()
    if as_json:
        click.echo(json.dumps({k: {"value": v if isinstance(v, (int, float, str, list)) else str(v), "source": s}
                               for k, v, s in leaves}))
        return
    width = max(len(k) for k, _, _ in leaves)
    for key, value, source in leaves:
        shown = json.dumps(value) if isinstance(value, (list, str, bool)) else str(value)
        click.echo(f"{key.ljust(width)}  {shown}  ({source})")


@main.command()
@click.argument("workspace_dir", metavar="WORKSPACE", type=click.Path(file_okay=False, path_type=Path))
@click.argument("mountpoint", type=click.Path(file_okay=False, path_type=Path))
@click.option("--foreground", "-f", is_flag=True, help="Stay in the foreground and log to stderr.")
@click.option("--force", is_flag=True, help="Clean up a stale mount left by a crashed memfs first.")
@global_options
def mount(workspace_dir: Path, mountpoint: Path, foreground: bool, force: bool, **opts: Any) -> None:
    """Mount WORKSPACE on MOUNTPOINT: a passthrough whose memory writes are indexed at once."""
    from memfs.fs import mount as lifecycle

    given = _options(opts)["workspace"]
    if given is not None and Path(given).expanduser().resolve() != workspace_dir.expanduser().resolve():
        raise click.UsageError(f"two workspaces given: --workspace {given} and WORKSPACE {workspace_dir}; "
                               "give the workspace once, as WORKSPACE")
    opts = _options({**opts, "workspace": workspace_dir})
    cfg = _config(opts)
    target = Path(os.path.abspath(mountpoint.expanduser()))
    try:
        lifecycle.preflight(cfg, target, force)
        for warning in lifecycle.shadowed_warnings(cfg):
            click.echo(f"warning: {warning}", err=True)
        if foreground:
            if opts["verbose"] == 0:
                logging.getLogger().setLevel(logging.INFO)
            launch = {"workspace": cfg.workspace, "agent": cfg.agent, "mode": cfg.mode,
                      "config_file": opts["config_file"], "overrides": [parse_override(o) for o in opts["overrides"]]}
            lifecycle.Daemon(cfg, target, launch).run()
            return
        argv = [sys.executable, "-m", "memfs", "mount", str(cfg.workspace), str(target), "--foreground",
                "--agent", cfg.agent, "--mode", cfg.mode, "--set", f"state_dir={cfg.state_dir}"]
        if opts["config_file"]:
            argv += ["--config", str(opts["config_file"])]
        for override in opts["overrides"]:
            argv += ["--set", override]
        argv += ["-v"] * max(1, opts["verbose"])
        pid = lifecycle.start_background(cfg, target, argv)
    except lifecycle.MountError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"mounted {cfg.workspace} on {target} (agent {cfg.agent}, {cfg.mode} mode, pid {pid}); "
               f"log: {lifecycle.log_file(cfg.state_dir, target)}")


@main.command()
@click.argument("mountpoint", type=click.Path(file_okay=False, path_type=Path))
@global_options
def umount(mountpoint: Path, **opts: Any) -> None:
    """Unmount cleanly (also clears a stale mount left by a crashed memfs)."""
    from memfs.fs import mount as lifecycle

    cfg = _config(opts, needs_workspace=False)
    target = Path(os.path.abspath(mountpoint.expanduser()))
    try:
        outcome = lifecycle.unmount(target, cfg.state_dir)
    except lifecycle.MountError as exc:
        raise click.ClickException(str(exc)) from None
    click.echo(f"{outcome}: {target}")


@main.command()
@click.argument("workspace_dir", metavar="WORKSPACE", required=False, type=click.Path(file_okay=False, path_type=Path))
@global_options
def watch(workspace_dir: Path | None, **opts: Any) -> None:
    """Keep the index current by watching WORKSPACE (no FUSE needed); Ctrl-C stops."""
    import trio

    from memfs.watch import watch_workspace

    opts = _options({**opts, "workspace": workspace_dir or opts["workspace"]})
    cfg = _config(opts)
    if opts["verbose"] == 0:
        logging.getLogger().setLevel(logging.INFO)
    memory = _memory(cfg)
    try:
        memory.index()
        log.info("watching %s (agent %s)", cfg.workspace, cfg.agent)
        trio.run(watch_workspace, memory)
    except* KeyboardInterrupt:
        log.info("stopped watching %s", cfg.workspace)  # Ctrl-C is how it ends: no traceback
    finally:
        memory.close()


if __name__ == "__main__":
    main()
