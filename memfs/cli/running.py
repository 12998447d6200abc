"""The commands that make workspaces and run processes: ``init``, ``mount``, ``umount``,
``serve`` (and ``watch``) and ``mcp``."""

from __future__ import annotations

import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memfs.cli.app import (
    LOG_FORMAT,
    _config,
    _daemon_logging,
    _memory,
    _options,
    _setup_logging,
    global_options,
    main,
)
from memfs.serve.wire import Invocation

if TYPE_CHECKING:
    from memfs.config import Config


@main.command()
@click.argument("directory", required=False, type=click.Path(file_okay=False, path_type=Path))
@global_options
def init(directory: Path | None, **opts: Any) -> None:
    """Create a workspace from the template (never overwrites an existing file)."""
    from memfs.workspace import init_workspace

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


@main.command()
@click.argument("workspace_dir", metavar="WORKSPACE", type=click.Path(file_okay=False, path_type=Path))
@click.argument("mountpoint", type=click.Path(file_okay=False, path_type=Path))
@click.option("--foreground", "-f", is_flag=True, help="Stay in the foreground and log to stderr.")
@click.option("--force", is_flag=True, help="Clean up a stale mount left by a crashed memfs first.")
@click.option("--allow-other", is_flag=True,
              help="Let other local users reach the mount's real files (their modes decide); search/, context/, "
                   "history/ and .memfs/ still answer you alone. Off by default, for root too.")
@global_options
def mount(workspace_dir: Path, mountpoint: Path, foreground: bool, force: bool, allow_other: bool,
          **opts: Any) -> None:
    """Mount WORKSPACE on MOUNTPOINT: a passthrough whose memory writes are indexed at once."""
    from memfs.config import parse_override
    from memfs.fs import mount as lifecycle

    given = _options(opts)["workspace"]
    if given is not None and Path(given).expanduser().resolve() != workspace_dir.expanduser().resolve():
        raise click.UsageError(f"two workspaces given: --workspace {given} and WORKSPACE {workspace_dir}; "
                               "give the workspace once, as WORKSPACE")
    if allow_other:
        opts = {**opts, "overrides": (*opts.get("overrides", ()), "mount.allow_other=true")}
    opts = _options({**opts, "workspace": workspace_dir})
    cfg = _config(opts)
    target = Path(os.path.abspath(mountpoint.expanduser()))
    try:
        lifecycle.preflight(cfg, target, force)
        for warning in lifecycle.shadowed_warnings(cfg):
            click.echo(f"warning: {warning}", err=True)
        from memfs.workspace import timezone

        for zone in {cfg.bundle.timezone, cfg.sync.timezone}:
            timezone(zone)  # a TZ this machine does not know is said here, not only in the mount's log
        if foreground:
            _daemon_logging(opts["verbose"])
            from memfs.leavecwd import absolute_launch, leave_folder

            launch = absolute_launch({"workspace": cfg.workspace, "agent": cfg.agent, "mode": cfg.mode,
                                      "config_file": opts["config_file"],
                                      "overrides": [parse_override(o) for o in opts["overrides"]]})
            # Settled: it must not keep the folder it was started from busy (another mount's
            # mountpoint, say, which could then not be unmounted).
            leave_folder(cfg.embedding)
            from memfs.memory import IndexBusy

            try:
                daemon = lifecycle.Daemon(cfg, target, launch)
            except IndexBusy as exc:  # e.g. its PostgreSQL refuses this login: one line, no traceback
                raise click.ClickException(str(exc)) from None
            if daemon.memory.outage.reason:
                click.echo(_starts_offline(daemon.memory.outage.reason), err=True)
            daemon.run()
            return
        # -P: the daemon runs the memfs this command runs, never a `memfs` folder where the
        # caller happens to stand (python -m puts the current folder first on sys.path).
        argv = [sys.executable, "-P", "-m", "memfs", "mount", str(cfg.workspace), str(target), "--foreground",
                "--agent", cfg.agent, "--mode", cfg.mode, "--set", f"state_dir={cfg.state_dir}"]
        if opts["config_file"]:
            argv += ["--config", str(opts["config_file"])]
        for override in opts["overrides"]:
            argv += ["--set", override]
        argv += ["-v"] * max(1, opts["verbose"])
        pid = lifecycle.start_background(cfg, target, argv)
    except lifecycle.MountError as exc:
        raise click.ClickException(str(exc)) from None
    if cfg.index.backend == "postgres" and (reason := _mount_index_unavailable(cfg, target)):
        click.echo(_starts_offline(reason), err=True)
    click.echo(f"mounted {cfg.workspace} on {target} (agent {cfg.agent}, {cfg.mode} mode, pid {pid}); "
               f"log: {lifecycle.log_file(cfg.state_dir, target)}")


