"""The commands that change the index or the files: ``index`` (and ``--rebuild``, ``--to``), ``sync``,
``history`` (and ``history forget``) and ``restore``."""

from __future__ import annotations

import json
import logging
import os
import sys
from typing import TYPE_CHECKING, Any

import click

from memfs.cli.app import (
    _answerer,
    _bar,
    _config,
    _daemon_progress,
    _emit,
    _options,
    global_options,
    main,
)
from memfs.serve.wire import Invocation

if TYPE_CHECKING:
    from memfs.config import Config


@main.command()
@click.option("--rebuild", is_flag=True, help="Build the index anew from the files (cache kept).")
@click.option("--to", "to", type=click.Choice(["postgres", "sqlite"]), default=None,
              help="Copy this workspace's index (this agent's) from the other backend to this one, vectors and "
                   "embedding cache included, embedding nothing again.")
@click.option("--json", "as_json", is_flag=True, help="Print the outcome as JSON.")
@global_options
def index(rebuild: bool, to: str | None, as_json: bool, **opts: Any) -> None:
    """Index the workspace's memory files (incremental: unchanged files are skipped)."""
    if to is not None:
        if rebuild:
            raise click.UsageError("--to copies the index as it is: it does not go with --rebuild")
        _move_index(to, as_json, opts)
        return
    if rebuild:
        _index(rebuild, as_json, opts)
        return
    try:
        _index(rebuild, as_json, opts)
    except KeyboardInterrupt:  # click would say "Aborted!" only: say that nothing is lost
        from memfs.serve.progress import ABORTED

        click.echo(err=True)
        click.echo(ABORTED, err=True)
        sys.exit(1)


def _index(rebuild: bool, as_json: bool, opts: dict[str, Any]) -> None:
    args = {"json": as_json}
    with _answerer(opts) as answerer:
        if not rebuild:
            from memfs.serve import progress
            from memfs.serve.wire import stopped_mid_answer

            if not stopped_mid_answer("index") and (line := progress.already_embedding(answerer.client)):
                click.echo(line, err=True)
            bar, done = _bar("embedding", rate=True)
            with _daemon_progress(answerer, bar):
                answer = answerer.remote("index", args)
            done()
            if answer is not None:
                _emit(answer)
                return
            if stopped_mid_answer("index"):  # an unmount stopped the mount it waited on: go on here
                click.echo(progress.STOPPED, err=True)
        if rebuild:  # replacing the index needs it alone: a daemon a command started gives way
            from memfs.serve import ondemand

            cfg = _config(opts)
            ondemand.stop(cfg.workspace, cfg.agent, answerer.client.invocation.env or None)
        from memfs import commands  # (pydantic and the indexer: not for an answer a daemon gives)

        memory, cfg = answerer.local()
        files_bar, files_done = _bar("reading files")
        embed_bar, embed_done = _bar("embedding", rate=True)
        if rebuild:
            from memfs.memory import IndexBusy

            try:
                outcomes = memory.rebuild(progress=files_bar)
            except IndexBusy as exc:
                raise click.ClickException(_in_use(cfg, str(exc), "rebuild the index")) from None
            files_done()
            answer = commands.index_report(memory, cfg, outcomes, as_json)
        else:
            answer = commands.index(memory, cfg, args, files_bar, embed_bar)
            files_done()
            embed_done()
    _emit(answer)


def _move_index(to: str, as_json: bool, opts: dict[str, Any]) -> None:
    """``memfs index --to BACKEND``: the PostgreSQL side is reached with this command's settings
    read as for ``index.backend = "postgres"`` (its DSN, checked as a mount checks it)."""
    import json

    opts = _options(opts)
    cfg = _config({**opts, "overrides": (*opts["overrides"], "index.backend=postgres")})
    if cfg.mode != "main":
        raise click.ClickException(f"the index moves whole, private rows included: move it in the main mode, "
                                   f"not {cfg.mode!r}")
    if not cfg.workspace.is_dir():
        raise click.ClickException(f"workspace {cfg.workspace} does not exist")
    from memfs.memory import IndexInUse, MoveRefused, move_index
    from memfs.serve import ondemand

    # A daemon a command started gives way, as for a rebuild; a mount refuses the move.
    ondemand.stop(cfg.workspace, cfg.agent, Invocation.here(opts).env or None)
    bar, done = _bar("moving chunks")
    try:
        moved, source, target = move_index(cfg, to, progress=bar)
    except IndexInUse as exc:
        raise click.ClickException(_in_use(cfg, str(exc), "move the index")) from None
    except MoveRefused as exc:
        raise click.ClickException(str(exc)) from None
    finally:
        done()
    if as_json:
        click.echo(json.dumps({"from": source, "to": target, "files": moved.files, "chunks": moved.chunks,
                               "units": moved.units, "vectors": moved.vectors, "cached_embeddings": moved.cached,
                               "seconds": round(moved.seconds, 3)}))
    else:
        click.echo(f"moved {moved.files} files, {moved.chunks} chunks, {moved.units} units, {moved.vectors} vectors "
                   f"and {moved.cached} cached embeddings from {source} to {target} in {moved.seconds:.1f} s "
                   "(nothing embedded again)")
    # Its own reminder below says what the config's warning of a DSN without the backend would.
    config_log = logging.getLogger("memfs.config")
    level = config_log.level
    config_log.setLevel(logging.ERROR)
    try:
        current = _config(opts).index.backend
    finally:
        config_log.setLevel(level)
    if current != to:
        click.echo(f'memfs uses the {current} index until index.backend = "{to}" is set', err=True)


