"""``memfs mcp``: the memory as MCP tools, over stdio, for agents that speak MCP and have no file
tools.  Built on the official SDK's ``MCPServer``.

Each tool is one memfs command (:mod:`memfs.commands`), answered by the daemon serving the
workspace when one is up and in this process otherwise, exactly as the CLI answers it: the text a
tool returns is what ``memfs search``/``get``/``context``/``sync`` print, and a command's error is
the tool's error with the same message.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from memfs.config import Config
from memfs.memory import Memory
from memfs.serve.answerer import Answerer
from memfs.serve.wire import Answer, Invocation

# Who asks, for the history of what the tools write: this server's process, through MCP (a
# daemon that answers a tool records the client, not itself).
WHO: dict[str, Any] = {"pid": os.getpid(), "via": "mcp"}

INSTRUCTIONS = (
    "Long-term memory of this agent: plain Markdown files (MEMORY.md for durable facts, memory/DATE.md "
    "daily logs) and synced chats. Search before answering from memory; results are cited as "
    "path#Lstart-Lend and memory_get reads more of a file. Write what must be remembered with memory_append."
)


def _text(answer: Answer, with_notes: bool = False) -> str:
    if answer.error is not None:
        raise ToolError(answer.error)
    return answer.stdout + (answer.stderr if with_notes else "")


def build_server(invocation: Invocation, open_local: Callable[[], tuple[Memory, Config]],
                 serving_here: Callable[[], bool] | None = None) -> tuple[MCPServer, Answerer]:
    answerer = Answerer(invocation, open_local, serving_here)
    server = MCPServer("memfs", instructions=INSTRUCTIONS)

    def ask(command: str, args: dict[str, Any]) -> Answer:
        try:
            answer = answerer.answer(command, args)
        except Exception as exc:  # settling the workspace failed (it was removed, its settings broke)
            raise ToolError(str(getattr(exc, "message", None) or exc)) from None
        # The notes speak of the CLI; a tool's caller continues with the tool.
        answer.stderr = re.sub(r"memfs get (\S+) --from (\d+)", r"memory_get(path='\1', from_line=\2)",
                               answer.stderr)
        return answer

    @server.tool()
    def memory_search(query: str, n: int | None = None, min_score: float | None = None, scope: str | None = None,
                      after: str | None = None, before: str | None = None, mmr: float | None = None,
                      decay: float | None = None) -> str:
        """Search the memory (keywords and meaning). Returns Markdown results, best first, each cited as
        path#Lstart-Lend, or "No results". Leave n and min_score out to use the workspace's settings, as
        every other memfs front end does. n: at most this many (1-100); min_score: 0-1 (calibrated: below it a
        result is likely unrelated); scope (the in= option): memory, sessions, sync, MEMORY.md or a
        path prefix; after/before: YYYY-MM-DD; mmr: 0-1 diversify (0.7 usual); decay: half-life in days."""
        options = {"n": n, "min": min_score, "in": scope, "after": after, "before": before, "mmr": mmr, "decay": decay}
        return _text(ask("search", {"query": query, "options": {k: v for k, v in options.items() if v is not None}}))

    @server.tool()
    def memory_get(path: str, from_line: int = 1, lines: int | None = None, messages: bool = False) -> str:
        """Read lines of a memory file (path relative to the workspace, as search results cite it).
        from_line is 1-based; lines defaults to 200. Says where to continue when there is more.
        messages: for a synced chat or session transcript (.jsonl), its messages as text under the
        chat's title instead of the JSON lines."""
        if from_line < 1 or (lines is not None and lines < 1):
            raise ToolError("from_line and lines must be at least 1")
        return _text(ask("get", {"path": path, "from_line": from_line, "lines": lines, "messages": messages}),
                     with_notes=True)

    @server.tool()
    def memory_context(mode: str | None = None) -> str:
        """The prompt bundle: AGENTS.md, SOUL.md, USER.md, TOOLS.md, today's and yesterday's logs and (main
        mode only) MEMORY.md, within a token budget. mode: main or shared (default: this server's)."""
        return _text(ask("context", {"mode": mode}))

    @server.tool()
    def memory_append(text: str, section: str | None = None, create_section: bool = False) -> str:
        """Remember something: append Markdown to today's daily log, or, with section, to the end of that
        existing section of MEMORY.md (durable facts). A section that is not there is an error naming the
        sections there are, unless create_section is true (then a new ## section is added). Indexed at once."""
        answer = ask("append", {"text": text, "section": section, "create_section": create_section, **WHO})
        if answer.error:
            answer.error = answer.error.replace("ask for the section to be created", "pass create_section=true")
        return _text(answer)

    @server.tool()
    def memory_sync(message: str) -> str:
        """Store a ClawGPT [CLAWGPT-SYNC] message (deduplicated by message id). Returns what was stored."""
        answer = ask("sync", {"data": base64.b64encode(message.encode()).decode(), **WHO})
        return _text(answer, with_notes=True)

    @server.tool()
    def memory_history(path: str | None = None, version: str | None = None, diff: bool = False,
                       deleted: bool = False) -> str:
        """Versions of a memory file, kept whenever it changed. With path alone: its versions, oldest first,
        with when, who and through what. With version (a name from that list): its exact text. diff: a
        unified diff of that version against the one before it (without version: the newest change).
        deleted: the deleted memory files whose versions are kept (restore them by reading a version)."""
        if not deleted and not path:
            raise ToolError("name a memory file (path='MEMORY.md'), or pass deleted=true")
        args = {"path": path, "versions": [version] if version else [], "diff": diff, "deleted": deleted, **WHO}
        return _text(ask("history", args))

    return server, answerer
