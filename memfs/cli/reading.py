"""The commands that read memory: ``search``, ``get``, ``status``, ``context`` and ``config``
(most of them answered by the daemon serving the workspace, see :mod:`memfs.cli.app`)."""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from memfs.cli.app import (
    _answerer,
    _config,
    _emit,
    global_options,
    main,
)

if TYPE_CHECKING:
    pass


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
        from memfs.memory import BadOption, parse_options

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
