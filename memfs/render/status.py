"""``memfs status`` and the ``.memfs/status`` virtual file: one plain-text rendering."""

from __future__ import annotations

from typing import Any

from memfs.index.embedding.backlog import duration

WARNINGS_SHOWN = 10
KINDS = {"mount": "mount", "serve": "memfs serve", "on-demand": "memfs serve, started on demand",
         "mcp": "memfs mcp"}


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def describe(process: dict[str, Any]) -> str:
    """A process that serves the workspace (memfs.serve.listing), in one line:
    ``pid 123: mount on /mnt (main mode, answers commands)``."""
    what = KINDS.get(str(process["kind"]), str(process["kind"]))
    if process.get("mountpoint"):
        what += f" on {process['mountpoint']}"
    notes = [f"{process['mode']} mode", "answers commands" if process["answers"] else
             "another process answers commands"]
    if process.get("idle_s") is not None:
        notes.append(f"stops after {process['idle_s']:g} s without a request")
    return f"pid {process['pid']}: {what} ({', '.join(notes)})"


BAR_WIDTH = 30


def _pending(info: dict[str, Any], bar: bool) -> str:
    """The embedding backlog: how many wait, how far it has got, the rate and the time left.
    The passages files still being chunked (big writes, a burst's files) will make are counted
    as waiting (estimated, ``pending_estimated``): left out, the share would fall back when they arrive (65% then 2%
    during an import); counted, what is embedded and what waits still make the total."""
    coming = int(info.get("pending_estimated") or 0)
    waiting = int(info["pending"]) + coming
    line = f"pending:    {waiting} passage(s) waiting for an embedding"
    if not waiting:
        return line
    owed = len(info.get("provisional") or [])
    big = (f"the {owed} file{'s' if owed != 1 else ''}" if owed else "the files") + " being chunked"
    estimated = f"about {coming} of them to come from {big}" if coming else ""
    total = max(int(info.get("passages") or 0), waiting)
    done = 1 - waiting / total
    rate, left = float(info.get("embed_rate") or 0), info.get("seconds_left")
    if rate and left is not None:
        speed = f"{rate:.1f}/s, {duration(float(left))} left"
        if not info.get("embedding_now") and owed:  # their chunks come first: see Backlog.line
            speed = f"files are being chunked first (then embedded, at {rate:.1f}/s: {duration(float(left))})"
        elif not info.get("embedding_now"):
            speed = f"nothing is embedding now (at the last rate, {rate:.1f}/s: {duration(float(left))})"
    else:
        speed = "no embedding rate measured yet"
    if bar:
        filled = round(done * BAR_WIDTH)
        return (f"pending:    [{'#' * filled}{'-' * (BAR_WIDTH - filled)}] {done:.0%} of {total} passages embedded, "
                f"{waiting} waiting{f' ({estimated})' if estimated else ''}; {speed}")
    return f"{line} ({f'{estimated}; ' if estimated else ''}{done:.0%} of {total} embedded; {speed})"


def _provisional(info: dict[str, object]) -> list[str]:
    """Files searchable by keyword whose exact chunks are still being made (big writes, the files
    of a burst of closes: see :mod:`memfs.index.bigwrites`)."""
    paths: list[str] = info.get("provisional") or []  # type: ignore[assignment]
    if not paths:
        return []
    shown = ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")
    return [f"chunking:   {len(paths)} file{'s' if len(paths) != 1 else ''} found by keyword, "
            f"being chunked: {shown}"]


