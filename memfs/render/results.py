"""Search results as Markdown (for people and agents reading a file) and as JSON."""

from __future__ import annotations

import json
import re
import shlex

from memfs.index.search.hybrid import SearchResponse, SearchResult


def _fence(text: str) -> str:
    longest = max((len(m.group(0)) for m in re.finditer(r"`+", text)), default=0)
    return "`" * max(3, longest + 1)


def render_json(response: SearchResponse) -> str:
    return json.dumps(response.as_dict(), ensure_ascii=False) + "\n"


def _around(result: SearchResult) -> str:
    """How to read the passage around one result (its chunk), under that result."""
    start = result.chunk_start_line or result.start_line
    end = result.chunk_end_line or result.end_line
    path = shlex.quote(result.path)
    messages = " --messages" if result.chat_title or result.chat_id else ""
    return (f"Read around it: sed -n '{start},{end}p' {path}  "
            f"(or: memfs get {path} --from {start} --lines {end - start + 1}{messages})")


def render_markdown(response: SearchResponse) -> str:
    results = response.results
    model = f"{response.provider}/{response.model}" if response.model else response.provider
    lines = [
        f"# memfs search: {response.query}",
        "",
        f"{len(results)} result{'s' if len(results) != 1 else ''} · embeddings: {model or 'none'} · "
        + (f"index generation {response.generation} · " if response.generation is not None else "")
        + f"pending: {response.pending}"
        + (f" · agents: {', '.join(response.agents)}" if response.agents else ""),
    ]
    for warning in response.warnings:
        lines += ["", f"> warning: {warning}"]
    if response.pending_note:
        lines += ["", f"> pending: {response.pending_note}."]
    for rank, result in enumerate(results, start=1):
        fence = _fence(result.snippet)
        lines += ["", f"## {rank}. {result.citation}", ""]
        if result.chat_title or result.chat_id:
            # A synced chat's or session's messages: which conversation they are from, as a
            # daily log's turn shows its heading.
            lines += [f"### {result.chat_title or result.chat_id}", ""]
        chat = f"chat {result.chat_id} · " if result.chat_id else ""
        agent = f"agent {result.agent} · " if result.agent else ""
        lines += [
            f"{agent}{chat}score {result.score:.3f} (vector {result.vector_score:.3f}, keyword {result.text_score:.3f})",
            "",
            fence,
            result.snippet,
            fence,
            "",
            _around(result),
        ]
    if not results and not response.unavailable:
        lines += ["", "No results. Try other words, or a lower minimum score (memfs search --min-score 0.1)."]
    return "\n".join(lines) + "\n"