def _starts_offline(reason: str) -> str:
    """What `memfs mount` says of a mount started while its index's server could not be reached."""
    return (f"warning: {reason}: the mount starts all the same (files are read and written as ever; searches say "
            "the index is unavailable) and the index catches up with the files when the server answers")


def _mount_index_unavailable(cfg: Config, target: Path) -> str:
    """Why the index of the mount just started at ``target`` is unavailable ("" when it is not),
    as its own .memfs/status says it (a read bounded by index.timeout_s, like any)."""
    from memfs.fs.virtual import META, STATUS

    folder = target / (cfg.mount.virtual_prefix or META)
    try:
        text = (folder / STATUS).read_text(errors="replace")
    except OSError:
        return ""
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key == "index" and value.strip().startswith("the index is unavailable"):
            return value.strip()
    return ""


@main.command()
@click.argument("mountpoint", type=click.Path(file_okay=False, path_type=Path))
@click.option("--force", is_flag=True, help="Unmount even while programs have files open in it (their writes fail).")
@global_options
def umount(mountpoint: Path, force: bool, **opts: Any) -> None:
    """Unmount cleanly (also clears a stale mount left by a crashed memfs); refuses while a
    program has a file open in the mount, unless --force."""
    from memfs.mounttable import MountError, unmount
    from memfs.serve.listing import memfs_processes
    from memfs.userdirs import trusted_state_dir

    opts = _options(opts)
    # Mount records live in the trusted state directory; only --set or --config can move it,
    # and only then is the whole configuration loaded (it costs more than the unmount).
    state_dir = _config(opts, needs_workspace=False).state_dir if opts["overrides"] or opts["config_file"] \
        else trusted_state_dir()
    target = Path(os.path.abspath(mountpoint.expanduser()))
    try:
        outcome = unmount(target, state_dir, force=force, known=lambda: memfs_processes(state_dir))
    except MountError as exc:
        raise click.ClickException(str(exc)) from None
    outcome, _, note = outcome.partition("; ")
    click.echo(f"{outcome}: {target}" + (f" ({note})" if note else ""))


class _Ready:
    """Tells the command that started this daemon on demand how it went: one line on the pipe
    it gave (--ready-fd), said once: "ready", "taken", "off", or "error: WHY"."""

    def __init__(self, fd: int | None) -> None:
        self.fd = fd
        if fd is not None:
            try:
                os.set_inheritable(fd, False)  # nothing this daemon starts may hold the command's pipe open
            except OSError:
                raise click.UsageError(f"--ready-fd {fd} is not an open file descriptor") from None

    def __call__(self, word: str) -> None:
        if self.fd is None:
            return
        fd, self.fd = self.fd, None
        try:
            os.write(fd, (" ".join(word.split()) + "\n").encode())
        except OSError:
            pass  # the command gave up waiting: nothing to tell
        finally:
            os.close(fd)


