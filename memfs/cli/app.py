"""The ``memfs`` command group and what every command shares: the global options and how they
merge, the configuration and Memory a command opens, logging, progress bars, and asking the
daemon that serves a workspace (:class:`memfs.serve.answerer.Answerer`) before answering here."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from memfs.serve.answerer import Answerer
from memfs.serve.wire import Answer, Invocation

# Only click and the socket client are imported up front: a command a daemon answers, --help and
# --version must not pay for pydantic, numpy or the model (the rest is imported where it is used).
if TYPE_CHECKING:
    from memfs.config import Config
    from memfs.memory import Memory

log = logging.getLogger("memfs")


LOG_FORMAT = "%(asctime)s memfs[%(process)d] %(levelname)s %(name)s: %(message)s"


def _setup_logging(verbose: int) -> None:
    level = logging.WARNING if verbose == 0 else logging.INFO if verbose == 1 else logging.DEBUG
    # A command's warnings are for the person who typed it, in the words a CLI uses; -v is for
    # following what happens, with times, processes and the module that said it.
    if verbose:
        logging.basicConfig(level=level, format=LOG_FORMAT, stream=sys.stderr)
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_PlainFormatter())
    logging.basicConfig(level=level, handlers=[handler])


def _daemon_logging(verbose: int) -> None:
    """A long-running process (a mount, a daemon, the MCP server) logs for whoever reads its log
    later: INFO at least, with times, process and module, whatever a command's stderr looks like."""
    root = logging.getLogger()
    if verbose == 0:
        root.setLevel(logging.INFO)
    for handler in root.handlers:
        handler.setFormatter(logging.Formatter(LOG_FORMAT))


class _PlainFormatter(logging.Formatter):
    """``memfs: warning: ...``, as a command-line tool says it."""

    def format(self, record: logging.LogRecord) -> str:
        return f"memfs: {record.levelname.lower()}: {record.getMessage()}"


def global_options(func: Callable[..., Any] | None = None, *, many_agents: bool = False) -> Any:
    """--workspace, --agent, --mode, --config, --set, --no-daemon and -v: accepted before the
    command name (``memfs -w ws status``) and after it (``memfs status -w ws``).  With
    ``many_agents`` (``memfs search``) --agent may be given more than once: a tuple of names."""
    if func is None:
        return lambda f: global_options(f, many_agents=many_agents)
    agent = (click.option("--agent", "-a", multiple=True,
                          help="Agent name; each agent has its own index (default main).  Again: search another "
                               "agent's public memory too, through a reader grant (index.backend = postgres).")
             if many_agents else
             click.option("--agent", "-a", default=None, help="Agent name; each agent has its own index (default main)."))
    options = [
        click.option("--workspace", "-w", type=click.Path(file_okay=False, path_type=Path), default=None,
                     help="Workspace directory (env MEMFS_WORKSPACE; default: the workspace around the "
                          "current directory, else ~/memfs)."),
        agent,
        click.option("--mode", default=None,
                     help="main (default) sees everything; shared (or any other value) never sees the "
                          "private paths (privacy.private_paths, MEMORY.md by default). Env MEMFS_MODE."),
        click.option("--config", "config_file", type=click.Path(dir_okay=False, path_type=Path), default=None,
                     help="TOML config file (env MEMFS_CONFIG; default WORKSPACE/.memfs.toml, then ~/.config/memfs/config.toml)."),
        click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE",
                     help="Override a setting, e.g. --set search.min_score=0.2 (repeatable)."),
        click.option("--no-daemon", is_flag=True, default=None,
                     help="Answer in this process: never ask a daemon, never start one (env MEMFS_NO_DAEMON=1; "
                          "daemon.on_demand=false only stops starting one)."),
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
    if isinstance(merged.get("agent"), tuple):  # `search --agent a --agent b`: a searches (see search)
        merged["agent"] = merged["agent"][0] if merged["agent"] else None
    for key in ("workspace", "agent", "mode", "config_file"):
        if merged.get(key) is None:
            merged[key] = outer.get(key)
    merged["overrides"] = tuple(outer.get("overrides", ())) + tuple(opts.get("overrides", ()))
    merged["verbose"] = outer.get("verbose", 0) + opts.get("verbose", 0)
    merged["no_daemon"] = bool(outer.get("no_daemon") or opts.get("no_daemon"))
    return merged


