"""What a command line asks for, settled into a :class:`Config`: the same rules whether the CLI
settles it in its own process or a daemon settles it for a client (from the client's options,
current folder and environment, carried in a :class:`memfs.serve.wire.Invocation`).

Inside a memfs mount, the workspace is the mount's own, with the agent and the settings the
mount was started with; inside a shared-mode mount the mode is shared, whatever is asked.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from memfs.config import Config, ConfigError, load_config, parse_override
from memfs.mounttable import live_record, memfs_mount_containing
from memfs.serve.wire import Invocation
from memfs.userdirs import trusted_state_dir


class InvocationError(ValueError):
    """The command line cannot be settled into a configuration (the message says why)."""


def resolve(invocation: Invocation, needs_workspace: bool = True) -> Config:
    try:
        return _resolve(invocation, needs_workspace)
    except (OSError, RuntimeError) as exc:  # a symlink loop, a folder that cannot be read
        raise InvocationError(f"cannot settle the workspace: {exc}") from None


def _resolve(invocation: Invocation, needs_workspace: bool) -> Config:
    env = invocation.env
    cwd = Path(invocation.cwd)
    try:
        overrides = [parse_override(o) for o in invocation.overrides]
    except ConfigError as exc:
        raise InvocationError(f"config: {exc}") from None
    mode = invocation.mode
    # The main mode asked for by flag or by MEMFS_MODE: inside a shared mount both get one error.
    asks_main = (mode if mode is not None else env.get("MEMFS_MODE", "")).strip().lower() == "main"
    given = invocation.workspace
    start = Path(os.path.expanduser(str(given or env.get("MEMFS_WORKSPACE") or cwd)))
    if not start.is_absolute():
        start = cwd / start
    point = memfs_mount_containing(start.resolve()) if start.exists() else None
    workspace: str | Path | None = None if given is None else cwd / os.path.expanduser(given)
    agent, config_file = invocation.agent, invocation.config_file
    from_mount: list[str] = []  # settings the mount's record gave, not a flag: `memfs config` says so
    if point is not None:
        state = trusted_state_dir(env)
        record = live_record(state, point)
        if record is None:
            if needs_workspace:
                raise InvocationError(
                    f"{start} is inside the memfs mount {point}, which has no running daemon recorded in "
                    f"{state} (another MEMFS_STATE_DIR?): pass --workspace with the workspace folder")
        else:
            if record.mode != "main":
                if asks_main:
                    raise InvocationError(f"{point} is a shared-mode mount: the main mode is not available in it")
                mode = record.mode
            elif mode is None and "MEMFS_MODE" not in env:
                mode = record.mode
            workspace = Path(record.workspace)
            from_mount += ["mode"] if mode == record.mode and invocation.mode is None else []
            if agent is None and "MEMFS_AGENT" not in env:
                agent = record.agent
                from_mount.append("agent")
            config_file = config_file or record.config_file or None
            recorded = [parse_override(o) for o in record.overrides]
            given_keys = {key for key, _ in overrides}
            from_mount += [key for key, _ in recorded if key not in given_keys]
            overrides = recorded + overrides
    # Working inside a shared-mode mount is being a shared reader, whichever workspace is named
    # (`-w` of the workspace itself, MEMFS_WORKSPACE): the mount's mode is not left by a flag.
    here = point if start == cwd else memfs_mount_containing(cwd.resolve()) if cwd.exists() else None
    if here is not None and here != point:
        around = live_record(trusted_state_dir(env), here)
        if around is not None and around.mode != "main":
            if asks_main:
                raise InvocationError(f"{here} is a shared-mode mount: the main mode is not available in it")
            mode = around.mode
    if config_file is not None and not os.path.isabs(os.path.expanduser(config_file)):
        config_file = str(cwd / config_file)
    try:
        cfg = load_config(workspace=workspace, agent=agent, mode=mode, config_file=config_file,
                          overrides=overrides, env=env, cwd=cwd)
    except ConfigError as exc:
        raise InvocationError(f"config: {exc}") from None
    if point is not None and workspace is not None and given is None:
        cfg.sources["workspace"] = f"the mount {point}"
    for key in from_mount:
        cfg.sources[key] = f"the mount {point}"
    return cfg


def answer_settings(cfg: Config) -> dict[str, str]:
    """What decides a command's answer: every setting but the mount's and the daemon's own and
    the mode (each command is given the mode), with the workspace and agent.  A daemon answers a client only
    when these are equal to its own."""
    settings = {key: repr(value) for key, value, _ in cfg.leaves()
                if not key.startswith(("mount.", "daemon.")) and key != "mode"}
    # leaves() hides the DSN's password; two DSNs that differ only by it are not the same login
    # (a rotated password), and the settings travel to the daemon: its digest, not the password.
    settings["index.dsn"] = hashlib.sha256(cfg.index.dsn.encode()).hexdigest()
    return settings