def _serve(workspace_dir: Path | None, opts: dict[str, Any], idle: float | None = None, on_demand: bool = False,
           ready_fd: int | None = None) -> None:
    from memfs.serve.daemon import ServeDaemon

    ready = _Ready(ready_fd)
    try:
        opts = _options({**opts, "workspace": workspace_dir or opts["workspace"]})
        cfg = _config(opts)
        _daemon_logging(opts["verbose"])
        if on_demand and not cfg.daemon.on_demand:
            ready("off")
            return
        from memfs.leavecwd import leave_folder

        # Settled (workspace, state, config file): it must not keep the folder it was started
        # from busy, started on demand or by hand (a mount could not be unmounted under it).  Left
        # before the index opens, as a mount does: the embedding client keys its service by the
        # model's path, made absolute here.
        leave_folder(cfg.embedding)
        memory = _memory(cfg)  # the same checks as every command (the workspace exists, is no mount)
        if on_demand and idle is None:
            idle = cfg.daemon.idle_s
        daemon = ServeDaemon(cfg, memory, idle_s=idle, on_demand=on_demand, on_ready=ready)
        left = daemon.run()
    except click.ClickException as exc:
        ready(f"error: {exc.format_message()}")
        raise
    finally:
        ready("error: it stopped before serving (see its log)")
    if left:
        click.echo(f"stopped; {left} passages wait for an embedding: {daemon.embedded_by()}", err=True)


@main.command()
@click.argument("workspace_dir", metavar="[WORKSPACE]", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--idle", type=click.FloatRange(min=0, min_open=True), default=None, metavar="SECONDS",
              help="Stop after SECONDS without a request (default: run until stopped).")
@click.option("--on-demand", is_flag=True, hidden=True,
              help="Started by a command that found no daemon: stops when idle (daemon.idle_s), gives way to a "
                   "mount or a `memfs serve` started by hand.")
@click.option("--ready-fd", type=int, default=None, hidden=True, help="Say on this pipe when the socket answers.")
@global_options
def serve(workspace_dir: Path | None, idle: float | None, on_demand: bool, ready_fd: int | None, **opts: Any) -> None:
    """Keep WORKSPACE's index current and answer memfs commands from a warm process, without
    FUSE (the watcher, background embedding, the command socket); Ctrl-C stops.  Commands start
    one of these on demand when none runs (see daemon.on_demand)."""
    _serve(workspace_dir, opts, idle, on_demand, ready_fd)


@main.command()
@click.argument("workspace_dir", metavar="WORKSPACE", required=False, type=click.Path(file_okay=False, path_type=Path))
@global_options
def watch(workspace_dir: Path | None, **opts: Any) -> None:
    """The same as `memfs serve` (its earlier name)."""
    _serve(workspace_dir, opts)


@main.command("mcp")
@global_options
def mcp_cmd(**opts: Any) -> None:
    """Serve the memory as MCP tools over stdio (memory_search, memory_get, memory_context,
    memory_append, memory_sync, memory_history), answered by the running mount or `memfs serve`
    when there is one; with none, it keeps the index current itself while it runs."""
    from memfs.mcp import build_server
    from memfs.serve.standby import Standby

    opts = _options(opts)
    _setup_logging(opts["verbose"])  # on stderr: stdout is the protocol
    for handler in logging.getLogger().handlers:  # a server's log, for its host's log viewer
        handler.setFormatter(logging.Formatter(LOG_FORMAT))
    # A missing workspace or a bad setting ends it here, with the message, not at each tool call.
    cfg = _config(opts)
    memory = _memory(cfg)
    # Often the only memfs process running: unless a mount or `memfs serve` serves this
    # workspace, it keeps the index current itself (reconcile, watch, embed) while it runs.
    standby = Standby(memory)
    standby.start()
    server, answerer = build_server(Invocation.here(opts), lambda: (memory, cfg), standby.serving.is_set)
    try:
        server.run("stdio")
    finally:
        standby.stop()
        used = answerer.memory is not None
        answerer.close()  # closes the Memory when the tools used it
        if not used:
            memory.close()
