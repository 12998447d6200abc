"""Recall on a prompt: what ``memfs hook`` adds to an agent's prompt when ``recall.on_prompt`` is
on.  The prompt is searched as any search is (in the caller's mode: a shared one never sees a
private path, MEMORY.md and sessions/ by default), the results that pass ``search.min_score``
are listed, best first, as long as they fit in ``recall.max_tokens``, and nothing at all is
added when nothing passes or the switch is off.  Answered by the daemon (``recall``, through
:mod:`memfs.commands`) or, with none, in the hook's own worker.
"""

from __future__ import annotations

import re
from typing import Any

from memfs.config import Config
from memfs.index.text import tokens
from memfs.memory import Memory
from memfs.serve.wire import Answer

QUERY_CHARS = 2000  # of a long pasted prompt, what is searched
MIN_WORDS = 3  # "yes", "go on": nothing worth searching
HEAD = "From memory (memfs search; read more with `memfs get PATH --from LINE`):"
_SPACES = re.compile(r"\s+")


def worth_searching(prompt: str) -> bool:
    text = prompt.strip()
    return not text.startswith("/") and len(text.split()) >= MIN_WORDS


def answer(memory: Memory, cfg: Config, args: dict[str, Any]) -> Answer:
    """``args``: prompt.  The text to add (empty: add nothing)."""
    prompt = str(args.get("prompt") or "")
    if not cfg.recall.on_prompt or not worth_searching(prompt):
        return Answer(stdout="")
    response = memory.search(prompt[:QUERY_CHARS], mode=cfg.mode)
    if response.unavailable:
        return Answer(error=response.unavailable)
    return Answer(stdout=render(response.results, cfg.recall.max_tokens))


def render(results: list[Any], max_tokens: int) -> str:
    """The results as lines a model reads, within ``max_tokens``: each its citation, its session
    or chat title, its score and its snippet on one line; a snippet that does not fit is cut."""
    lines = [HEAD]
    used = tokens.count(HEAD)
    for r in results:
        title = f" ({r.chat_title})" if r.chat_title else ""
        head = f"- {r.citation}{title}, score {r.score:.2f}: "
        snippet = _SPACES.sub(" ", r.snippet).strip()
        room = max_tokens - used - tokens.count(head) - 1
        if room < 12:
            break
        body = tokens.split_by_tokens(snippet, room)[0] if tokens.count(snippet) > room else snippet
        if body != snippet:
            body = body.rstrip() + " …"
        line = head + body
        lines.append(line)
        used += tokens.count(line) + 1
    return "\n".join(lines) + "\n" if len(lines) > 1 else ""