def _in_use(cfg: Config, refusal: str, then: str) -> str:
    """A move or rebuild refused for an index in use, naming the mounts and daemons that use it
    and how to stop them before ``then`` (the refusal as it is when none is found: one of
    another state folder)."""
    from memfs.serve.listing import names, serving

    processes = sorted(serving(cfg.state_dir, cfg.workspace, cfg.agent),
                       key=lambda p: (not p.get("mountpoint"), p["pid"]))
    if not processes:
        return refusal
    users = names(processes)
    steps = ", ".join(f"`memfs umount {p['mountpoint']}`" if p.get("mountpoint") else f"stop pid {p['pid']}"
                      for p in processes)
    return f"the index of {cfg.workspace} (agent {cfg.agent}) is in use by {users}: {steps}, then {then}"


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print what was stored as JSON instead of NO_REPLY.")
@global_options
def sync(as_json: bool, **opts: Any) -> None:
    """Store one [CLAWGPT-SYNC] message read from stdin; prints NO_REPLY on success and what was
    stored on stderr."""
    import base64

    data = sys.stdin.buffer.read()
    with _answerer(opts) as answerer:
        _emit(answerer.answer("sync", {"data": base64.b64encode(data).decode(), "json": as_json,
                                       "pid": os.getpid(), "via": "cli"}))


FORGET = "forget"  # `memfs history forget ...`; a file named so is `memfs history ./forget`


@main.command()
@click.argument("path", required=False)
@click.argument("versions", nargs=-1, metavar="[VERSION [VERSION]]")
@click.option("--diff", is_flag=True,
              help="A unified diff: of the newest change; of VERSION against the one before it; or from VERSION to VERSION.")
@click.option("--deleted", is_flag=True, help="List deleted memory files whose history is kept.")
@click.option("--json", "as_json", is_flag=True)
@click.option("--containing", metavar="TEXT", default=None,
              help="With forget: every version of any file whose bytes contain TEXT.")
@click.option("--yes", "-y", is_flag=True, help="With forget: do not ask first.")
@global_options
def history(path: str | None, versions: tuple[str, ...], diff: bool, deleted: bool, as_json: bool,
            containing: str | None, yes: bool, **opts: Any) -> None:
    """Every version of a memory file, oldest first, with who made it (the same names as the
    mount's history/PATH/).  With a VERSION: print its exact bytes.

    \b
    memfs history forget PATH VERSION...      forget those versions for good
    memfs history forget --containing TEXT    forget every version of any file that contains TEXT
    Forgetting lists what goes and asks first (--yes: does not); the bytes leave the history
    database, and the listing records when and by whom (main mode only)."""
    if path == FORGET:
        if diff or deleted or as_json:
            raise click.UsageError("forget takes PATH VERSION... or --containing TEXT, and --yes")
        _forget(list(versions), containing, yes, opts)
        return
    if containing is not None or yes:
        raise click.UsageError("--containing and --yes go with forget: memfs history forget --containing TEXT")
    with _answerer(opts) as answerer:
        _emit(answerer.answer("history", {"path": path, "versions": list(versions), "diff": diff,
                                          "deleted": deleted, "json": as_json, "pid": os.getpid(), "via": "cli"}))


def _forget(words: list[str], containing: str | None, yes: bool, opts: dict[str, Any]) -> None:
    """List what would be forgotten, ask (unless --yes), then forget it."""
    args = {"path": words[0] if words else None, "versions": words[1:], "containing": containing,
            "pid": os.getpid(), "via": "cli"}
    with _answerer(opts) as answerer:
        if not yes:
            plan = answerer.answer("forget", {**args, "dry": True})
            if plan.error is not None:
                _emit(plan)
            count = json.loads(plan.stdout)["count"]
            if count:
                click.echo(json.loads(plan.stdout)["listing"], nl=False)
                if not sys.stdin.isatty():
                    raise click.ClickException("stdin is not a terminal, so nothing was forgotten: pass --yes to "
                                               "forget without being asked")
                if not click.confirm("Forget them?", default=False):
                    raise click.ClickException("nothing was forgotten")
        _emit(answerer.answer("forget", args))


@main.command()
@click.argument("path")
@click.argument("version")
@global_options
def restore(path: str, version: str, **opts: Any) -> None:
    """Put VERSION of a memory file back (as `memfs history PATH` lists it); what the file held
    is kept, and the restored content becomes its newest version."""
    with _answerer(opts) as answerer:
        _emit(answerer.answer("restore", {"path": path, "version": version, "pid": os.getpid(), "via": "cli"}))
