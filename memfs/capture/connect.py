"""``memfs connect RUNTIME``: wire Claude Code, Codex CLI or Gemini CLI to a workspace in the
runtime's own files, changing nothing else in them.

    runtime      MCP server entry                 hooks                               instructions
    claude-code  ~/.claude.json mcpServers        ~/.claude/settings.json hooks       ~/.claude/CLAUDE.md
                 (--project: .mcp.json)           (--project: .claude/settings.local.json)  (CLAUDE.md)
    codex        ~/.codex/config.toml             ~/.codex/hooks.json, and notify     ~/.codex/AGENTS.md
                 [mcp_servers.memfs]              in config.toml when it is free      (AGENTS.md)
                 (--project: .codex/...)
    gemini       ~/.gemini/settings.json mcpServers and hooks                         ~/.gemini/GEMINI.md
                 (--project: .gemini/settings.json)                                   (GEMINI.md)

Each file is edited in place (:mod:`.jsonedit` for JSON, :mod:`.textblock` for Markdown and
TOML), a copy of it as it was kept once beside it (``FILE.bak-memfs``), and running it again
changes nothing.  ``--remove`` takes out what it added: a file it made is deleted, and a file
that then says what its backup says gets its backup's very bytes back.
"""

from __future__ import annotations

import difflib
import os
import re
import shlex
import shutil
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memfs.capture import jsonedit, textblock

BACKUP = ".bak-memfs"
SERVER = "memfs"
HOOK_TIMEOUT_S = 10  # what a runtime allows our hook before killing it (it exits within 1 s anyway)
MD = textblock.Markers("<!-- memfs:begin", "<!-- memfs:end")
TOML = textblock.Markers("# memfs:begin", "# memfs:end")
NOTIFY_MARK = "# memfs:notify"
# A hook command of ours, whatever memfs program and workspace it names.
OURS = re.compile(r"(?:^|[/\s'\"])memfs['\"]?\s+hook\s+(?:claude-code|codex|gemini)\s+\w+")
HOOKED: dict[str, tuple[str, ...]] = {
    "claude-code": ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop", "SessionEnd"),
    "codex": ("SessionStart", "UserPromptSubmit", "PreCompact", "Stop"),
    "gemini": ("SessionStart", "BeforeAgent", "PreCompress", "AfterAgent", "SessionEnd"),
}
NAMES = {"claude-code": "Claude Code", "codex": "Codex", "gemini": "Gemini CLI"}


class ConnectError(ValueError):
    """A file that cannot be edited safely (not JSON, an entry of the user's in the way)."""


@dataclass
class Target:
    """Who to connect, and with what: the workspace, agent and mode the MCP server and hooks use."""

    runtime: str
    workspace: Path
    agent: str = "main"
    mode: str = "main"
    project: Path | None = None
    home: Path = field(default_factory=Path.home)
    env: dict[str, str] = field(default_factory=dict)
    mount: Path | None = None  # a mount of the workspace, named in the instructions

    def program(self) -> list[str]:
        """How the runtime starts memfs: this installation's ``memfs`` script, else this Python."""
        argv0 = Path(sys.argv[0])
        if argv0.name == "memfs" and argv0.is_file():
            return [str(argv0.resolve())]
        found = shutil.which("memfs")
        return [found] if found else [sys.executable, "-P", "-m", "memfs"]

    def options(self) -> list[str]:
        out = ["-w", str(self.workspace)]
        if self.agent != "main":
            out += ["-a", self.agent]
        if self.mode != "main":
            out += ["--mode", self.mode]
        return out

    def hook_command(self, event: str) -> str:
        return shlex.join([*self.program(), "hook", self.runtime, event, *self.options()])

    def mcp(self) -> dict[str, Any]:
        program = self.program()
        return {"command": program[0], "args": [*program[1:], "mcp", *self.options()]}


@dataclass
class Edit:
    path: Path
    what: str  # what memfs puts there, in words
    add: Callable[[str], str]
    remove: Callable[[str], str]
    empty: Callable[[str], bool]  # the file holds nothing once ours is out (a file memfs made goes)
    check: Callable[[str], None] = lambda text: None
    containers: tuple[tuple[str, ...], ...] = ()  # JSON objects it makes when missing (pruned again)


