"""``memfs mcp``: the memory as MCP tools, over stdio, for agents that speak MCP and have no file
tools.  Built on the official SDK's ``MCPServer``.

Each tool is one memfs command (:mod:`memfs.commands`), answered by the daemon serving the
workspace when one is up and in this process otherwise, exactly as the CLI answers it: the text a
tool returns is what ``memfs search``/``get``/``context``/``sync`` print, and a command's error is
the tool's error with the same message.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError

from memfs.config import Config
from memfs.memory import Memory
from memfs.serve.answerer import Answerer
from memfs.serve.wire import Answer, Invocation

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
        path#Lstart-Lend, or "No results". n: at most this many (1-100); min_score: 0-1 (default 0.52,
        calibrated: below it a result is likely unrelated); scope (the in= option): memory, sessions, sync, MEMORY.md or a
        path prefix; after/before: YYYY-MM-DD; mmr: 0-1 diversify (0.7 usual); decay: half-life in days."""
        options = {"n": n, "min": min_score, "in": scope, "after": after, "before": before, "mmr": mmr, "decay": decay}
        return _text(ask("search", {"query": query, "options": {k: v for k, v in options.items() if v is not None}}))

    @server.tool()
    def memory_get(path: str, from_line: int = 1, lines: int | None = None) -> str:
        """Read lines of a memory file (path relative to the workspace, as search results cite it).
        from_line is 1-based; lines defaults to 200. Says where to continue when there is more."""
        if from_line < 1 or (lines is not None and lines < 1):
            raise ToolError("from_line and lines must be at least 1")
        return _text(ask("get", {"path": path, "from_line": from_line, "lines": lines}), with_notes=True)

    @server.tool()
    def memory_context(mode: str | None = None) -> str:
        """The prompt bundle: AGENTS.md, SOUL.md, USER.md, TOOLS.md, today's and yesterday's logs and (main
        mode only) MEMORY.md, within a token budget. mode: main or shared (default: this server's)."""
        return _text(ask("context", {"mode": mode}))

    @server.tool()
    def memory_append(text: str, section: str | None = None) -> str:
        """Remember something: append Markdown to today's daily log, or, with section, to that ## section
        of MEMORY.md (durable facts; created when missing). Indexed at once."""
        return _text(ask("append", {"text": text, "section": section}))

    @server.tool()
    def memory_sync(message: str) -> str:
        """Store a ClawGPT [CLAWGPT-SYNC] message (deduplicated by message id). Returns what was stored."""
        answer = ask("sync", {"data": base64.b64encode(message.encode()).decode()})
        return _text(answer, with_notes=True)

    return server, answerer