def _config(opts: dict[str, Any], needs_workspace: bool = True) -> Config:
    """The effective configuration (see :mod:`memfs.invocation`)."""
    from memfs.invocation import InvocationError, resolve

    opts = _options(opts)
    _setup_logging(opts["verbose"])
    from memfs.workspace import warn_unknown_tz

    warn_unknown_tz()
    try:
        cfg = resolve(Invocation.here(opts), needs_workspace)
    except InvocationError as exc:
        raise click.ClickException(str(exc)) from None
    if cfg.mode != "main":
        # Per-file log lines (a rebuild, a skipped file) would name private files.
        for name in ("memfs.index", "memfs.memory", "memfs.state"):
            logging.getLogger(name).setLevel(logging.ERROR)
    return cfg


def _memory(cfg: Config, must_exist: bool = True) -> Memory:
    if must_exist and not cfg.workspace.is_dir() and cfg.sources.get("workspace", "").startswith("flag"):
        # As click says of a --workspace that is a file: a usage error (exit 2).
        raise click.UsageError(f"Invalid value for '--workspace' / '-w': Directory '{cfg.workspace}' does not "
                               f"exist: create it with `memfs init {cfg.workspace}`")
    if must_exist and not cfg.workspace.is_dir():
        raise click.ClickException(
            f"workspace {cfg.workspace} does not exist: create it with `memfs init {cfg.workspace}` "
            "or pass --workspace"
        )
    from memfs.memory import IndexBusy, Memory
    from memfs.mounttable import memfs_mount_containing

    point = memfs_mount_containing(cfg.workspace)
    if point is not None:
        raise click.ClickException(
            f"{cfg.workspace} is inside the memfs mount {point}: pass --workspace with the workspace folder itself")
    try:
        return Memory(cfg)
    except IndexBusy as exc:  # an index of an older memfs, still held by its mount: say so, no traceback
        raise click.ClickException(str(exc)) from None


def _closest_options(typed: str, names: list[str]) -> list[str]:
    """The options a mistyped one most likely meant.  difflib alone compares whole names, so
    ``--mni`` finds ``--mmr`` but not ``--min-score``; people mistype the start of a long option,
    so each name is also compared by its first ``len(typed)`` characters."""
    from difflib import SequenceMatcher

    word = typed.lstrip("-")  # the dashes every option shares would make everything look alike

    def likeness(name: str) -> float:
        stem = name.lstrip("-")
        whole = SequenceMatcher(None, word, stem).ratio()
        start = SequenceMatcher(None, word, stem[: len(word)]).ratio() if len(stem) > len(word) else 0.0
        return max(whole, start)

    scored = sorted(((likeness(name), name) for name in names if name.startswith("--")), reverse=True)
    return [name for score, name in scored if score >= 0.6][:3]


class _Command(click.Command):
    """A command whose "no such option" error suggests options by their start, too, and that
    says in one line why a state folder of another user's is not used."""

    def invoke(self, ctx: click.Context) -> Any:
        from memfs.userdirs import UnsafeStateDir

        try:
            return super().invoke(ctx)
        except UnsafeStateDir as exc:
            raise click.ClickException(str(exc)) from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            names = [name for param in self.get_params(ctx) for name in getattr(param, "opts", [])]
            better = click.NoSuchOption(exc.option_name, ctx=ctx)
            better.possibilities = _closest_options(exc.option_name, names) or None  # type: ignore[misc]
            raise better from None


class _Group(click.Group):
    command_class = _Command
    group_class = type  # subgroups (memfs history ...) are _Groups too


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="memfs")
@global_options
@click.pass_context
def main(ctx: click.Context, **opts: Any) -> None:
    """memfs: agent memory as plain files, indexed for hybrid search, mountable with FUSE."""
    ctx.obj = opts




def _bar(label: str, rate: bool = False) -> tuple[Callable[[int, int], None], Callable[[], None]]:
    """A click progress bar fed by (done, total) callbacks on a terminal; elsewhere (a log, a
    pipe), with ``rate``, a plain line every progress.PLAIN_EVERY_S: done, total, rate and time left."""
    from memfs.serve.progress import PlainProgress

    state: dict[str, Any] = {"bar": None, "done": 0}
    plain = PlainProgress(label, rate, lambda line: click.echo(line, err=True))
    speed = plain.speed

    def update(done: int, total: int) -> None:
        if not sys.stderr.isatty():
            plain(done, total)
            return
        if state["bar"] is None:
            if total < 20:
                return
            # click's bar shows the time left itself; the item slot shows the rate.
            state["bar"] = click.progressbar(length=total, label=label, file=sys.stderr, show_pos=rate,
                                             item_show_func=(lambda _: speed(state["done"], total).split(",")[0])
                                             if rate else None)
            state["bar"].__enter__()
        state["bar"].length = max(total, done)  # the backlog grows when a big write's exact chunks arrive
        state["bar"].update(done - state["done"], current_item=done)
        state["done"] = done

    def finish() -> None:
        if state["bar"] is not None:
            state["bar"].__exit__(None, None, None)

    return update, finish