@dataclass
class Change:
    path: Path
    what: str
    before: str | None  # None: the file does not exist
    after: str | None  # None: the file is to be deleted
    drop_backup: bool = False

    @property
    def changed(self) -> bool:
        return self.before != self.after

    def diff(self) -> str:
        a = (self.before or "").splitlines(keepends=True)
        b = (self.after or "").splitlines(keepends=True)
        lines = difflib.unified_diff(a, b, f"{self.path}" if self.before is not None else "/dev/null",
                                     f"{self.path}" if self.after is not None else "/dev/null")
        return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


# --- JSON edits ----------------------------------------------------------------------------------

def _json_root(text: str) -> tuple[str, jsonedit.Object]:
    if not text.strip():
        text = "{}\n"
    root = jsonedit.parse(text)
    if not isinstance(root, jsonedit.Object):
        raise ConnectError("the file is not a JSON object")
    return text, root


def _ensure_object(text: str, *keys: str) -> tuple[str, jsonedit.Object]:
    """The object at ``keys``, made (empty) where missing; the text with it."""
    text, node = _json_root(text)
    for depth, key in enumerate(keys):
        child = node.get(key)
        if child is None:
            text = jsonedit.add_member(text, node, key, {})
            _, root = _json_root(text)
            child = jsonedit.at(root, *keys[: depth + 1])
        if not isinstance(child, jsonedit.Object):
            raise ConnectError(f"{'.'.join(keys[:depth + 1])} is not a JSON object")
        node = child
    return text, node


def mcp_edit(path: Path, *keys: str, entry: dict[str, Any]) -> Edit:
    """The ``memfs`` entry in the object at ``keys`` (``mcpServers``)."""

    def add(text: str) -> str:
        text, servers = _ensure_object(text, *keys)
        current = servers.get(SERVER)
        if current is None:
            return jsonedit.add_member(text, servers, SERVER, entry)
        if jsonedit.plain(text, current) == entry:
            return text
        return jsonedit.replace_node(text, current, entry)  # an earlier connect's (another workspace)

    def remove(text: str) -> str:
        _, root = _json_root(text)
        servers = jsonedit.at(root, *keys)
        if isinstance(servers, jsonedit.Object) and servers.get(SERVER) is not None:
            text = jsonedit.remove_member(text, servers, SERVER)
        return text

    return Edit(path, f"the MCP server {SERVER!r}", add, remove, _json_empty, containers=(keys,))


def _ours(text: str, group: jsonedit.Node) -> list[int]:
    """Indexes of the hooks of ours in a matcher group ``{"hooks": [{"command": ...}]}``."""
    inner = group.get("hooks") if isinstance(group, jsonedit.Object) else None
    if not isinstance(inner, jsonedit.Array):
        return []
    found = []
    for i, item in enumerate(inner.items):
        command = jsonedit.plain(text, item).get("command") if isinstance(item, jsonedit.Object) else None
        if isinstance(command, str) and OURS.search(command):
            found.append(i)
    return found


