"""What each runtime's hook events mean to memfs, what their input says, and what their output
must look like.  Standard library only: the hook's own process reads this before it forks.

    event                               runtime       memfs does
    SessionStart (any source)           all three     the context bundle, as added context
    UserPromptSubmit / BeforeAgent      Claude Code, Codex / Gemini CLI
                                                      recall: the prompt searched (recall.on_prompt)
    PreCompact / PreCompress            Claude Code, Codex / Gemini CLI
                                                      the transcript's new part into the workspace,
                                                      waited for (within the time budget)
    Stop, SubagentStop, SessionEnd      Claude Code   the same, not waited for
    Stop, notify (agent-turn-complete)  Codex         the same, not waited for
    AfterAgent, SessionEnd              Gemini CLI    the same, not waited for

Input: the runtime's JSON on stdin (``session_id``, ``transcript_path``, ``cwd``,
``hook_event_name``, ``prompt``, ``source``); Codex's ``notify`` program gets its JSON as the
last argument instead (``type``, ``thread-id``, ``cwd``, ...).  Output, for the two events that
add context: ``{"hookSpecificOutput": {"hookEventName": ..., "additionalContext": ...}}``, which
all three runtimes read; nothing at all otherwise (Gemini CLI parses any output as JSON).
"""

from __future__ import annotations

# Nothing imported at the top (not json, not dataclasses: a tenth of a second on a busy machine):
# the hook's own process reads only the event table before it forks.
CONTEXT, RECALL, CAPTURE = "context", "recall", "capture"
RUNTIMES = ("claude-code", "codex", "gemini")
EVENTS: dict[str, dict[str, str]] = {
    "claude-code": {"SessionStart": CONTEXT, "UserPromptSubmit": RECALL, "PreCompact": CAPTURE, "Stop": CAPTURE,
                    "SubagentStop": CAPTURE, "SessionEnd": CAPTURE},
    "codex": {"SessionStart": CONTEXT, "UserPromptSubmit": RECALL, "PreCompact": CAPTURE, "Stop": CAPTURE,
              "notify": CAPTURE},
    "gemini": {"SessionStart": CONTEXT, "BeforeAgent": RECALL, "PreCompress": CAPTURE, "AfterAgent": CAPTURE,
               "SessionEnd": CAPTURE},
}
# Captures the runtime waits for, within the budget: what is about to be compacted away should be
# searchable before the model loses it.  After a turn or at the end nothing is lost by not waiting.
WAITED = frozenset({"PreCompact", "PreCompress"})
# Claude Code keeps at most 10,000 characters of a hook's added context (more is filed away and
# replaced by a preview); the bundle is cut below that, saying where the whole is.
CONTEXT_CHARS = 9500
NOTIFY_TURN = "agent-turn-complete"


class UnknownEvent(ValueError):
    """An event memfs has nothing to do for (the message names those it knows)."""


class Request:
    """What a hook's input asks for."""

    def __init__(self, runtime: str, event: str, action: str, transcript: str = "", session_id: str = "",
                 cwd: str = "", prompt: str = "", source: str = "", thread_id: str = "", ignored: str = "") -> None:
        self.runtime = runtime
        self.event = event  # the runtime's own spelling (SessionStart, BeforeAgent, notify)
        self.action = action  # CONTEXT, RECALL or CAPTURE
        self.transcript = transcript  # the session's file, as the runtime named it
        self.session_id = session_id
        self.cwd = cwd
        self.prompt = prompt
        self.source = source  # SessionStart: startup, resume, clear, compact; PreCompact: auto, manual
        self.thread_id = thread_id  # Codex notify: the session whose rollout file to find
        self.ignored = ignored  # why nothing is to be done (a notify that is not the end of a turn)

    @property
    def waited(self) -> bool:
        return waited(self.event, self.action)


def waited(event: str, action: str) -> bool:
    """Whether the runtime waits for this hook's answer (within the budget)."""
    return action in (CONTEXT, RECALL) or event in WAITED


def canonical(runtime: str, event: str) -> tuple[str, str]:
    """(event, action) for what a command line names (any case: ``precompact`` is PreCompact)."""
    known = EVENTS.get(runtime)
    if known is None:
        raise UnknownEvent(f"unknown runtime {runtime!r}: {', '.join(RUNTIMES)}")
    for name, action in known.items():
        if name.lower() == event.lower():
            return name, action
    raise UnknownEvent(f"{runtime} has no hook event {event!r} memfs handles: {', '.join(known)}")


def parse(runtime: str, event: str, raw: bytes) -> Request:
    """The request a hook's input makes.  Input that is not a JSON object is taken as empty: the
    hook still does what it can (the context bundle needs nothing from it)."""
    import json

    name, action = canonical(runtime, event)
    try:
        data = json.loads(raw.decode("utf-8", "replace")) if raw.strip() else {}
    except ValueError:
        data = {}
    if not isinstance(data, dict):
        data = {}

    def text(*keys: str) -> str:
        for key in keys:
            value = data.get(key)
            if isinstance(value, str) and value:
                return value
        return ""

    request = Request(runtime, name, action, transcript=text("transcript_path", "transcriptPath"),
                      session_id=text("session_id", "sessionId", "thread-id", "thread_id"), cwd=text("cwd"),
                      prompt=text("prompt", "user_prompt"), source=text("source", "trigger"),
                      thread_id=text("thread-id", "thread_id"))
    if name == "notify" and data and data.get("type") != NOTIFY_TURN:
        request.ignored = f"notify {data.get('type')!r} is not the end of a turn"
    return request


def output(event: str, context: str) -> bytes:
    """What the hook prints: the added context in the form all three runtimes read; nothing when
    there is none."""
    if not context.strip():
        return b""
    import json

    return json.dumps({"hookSpecificOutput": {"hookEventName": event, "additionalContext": context}},
                      ensure_ascii=False).encode() + b"\n"


def cut(text: str, limit: int = CONTEXT_CHARS, whole: str = "") -> str:
    """``text`` within ``limit`` characters, cut at a line, saying where the whole is."""
    if len(text) <= limit:
        return text
    note = f"\n\n[cut at {limit:,} characters: the whole is {whole or 'memfs context'}]"
    head = text[: limit - len(note)]
    if "\n" in head:
        head = head[: head.rindex("\n")]
    return head + note
