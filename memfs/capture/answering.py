"""The ``hook`` request: what a runtime's hook gets, computed where the index is open (the daemon
that serves the workspace, or the hook's worker when none does), and noted for ``memfs status``.

- context: the context bundle of the caller's mode (a shared mode's leaves MEMORY.md out), with
  a line saying how to search for more, cut to what a runtime keeps of a hook's output;
- recall: :mod:`.recall`;
- capture: :mod:`.transcript`.

``args``: runtime, event, action, and as the action needs: prompt, transcript, source; deadline
(epoch seconds): past it the hook has exited, and what is answered reaches nobody (said so in
the note).
"""

from __future__ import annotations

import time
from typing import Any

from memfs.capture import hooks, hookstate
from memfs.config import Config
from memfs.memory import Memory, NotAllowed, UnknownMode
from memfs.serve.wire import Answer

INTRO = ("Long-term memory (memfs, workspace {workspace}). Its standing context is below; search it for "
         "anything else (past decisions, earlier sessions, notes) with `memfs search \"QUESTION\"` "
         "(`--in sessions` for past agent sessions) before answering from memory or redoing work. "
         "This session is saved into it as it goes.")
AFTER_COMPACTION = (" The part of this session before the compaction was saved first: `memfs search \"...\" --in "
                    "sessions/{runtime}` finds it.")


def hook(memory: Memory, cfg: Config, args: dict[str, Any]) -> Answer:
    begun = time.monotonic()
    runtime, event, action = str(args.get("runtime")), str(args.get("event")), str(args.get("action"))
    name = f"{runtime} {event}"
    if action == hooks.CONTEXT:
        answer, outcome = _context(memory, cfg, runtime, str(args.get("source") or ""))
    elif action == hooks.RECALL:
        from memfs.capture import recall  # each action's own modules, when it is asked for

        answer = recall.answer(memory, cfg, args)
        outcome = f"{answer.stdout.count(chr(10)) - 1} result(s) added" if answer.stdout else "nothing added"
        if not cfg.recall.on_prompt:
            outcome = "nothing added (recall.on_prompt is off)"
    elif action == hooks.CAPTURE:
        from memfs.capture import transcript

        answer = transcript.answer(memory, cfg, args)
        outcome = transcript.said(answer)
    else:
        answer, outcome = Answer(error=f"unknown hook action {action!r}"), "nothing done"
    seconds = time.monotonic() - begun
    problem = answer.error or ""
    deadline = args.get("deadline")
    if isinstance(deadline, (int, float)) and time.time() > deadline and action != hooks.CAPTURE:
        problem = problem or (f"ready after the hook had exited ({seconds:.1f} s here): nothing was added this "
                              "time; a running daemon (`memfs serve`, or one a command starts) answers in time")
    try:
        hookstate.record(hookstate.path_for(cfg), name, outcome, problem, seconds)
    except OSError:
        pass  # the note is for status; the answer matters more
    return answer


def _context(memory: Memory, cfg: Config, runtime: str, source: str) -> tuple[Answer, str]:
    try:
        bundle = memory.bundle(cfg.mode, viewer=cfg.mode)
    except (UnknownMode, NotAllowed) as exc:
        return Answer(error=str(exc)), "nothing added"
    intro = INTRO.format(workspace=cfg.workspace)
    if source == "compact":
        intro += AFTER_COMPACTION.format(runtime=runtime)
    text = hooks.cut(f"{intro}\n\n{bundle}", whole=f"`memfs context {cfg.mode}`")
    return Answer(stdout=text), f"context added ({len(text):,} characters, {cfg.mode} mode)"