def hooks_edit(path: Path, events: dict[str, dict[str, Any]], keys: tuple[str, ...] = ("hooks",)) -> Edit:
    """One matcher group per event in the object at ``keys``, each running ``memfs hook``."""

    def add(text: str) -> str:
        for event, handler in events.items():
            text, table = _ensure_object(text, *keys)
            groups = table.get(event)
            if groups is None:
                text = jsonedit.add_member(text, table, event, [{"hooks": [handler]}])
                continue
            if not isinstance(groups, jsonedit.Array):
                raise ConnectError(f"{'.'.join(keys)}.{event} is not a list")
            mine = [(g, i) for g in groups.items for i in _ours(text, g)]
            if not mine:
                text = jsonedit.add_item(text, groups, {"hooks": [handler]})
                continue
            group, index = mine[0]
            item = group.get("hooks").items[index]  # type: ignore[union-attr]
            if jsonedit.plain(text, item) != handler:
                text = jsonedit.replace_node(text, item, handler)
        return text

    def remove(text: str) -> str:
        for event in events:
            while True:
                _, root = _json_root(text)
                groups = jsonedit.at(root, *keys, event)
                if not isinstance(groups, jsonedit.Array):
                    break
                found = [(gi, g, _ours(text, g)) for gi, g in enumerate(groups.items) if _ours(text, g)]
                if not found:
                    break
                gi, group, mine = found[0]
                inner = group.get("hooks")  # type: ignore[union-attr]
                if len(inner.items) == len(mine):  # type: ignore[union-attr]
                    if len(groups.items) == 1:
                        table = jsonedit.at(root, *keys)
                        text = jsonedit.remove_member(text, table, event)  # type: ignore[arg-type]
                    else:
                        text = jsonedit.remove_item(text, groups, gi)
                else:
                    text = jsonedit.remove_item(text, inner, mine[0])  # type: ignore[arg-type]
        return text

    return Edit(path, "hooks " + ", ".join(events), add, remove, _json_empty, containers=(keys,))


def _json_empty(text: str) -> bool:
    """Nothing but empty objects: what a file memfs made holds once its entries are out."""

    def bare(value: Any) -> bool:
        return isinstance(value, dict) and all(bare(v) for v in value.values())

    try:
        return bare(jsonedit.plain(text)) if text.strip() else True
    except jsonedit.JsonError:
        return False


# --- text edits ----------------------------------------------------------------------------------

def block_edit(path: Path, markers: textblock.Markers, begin: str, body: str, end: str, what: str,
               check: Callable[[str], None] = lambda text: None) -> Edit:
    block = markers.block(begin, body, end)
    return Edit(path, what, lambda text: markers.put(text, block), markers.take, lambda text: not text.strip(), check)


def notify_edit(path: Path, argv: list[str]) -> Edit:
    """Codex's top-level ``notify`` program: memfs's, when the user has none of their own."""
    line = f"notify = {_toml_list(argv)}  {NOTIFY_MARK}"

    def add(text: str) -> str:
        if NOTIFY_MARK not in text and "notify" in _toml(text):
            return text  # the user's own notify: left alone (the Stop hook captures turns)
        return textblock.put_line(text, line, NOTIFY_MARK)

    return Edit(path, "notify (turn ends)", add, lambda text: textblock.take_line(text, NOTIFY_MARK),
                lambda text: not text.strip(), _check_toml)


def _toml_list(items: list[str]) -> str:
    return "[" + ", ".join('"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"' for s in items) + "]"