def render_status(info: dict[str, object], bar: bool = False) -> str:
    """``bar``: draw the embedding progress as a bar (for a terminal)."""
    if "index_unavailable" in info:
        return _unavailable(info)
    model = f"{info['provider']} ({info['model']}, {info['dims']} dims)" if info.get("model") else str(info["provider"])
    lines = [
        f"workspace:  {info['workspace']}",
        f"agent:      {info['agent']}",
        f"mode:       {info.get('mode', 'main')}",
        f"files:      {info['files']} ({info['skipped']} skipped)",
        f"chunks:     {info['chunks']}",
        *_provisional(info),
        _pending(info, bar),
        f"provider:   {model}",
    ]
    if "embedding_service" in info:
        service = info["embedding_service"]
        if isinstance(service, dict) and "error" in service:
            lines.append(f"model in:   each process that embeds (no embedding service: {service['error']})")
        elif isinstance(service, dict):
            lines.append(f"model in:   the embedding service, pid {service['pid']} (exits after "
                         f"{float(service.get('idle_s', 0)):g} s without a request)")
        else:
            lines.append("model in:   the embedding service, not running (it starts at the next embedding)")
    if info.get("reading_wanted"):
        lines.append(f"reading:    {info['reading']}, as the index was built; `memfs index --rebuild` (no mount "
                     f"running) makes it {info['reading_wanted']}: less embedding work")
    if "index_path" in info:  # a shared view is not told about the index itself
        lines += [
            f"index:      {info['index_path']} ({_size(int(info['index_bytes']))}, generation {info['generation']})",
            f"cache:      {info['cached_embeddings']} embeddings",
        ]
    if "history_versions" in info:
        versions, files = int(info["history_versions"]), int(info["history_files"])
        lines.append(f"history:    {versions} version{'s' if versions != 1 else ''} of {files} "
                     f"file{'s' if files != 1 else ''}, "
                     f"{_size(int(info['history_bytes']))} (kept {info['history_keep_days']:g} days, "
                     f"at most {info['history_max_mb']:g} MB; {info['history_path']})")
    problems: list[dict[str, str]] = info.get("problems") or []  # type: ignore[assignment]
    # Every file that is not indexed, with why (what a search cannot find must be said); files
    # that are indexed but hold bytes that are not text only up to a point.
    for problem in problems:
        if problem["not_indexed"]:
            lines.append(f"skipped:    {problem['path']}: {problem['not_indexed'].removeprefix('skipped: ')}")
    warned = [p for p in problems if not p["not_indexed"]]
    for problem in warned[:WARNINGS_SHOWN]:
        lines.append(f"problem:    {problem['path']}: {problem['warning']}")
    if len(warned) > WARNINGS_SHOWN:
        lines.append(f"problem:    ... and {len(warned) - WARNINGS_SHOWN} more (memfs status --json lists them all)")
    if info.get("mounted_at"):
        lines.append(f"mount:      {info['mounted_at']} (up {info['uptime_s']} s)")
    if "search_renders" in info:
        lines.append(f"searches:   {info['search_renders']} search file rendering(s), the longest waited "
                     f"{float(info['longest_vector_wait_ms']):g} ms for vectors")  # type: ignore[arg-type]
    if "processes" in info:  # `memfs status` and a mount's .memfs/status
        processes: list[dict[str, object]] = info["processes"]  # type: ignore[assignment]
        for process in processes:
            lines.append(f"served by:  {describe(process)}")
        if not processes:
            lines.append("served by:  nothing running (commands start `memfs serve` on demand; see daemon.on_demand)")
    lines += _hooks(info.get("hooks") or {})
    if info.get("provider_error"):
        lines.append(f"warning:    embeddings unavailable: {info['provider_error']}")
    if "owed" in info:
        owed: list[str] = info["owed"]  # type: ignore[assignment]
        lines.append(f"index:      catching up with {len(owed)} file(s) written while its server was unavailable")
    return "\n".join(lines) + "\n"


HOOKS_SHOWN = 3


def _hooks(hooks: dict[str, Any]) -> list[str]:
    """What the runtimes' hooks (`memfs hook`) did last, and their last problems."""
    runs = sorted((hooks.get("runs") or {}).items(), key=lambda kv: str(kv[1].get("at")), reverse=True)
    lines = [f"hook:       {name} at {run.get('at')}: {run.get('outcome')}" for name, run in runs[:HOOKS_SHOWN]]
    lines += [f"problem:    hook {p.get('hook')} at {p.get('at')}: {p.get('problem')}"
              for p in (hooks.get("problems") or [])[:HOOKS_SHOWN]]
    return lines


def _unavailable(info: dict[str, object]) -> str:
    """Status while the index's server is away: what is known without it."""
    owed: list[str] = info.get("owed") or []  # type: ignore[assignment]
    lines = [
        f"workspace:  {info['workspace']}",
        f"agent:      {info['agent']}",
        f"mode:       {info.get('mode', 'main')}",
        f"index:      {info['index_unavailable']}",
        f"owed:       {len(owed)} file(s) written since, indexed when it answers again"
        + (f": {', '.join(owed[:3])}{' and more' if len(owed) > 3 else ''}" if owed else ""),
    ]
    if info.get("mounted_at"):
        lines.append(f"mount:      {info['mounted_at']} (up {info['uptime_s']} s)")
    return "\n".join(lines) + "\n"
