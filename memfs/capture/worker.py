"""The hook's worker (forked by :mod:`.hookrun`, alone in its session): ask the daemon serving the
workspace for the ``hook`` answer, else compute it here, hand the hook process what to print,
then, when no daemon was running, start one (``daemon.on_demand``) so the next hook is answered
in time.  What went wrong before any answer (a workspace that does not exist, settings that do
not load) is noted where ``memfs status`` reads it, or, with no workspace to note it in, in
the state folder's ``hooks.json``.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from memfs.capture import hooks
from memfs.serve.wire import Answer, Client, Invocation

if TYPE_CHECKING:
    from memfs.config import Config
    from memfs.memory import Memory
    from memfs.serve.answerer import Answerer


class NoWorkspace(RuntimeError):
    """The hook's workspace cannot be opened here (the message says why)."""


def invocation_of(opts: dict[str, object]) -> Invocation:
    workspace = opts.get("workspace")
    return Invocation.here({"workspace": Path(str(workspace)) if workspace else None, "agent": opts.get("agent"),
                            "mode": opts.get("mode"), "config_file": opts.get("config_file"),
                            "overrides": list(opts.get("overrides") or [])})  # type: ignore[call-overload]


def _settle(invocation: Invocation) -> Config:
    from memfs.invocation import InvocationError, resolve

    try:
        return resolve(invocation)
    except InvocationError as exc:
        raise NoWorkspace(str(exc)) from None


def _open_local(invocation: Invocation) -> tuple[Memory, Config]:
    from memfs.memory import Memory
    from memfs.mounttable import memfs_mount_containing

    cfg = _settle(invocation)
    if not cfg.workspace.is_dir():
        raise NoWorkspace(f"workspace {cfg.workspace} does not exist (`memfs init {cfg.workspace}`, or fix -w "
                          "in the hook's command)")
    if memfs_mount_containing(cfg.workspace) is not None:
        raise NoWorkspace(f"{cfg.workspace} is inside a memfs mount: the hook's -w must name the workspace folder")
    return Memory(cfg), cfg


def args_for(request: hooks.Request, deadline: float) -> dict[str, object]:
    """The ``hook`` request's arguments; a Codex notify's session found by its id here, where the
    runtime's environment (CODEX_HOME) is."""
    args: dict[str, object] = {"runtime": request.runtime, "event": request.event, "action": request.action,
                               "source": request.source, "deadline": time.time() + (deadline - time.monotonic())}
    if request.action == hooks.RECALL:
        args["prompt"] = request.prompt
    if request.action == hooks.CAPTURE:
        path = request.transcript
        if not path and request.runtime == "codex" and request.thread_id:
            from memfs.capture.transcript import codex_rollout

            found = codex_rollout(request.thread_id)
            path = str(found) if found else ""
        if path and not os.path.isabs(path) and request.cwd:
            path = os.path.join(request.cwd, path)
        args["transcript"] = os.path.expanduser(path) if path else ""
    return args


def run(runtime: str, event: str, raw: bytes, opts: dict[str, object], out_fd: int, deadline: float) -> None:
    invocation = invocation_of(opts)
    try:
        request = hooks.parse(runtime, event, raw)
    except hooks.UnknownEvent as exc:
        os.close(out_fd)
        _note(invocation, f"{runtime} {event}", str(exc))
        return
    if request.ignored:
        os.close(out_fd)
        return
    asking = not opts.get("no_daemon") and not os.environ.get("MEMFS_NO_DAEMON")
    args = args_for(request, deadline)
    # The daemon first, with the socket client alone: the rest (logging, the answerer, the index)
    # only when it does not answer.
    client = Client(invocation, asking)
    try:
        answer = client.run("hook", args) if asking else None
    finally:
        client.close()
    if answer is not None:
        _deliver(request, answer, out_fd)
        return
    from memfs.serve.answerer import Answerer

    answerer = Answerer(invocation, lambda: _open_local(invocation), ask=False)
    try:
        try:
            answer = answerer.answer("hook", args)
        except Exception as exc:  # noqa: BLE001 -- a workspace that will not open, settings that do not load
            os.close(out_fd)
            out_fd = -1
            _note(invocation, f"{request.runtime} {request.event}", str(exc) or type(exc).__name__)
            return
        _deliver(request, answer, out_fd)
        out_fd = -1
        if answerer.memory is not None and answerer.cfg is not None and asking:
            _start_daemon(answerer, invocation)
    finally:
        if out_fd >= 0:
            os.close(out_fd)
        answerer.close()


def _deliver(request: hooks.Request, answer: Answer, out_fd: int) -> None:
    """Hand the hook process what to print (for a capture: only that it is done), and close."""
    said = hooks.output(request.event, answer.stdout) if request.action != hooks.CAPTURE else b""
    view = memoryview(said)
    try:
        while view:
            view = view[os.write(out_fd, view):]
    except OSError:
        pass  # the hook has exited: the daemon's note says the answer came late
    finally:
        os.close(out_fd)


def _start_daemon(answerer: Answerer, invocation: Invocation) -> None:
    """No daemon answered: start one for the hooks that follow (as a command would), once the
    Memory opened here is closed (the daemon reconciles the index as it starts)."""
    cfg = answerer.cfg
    assert cfg is not None
    answerer.close()
    if not cfg.daemon.on_demand:
        return
    from memfs.serve import ondemand

    ondemand.start(cfg.workspace, cfg.agent, cfg.mode == "main", invocation)


def _note(invocation: Invocation, hook: str, problem: str) -> None:
    """A problem met before any answer, for ``memfs status`` (or the state folder's own note)."""
    from memfs.capture import hookstate

    try:
        cfg = _settle(invocation)
        path = hookstate.path_for(cfg)
        if not cfg.workspace.is_dir():
            raise NoWorkspace(problem)
    except Exception:  # noqa: BLE001 -- no workspace to note it in: the state folder's own note
        from memfs.userdirs import trusted_state_dir

        path = trusted_state_dir(invocation.env or None) / hookstate.FILE
    hookstate.record(path, hook, "nothing done", problem)