@contextlib.contextmanager
def _daemon_progress(answerer: Any, bar: Callable[[int, int], None]) -> Iterator[None]:
    """While a daemon runs `memfs index` (its answer comes at the end), feed ``bar`` from it."""
    from memfs.serve.progress import daemon_progress

    with daemon_progress(answerer.client.invocation, bar):
        yield


def _emit(answer: Answer) -> None:
    """Print a command's answer; its error ends the command as click's errors do."""
    if answer.stdout:
        try:
            click.echo(answer.stdout, nl=False)
        except UnicodeEncodeError:  # a version's bytes that are not UTF-8 (memfs history PATH VERSION)
            sys.stdout.flush()
            sys.stdout.buffer.write(answer.stdout.encode("utf-8", "surrogateescape"))
            sys.stdout.flush()
    if answer.stderr:
        click.echo(answer.stderr, nl=False, err=True)
    if answer.error is not None:
        raise (click.UsageError if answer.usage else click.ClickException)(answer.error)


class _Seen(logging.Handler):
    """Whether a warning was logged (while a command's configuration is settled)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.warned = False

    def emit(self, record: logging.LogRecord) -> None:
        self.warned = True


_READING = frozenset({"search", "get", "status", "context", "history"})


def _check_agent(cfg: Config) -> None:
    """A command that only reads, for an agent named by flag or environment that has no index of
    this workspace while other agents do, is most likely a typo: say so rather than make an
    empty index (and a daemon) for it.  ``memfs index`` or a mount makes one on purpose."""
    if click.get_current_context().command.name not in _READING:
        return
    if not cfg.sources.get("agent", "").startswith(("flag", "env")):
        return
    from memfs.state import indexed_agents

    agents = indexed_agents(cfg)
    if agents and cfg.agent not in agents:
        raise click.ClickException(
            f"the workspace {cfg.workspace} has no index for the agent {cfg.agent!r} (it has: "
            f"{', '.join(agents)}): check the name, or make one with `memfs index --agent {cfg.agent}`")


class _Local:
    """A command's own configuration, settled once whether it starts a daemon, answers in this
    process, or both (a daemon that did not become ready in time)."""

    def __init__(self, opts: dict[str, Any], invocation: Invocation) -> None:
        self.opts = opts
        self.invocation = invocation
        self.cfg: Config | None = None
        self.warned = False

    def config(self) -> Config:
        if self.cfg is None:
            seen = _Seen()
            logging.getLogger("memfs").addHandler(seen)
            try:
                self.cfg = _config(self.opts)
            finally:
                logging.getLogger("memfs").removeHandler(seen)
            self.warned = seen.warned
        return self.cfg

    def open(self) -> tuple[Memory, Config]:
        cfg = self.config()
        _check_agent(cfg)
        return _memory(cfg), cfg

    def start_daemon(self) -> int | None:
        """Start `memfs serve` for this command line (see memfs.serve.ondemand); its pid once it
        answers, or None.  Not when daemon.on_demand is off, nor for a workspace that does not
        exist (the command says so itself)."""
        cfg = self.config()
        # A daemon answers no command whose settings come with warnings (the command prints
        # them itself), and serves no workspace that is missing or inside a mount.
        if not cfg.daemon.on_demand or self.warned or not cfg.workspace.is_dir():
            return None
        _check_agent(cfg)
        from memfs.mounttable import memfs_mount_containing
        from memfs.serve import ondemand

        if memfs_mount_containing(cfg.workspace) is not None:
            return None

        return ondemand.start(cfg.workspace, cfg.agent, cfg.mode == "main", self.invocation)


def _answerer(opts: dict[str, Any]) -> Answerer:
    opts = _options(opts)
    _setup_logging(opts["verbose"])
    invocation = Invocation.here(opts)
    local = _Local(opts, invocation)
    off = opts["no_daemon"] or bool(os.environ.get("MEMFS_NO_DAEMON"))
    return Answerer(invocation, local.open, ask=not off, start_daemon=None if off else local.start_daemon)