def _toml(text: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConnectError(f"not TOML: {exc}") from None


def _check_toml(text: str) -> None:
    _toml(text)


def _codex_mcp(edit: Edit) -> Edit:
    """Codex's MCP block, refused beside a [mcp_servers.memfs] of the user's own."""
    put = edit.add

    def add(text: str) -> str:
        theirs = _toml(TOML.take(text)).get("mcp_servers")
        if isinstance(theirs, dict) and SERVER in theirs:
            raise ConnectError(f"it has an [mcp_servers.{SERVER}] table of its own: take it out (memfs writes its "
                               "own between # memfs:begin and # memfs:end), then connect again")
        return put(text)

    edit.add = add
    return edit


# --- what each runtime gets ----------------------------------------------------------------------

def instructions(target: Target, tools: str) -> str:
    """The note the model reads in its instruction file: that memory exists and how to use it."""
    search = (f"`cat \"{target.mount}/search/<your question>.md\"` (this workspace is mounted at {target.mount}) or "
              if target.mount else "")
    context = f"`cat {target.mount}/context/{target.mode}.md` or " if target.mount else ""
    options = " ".join(shlex.quote(o) for o in target.options())
    return "\n".join([
        "## Memory (memfs)",
        "",
        (f"You have long-term memory: the memfs workspace {target.workspace} (notes, daily logs, and your "
         "past sessions: this one is saved into it as it goes, and at each compaction)."),
        (f"- Before answering from memory or redoing past work, search it: {search}`memfs search \"<question>\" "
         f"{options}` (`--in sessions` for past sessions only). Results cite `path#Lstart-Lend`."),
        (f"- Read on from a result: `memfs get PATH --from N {options}` (`--messages` shows a session's "
         "messages as text)."),
        f"- The standing context (instructions, today's log, long-term facts): {context}`memfs context {options}`.",
        f"- Without a shell or a mount, the MCP server `{SERVER}` has the same: {tools}.",
        "- Write what must be remembered to memory/YYYY-MM-DD.md (today's log), or MEMORY.md for durable facts.",
    ])


MCP_TOOLS = "memory_search, memory_get, memory_context, memory_append"


def _handlers(target: Target, style: str) -> dict[str, dict[str, Any]]:
    out = {}
    for event in HOOKED[target.runtime]:
        handler: dict[str, Any] = {"type": "command", "command": target.hook_command(event)}
        if style == "claude":
            handler["timeout"] = HOOK_TIMEOUT_S
        elif style == "gemini":
            handler = {"name": f"memfs-{event}", **handler, "timeout": HOOK_TIMEOUT_S * 1000}
        out[event] = handler
    return out


def edits(target: Target) -> list[Edit]:
    """Every file edit connecting ``target.runtime``."""
    p, home, env = target.project, target.home, target.env
    note = instructions(target, MCP_TOOLS)
    begin_md = f"<!-- memfs:begin (written by `memfs connect {target.runtime}`; `memfs connect {target.runtime} --remove` takes it out) -->"
    end_md = "<!-- memfs:end -->"
    if target.runtime == "claude-code":
        claude_dir = Path(env["CLAUDE_CONFIG_DIR"]) if env.get("CLAUDE_CONFIG_DIR") else home / ".claude"
        return [
            mcp_edit(p / ".mcp.json" if p else home / ".claude.json", "mcpServers",
                     entry={"type": "stdio", **target.mcp(), "env": {}}),
            hooks_edit(p / ".claude" / "settings.local.json" if p else claude_dir / "settings.json",
                       _handlers(target, "claude")),
            block_edit(p / "CLAUDE.md" if p else claude_dir / "CLAUDE.md", MD, begin_md, note, end_md,
                       "a note on memory"),
        ]
    if target.runtime == "codex":
        codex_dir = p / ".codex" if p else Path(env["CODEX_HOME"]) if env.get("CODEX_HOME") else home / ".codex"
        config = codex_dir / "config.toml"
        mcp = target.mcp()
        body = f"[mcp_servers.{SERVER}]\ncommand = {_toml_list([mcp['command']])[1:-1]}\nargs = {_toml_list(mcp['args'])}"
        begin = "# memfs:begin (written by `memfs connect codex`; `memfs connect codex --remove` takes it out)"
        return [
            _codex_mcp(block_edit(config, TOML, begin, body, "# memfs:end", f"the MCP server {SERVER!r}", _check_toml)),
            notify_edit(config, [*target.program(), "hook", "codex", "notify", *target.options()]),
            hooks_edit(codex_dir / "hooks.json", {e: {k: v for k, v in h.items() if k != "timeout"}
                                                  for e, h in _handlers(target, "codex").items()}),
            block_edit((p or codex_dir) / "AGENTS.md", MD, begin_md, note, end_md, "a note on memory"),
        ]
    if target.runtime == "gemini":
        gemini_dir = (p or home) / ".gemini"
        return [
            mcp_edit(gemini_dir / "settings.json", "mcpServers", entry=target.mcp()),
            hooks_edit(gemini_dir / "settings.json", _handlers(target, "gemini")),
            block_edit((p or gemini_dir) / "GEMINI.md", MD, begin_md, note, end_md, "a note on memory"),
        ]
    raise ConnectError(f"unknown runtime {target.runtime!r}: {', '.join(HOOKED)}")


# --- planning and applying -----------------------------------------------------------------------

def backup_of(path: Path) -> Path:
    return path.with_name(path.name + BACKUP)


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ConnectError(f"{path} is not UTF-8 text: left alone") from None


def plan(target: Target, remove: bool = False) -> list[Change]:
    """What each file would become (one Change per file, its edits applied in order)."""
    by_file: dict[Path, list[Edit]] = {}
    for edit in edits(target):
        by_file.setdefault(edit.path, []).append(edit)
    changes = []
    for path, file_edits in by_file.items():
        before = _read(path)
        if remove and before is None:
            changes.append(Change(path, ", ".join(e.what for e in file_edits), None, None))
            continue
        text: str | None = before or ""
        try:
            for edit in file_edits:
                text = edit.remove(text) if remove else edit.add(text)  # type: ignore[arg-type]
                if not remove:
                    edit.check(text)  # type: ignore[arg-type]
        except (jsonedit.JsonError, ConnectError) as exc:
            raise ConnectError(f"{path}: {exc}") from None
        if remove and before is not None:
            text = _restored(path, text, file_edits)  # type: ignore[arg-type]
        if before is None and not remove and text == "":
            text = None
        changes.append(Change(path, ", ".join(e.what for e in file_edits), before, text))
    return changes


def _restored(path: Path, text: str, file_edits: list[Edit]) -> str | None:
    """After the removal: the backup's own bytes when the file now says what the backup says
    (its spacing and all); nothing when memfs made the file (no backup) and it is empty now."""
    backup = backup_of(path)
    kept = _read(backup) if backup.exists() else None
    if path.suffix == ".json":
        text = _prune(text, [c for e in file_edits for c in e.containers], kept)
    if kept is None:
        return None if all(e.empty(text) for e in file_edits) else text
    if kept == text:
        return text
    if path.suffix == ".json":
        try:
            if jsonedit.plain(text) == jsonedit.plain(kept):
                return kept
        except jsonedit.JsonError:
            pass
    return text


def _prune(text: str, containers: list[tuple[str, ...]], kept: str | None) -> str:
    """Take out the objects memfs makes when missing (``mcpServers``, ``hooks``) that are empty
    now and that the file as it was (its backup) did not have."""
    try:
        before = jsonedit.plain(kept) if kept is not None else {}
    except jsonedit.JsonError:
        before = {}
    for keys in sorted(set(containers), key=len, reverse=True):
        had: Any = before
        for key in keys:
            had = had.get(key) if isinstance(had, dict) else None
        node = jsonedit.at(jsonedit.parse(text), *keys)
        if had is None and isinstance(node, jsonedit.Object) and not node.members:
            parent = jsonedit.at(jsonedit.parse(text), *keys[:-1])
            if isinstance(parent, jsonedit.Object):
                text = jsonedit.remove_member(text, parent, keys[-1])
    return text


def _drop_backup_after(change: Change) -> None:
    """A removal that leaves the file as its backup (or gone, as it was) has no more use for the
    backup: it is deleted once the file is written (see apply)."""
    change.drop_backup = backup_of(change.path).exists() and (
        change.after is None or _read(backup_of(change.path)) == change.after)


def apply(changes: list[Change], remove: bool = False) -> list[str]:
    """Write the changes (a backup of each file first, once); lines saying what was done."""
    said = []
    for change in changes:
        if remove:
            _drop_backup_after(change)
        if not change.changed:
            said.append(f"{change.path}: nothing of memfs's there" if remove
                        else f"{change.path}: unchanged ({change.what} already there)")
            continue
        if change.after is None:
            change.path.unlink()
            said.append(f"{change.path}: deleted (memfs had made it)")
            continue
        if change.before is not None and not backup_of(change.path).exists():
            shutil.copy2(change.path, backup_of(change.path))
        change.path.parent.mkdir(parents=True, exist_ok=True)
        scratch = change.path.with_name(change.path.name + f".memfs-{os.getpid()}.tmp")
        scratch.write_text(change.after, encoding="utf-8")
        if change.before is not None:
            shutil.copymode(change.path, scratch)
        os.replace(scratch, change.path)
        verb = "took out" if remove else "added"
        backup = backup_of(change.path)
        said.append(f"{change.path}: {verb} {change.what}" + (f" (as it was: {backup})" if backup.exists() and not
                                                              change.drop_backup else ""))
    for change in changes:
        if change.drop_backup:
            backup_of(change.path).unlink(missing_ok=True)
    return said
