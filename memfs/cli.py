"""The ``memfs`` command line: the only place that parses argv and prints (but for
:mod:`memfs.quickcli`, the entry point, which answers a read-only command a daemon serves without it)."""

from __future__ import annotations

import contextlib
import json
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


_SEARCH_FLAGS = {"n": "-n", "min": "--min-score", "in": "--in", "after": "--after", "before": "--before",
                 "mmr": "--mmr", "decay": "--decay"}


def _as_flags(message: str) -> str:
    """A search option's error, written for a search file's name (``min=2: min must be from 0 to
    1``), in the words of the command line (``--min-score 2: --min-score must be from 0 to 1``)."""
    import re

    for key, flag in _SEARCH_FLAGS.items():
        message = re.sub(rf"(?<![\w-]){key}=", f"{flag} ", message)
        message = re.sub(rf"(?<![\w-]){key} (must|is) ", rf"{flag} \1 ", message)
    return message


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
@global_options(many_agents=True)
def search(query: str, as_json: bool, limit: str | None, min_score: str | None, scope: str | None,
           after: str | None, before: str | None, mmr: str | None, decay: str | None, **opts: Any) -> None:
    """Hybrid search of the memory.  QUERY '-' reads one query per line from stdin."""
    given = {"n": limit, "min": min_score, "in": scope, "after": after, "before": before, "mmr": mmr, "decay": decay}
    options = {k: v for k, v in given.items() if v is not None}
    # The first --agent is who searches (its index, its login: see _options); the others are
    # read beside it.
    named = list(dict.fromkeys(opts.get("agent") or ()))
    others = named[1:]
    if options:  # a mistyped option is a usage error before anything else is looked at
        from memfs.index.search.hybrid import BadOption, parse_options

        try:
            parse_options(options)
        except BadOption as exc:
            raise click.UsageError(_as_flags(str(exc))) from None
    with _answerer(opts) as answerer:
        if query == "-":
            for line in sys.stdin:
                # One answer per input line, blank or not, so answers match questions by position.
                _emit(answerer.answer("search", {"query": line.rstrip("\n"), "json": as_json, "options": options,
                                                 "line": True, **({"agents": others} if others else {})}))
                sys.stdout.flush()
            return
        _emit(answerer.answer("search", {"query": query, "json": as_json, "options": options,
                                         **({"agents": others} if others else {})}))


@main.command()
@click.argument("path")
@click.option("--from", "from_line", type=click.IntRange(min=1), default=1, show_default=True,
              help="First line (1-based).")
@click.option("--lines", type=click.IntRange(min=1), default=None,
              help="How many lines (default 200; output is capped).")
@click.option("--messages", is_flag=True,
              help="A sync file or transcript: print its messages as text under their chat's title, not the JSON.")
@click.option("--json", "as_json", is_flag=True)
@global_options
def get(path: str, from_line: int, lines: int | None, messages: bool, as_json: bool, **opts: Any) -> None:
    """Read part of a memory file, bounded; says where to continue.  PATH is relative to the
    workspace (as search results cite it), or to the current folder inside the workspace."""
    with _answerer(opts) as answerer:
        _emit(answerer.answer("get", {"path": path, "from_line": from_line, "lines": lines, "json": as_json,
                                      "messages": messages}))


@main.command()
@click.option("--json", "as_json", is_flag=True)
@global_options
def status(as_json: bool, **opts: Any) -> None:
    """Files, chunks, pending embeddings, provider and index size."""
    with _answerer(opts) as answerer:
        _emit(answerer.answer("status", {"json": as_json, "tty": sys.stdout.isatty()}))


@main.command()
@click.argument("bundle_mode", metavar="[main|shared]", required=False, default=None)
@global_options
def context(bundle_mode: str | None, **opts: Any) -> None:
    """Print the context bundle (main, or shared without private files); same bytes as
    context/MODE.md.  Without an argument: the bundle of --mode (main by default)."""
    with _answerer(opts) as answerer:
        _emit(answerer.answer("context", {"mode": bundle_mode}))


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


from memfs.pgcli import register as _register_pg  # noqa: E402  (the `pg` group lives in its own module)

_register_pg(main)

if __name__ == "__main__":
    main()
