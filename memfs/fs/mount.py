"""Mount lifecycle: preflight checks, the daemon's main loop, background start, unmount.

The daemon runs pyfuse3's loop, the embedding worker and the workspace watcher in one trio nursery.
SIGINT/SIGTERM and ``memfs umount`` end the loop; the index is consistent at every moment (each
file's chunks change in one transaction, vectors are added later), so stopping loses nothing.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pyfuse3
import trio

from memfs.config import CONFIG_FILE, Config, ConfigError, load_config
from memfs.fs import fuseloop
from memfs.fs.busypoll import BusyPoll
from memfs.fs.operations import MemfsOperations
from memfs.fs.virtual import VirtualTree, top_names
from memfs.fs.writes import MemoryWrites
from memfs.memory import Memory
from memfs.mounttable import (  # noqa: F401
    FSNAME,
    MountError,
    MountInfo,
    alive,
    force_unmount,
    is_mounted,
    is_stale,
    leftover_file,
    log_file,
    memfs_mount_containing,
    mount_device,
    pid_file,
    read_record,
    unmount,
)
from memfs.serve.listing import embedded_by, serving
from memfs.serve.server import SocketServer
from memfs.state import make_private_dir
from memfs.userdirs import private_opener, trusted_state_dir, write_private
from memfs.watch import watch_workspace

log = logging.getLogger(__name__)
# Settings a running mount takes from a changed .memfs.toml at once (what is private must follow
# it; the context's settings only shape what is read); the others wait for the next mount.
LIVE_SECTIONS = ("privacy.", "bundle.")
WARM_WAIT_S = 10.0  # the most a mount's start waits for the embedding model (1-2 s cold, more when busy)
def set_read_ahead(mountpoint: Path, kb: int) -> None:
    """Raise the mount's read-ahead so sequential reads reach the daemon in 1 MiB requests
    instead of the kernel's default 128 KiB (measured: reading a large file about twice as fast).
    Only root may write the setting; anyone else keeps the default."""
    device = mount_device(mountpoint)
    if kb <= 0 or device is None:
        return
    setting = Path("/sys/class/bdi") / device / "read_ahead_kb"
    try:
        setting.write_text(f"{kb}\n")
    except OSError as exc:
        log.info("read-ahead stays at the kernel default (%s: %s)", setting, exc.strerror)
    else:
        log.info("read-ahead %d KiB", kb)


def check_fuse() -> None:
    if not os.path.exists("/dev/fuse"):
        raise MountError(
            "/dev/fuse is missing: install FUSE 3 (apt-get install fuse3) and load the module "
            "(modprobe fuse); in a container, start it with --device /dev/fuse --cap-add SYS_ADMIN. "
            "Without FUSE, `memfs watch WORKSPACE` keeps the index current instead."
        )
    if not os.access("/dev/fuse", os.R_OK | os.W_OK):
        raise MountError(
            "/dev/fuse is not accessible to this user: add the user to the 'fuse' group or run as "
            "root; without FUSE, `memfs watch WORKSPACE` keeps the index current instead."
        )
    if os.geteuid() != 0 and shutil.which("fusermount3") is None:
        raise MountError("fusermount3 is missing: apt-get install fuse3")


def preflight(cfg: Config, mountpoint: Path, force: bool) -> None:
    if not cfg.workspace.is_dir():
        raise MountError(f"workspace {cfg.workspace} does not exist (create it with `memfs init {cfg.workspace}`)")
    if is_stale(mountpoint):
        if not force:
            raise MountError(
                f"{mountpoint} is a stale mount left by a memfs that stopped: run `memfs umount {mountpoint}` "
                f"(or `fusermount3 -u {mountpoint}`), or mount again with --force"
            )
        log.warning("cleaning up the stale mount at %s", mountpoint)
        force_unmount(mountpoint)
    if is_mounted(mountpoint):
        raise MountError(f"{mountpoint} is already a mount point (`memfs umount {mountpoint}` first)")
    if not mountpoint.exists():
        raise MountError(f"mountpoint {mountpoint} does not exist (mkdir it first)")
    if not mountpoint.is_dir():
        raise MountError(f"mountpoint {mountpoint} is not a directory")
    workspace = cfg.workspace.resolve()
    real = mountpoint.resolve()
    if real == workspace or workspace in real.parents:
        raise MountError(f"mountpoint {mountpoint} is the workspace or inside it ({workspace}): that would loop; "
                         "mount it on an empty folder elsewhere")
    around = memfs_mount_containing(real.parent)
    if around is not None:
        # Its folder is a folder of some workspace (this one, seen through its mount: a loop).
        raise MountError(f"mountpoint {mountpoint} is inside the memfs mount {around}: mount it on an empty "
                         "folder outside any memfs mount")
    if any(mountpoint.iterdir()):
        raise MountError(f"mountpoint {mountpoint} is not empty")
    check_fuse()
    check_allow_other(cfg)


def shadowed_warnings(cfg: Config) -> list[str]:
    """Real entries of the workspace's root that the virtual folders would hide on the mount."""
    warnings = []
    for name in top_names(cfg.mount.virtual_prefix):
        if os.path.lexists(cfg.workspace / name):
            kind = "folder" if (cfg.workspace / name).is_dir() else "file"
            hint = ("--set mount.virtual_prefix=.memfs" if not cfg.mount.virtual_prefix
                    else "another mount.virtual_prefix")
            warnings.append(
                f"the workspace has a real {name!r} {kind}, which the mount's virtual {name!r} hides: it is "
                f"unreachable through the mount (the files stay in {cfg.workspace}); mount with {hint} "
                "to put the virtual folders elsewhere and reach it")
    return warnings


FUSE_CONF = Path("/etc/fuse.conf")


def mount_options(allow_other: bool = False) -> set[str]:
    """FUSE's options for a mount.  ``allow_other`` lets other users in (the kernel then checks
    real files' modes, default_permissions; the virtual files answer the mounting user alone):
    never implied, not even for root, whose mounts every local user could otherwise read."""
    options = set(pyfuse3.default_options)
    options |= {f"fsname={FSNAME}", f"subtype={FSNAME}"}
    if allow_other:
        options.add("allow_other")
    return options


def check_allow_other(cfg: Config) -> None:
    """A user other than root may ask for allow_other only where /etc/fuse.conf allows it
    (fusermount3 refuses otherwise, with a message that does not say how to fix it)."""
    if not cfg.mount.allow_other or os.geteuid() == 0:
        return
    try:
        lines = FUSE_CONF.read_text(errors="replace").splitlines()
    except OSError:
        lines = []
    if not any(line.split("#", 1)[0].strip() == "user_allow_other" for line in lines):
        raise MountError(f"--allow-other needs 'user_allow_other' in {FUSE_CONF} when the mount is not made by "
                         "root (a line an administrator adds); or mount without it: only you reach the mount")


class Daemon:
    """One mount: owns the Memory, the operations and the background tasks.  ``launch`` is how
    its configuration was loaded (load_config's arguments), to load it again when the
    workspace's .memfs.toml changes (what is private must follow it at once)."""

    def __init__(self, cfg: Config, mountpoint: Path, launch: dict[str, Any] | None = None) -> None:
        self.cfg = cfg
        self.launch = launch or {"workspace": cfg.workspace, "agent": cfg.agent, "mode": cfg.mode}
        self.mountpoint = mountpoint
        # Files are the truth: a mount starts while its index's server is away, and catches up.
        self.memory = Memory(cfg, offline_start=True)
        self.writes = MemoryWrites(self.memory)
        virtual = VirtualTree(self.memory, str(mountpoint), cfg.mode, cfg.mount.virtual_prefix)
        self.ops = MemfsOperations(cfg.workspace, self.writes, cfg.mount.entry_timeout_s, cfg.mount.attr_timeout_s,
                                   cfg.mount.xattrs, virtual=virtual)
        virtual.add_meta_file("requests", self._requests)
        # As `memfs status` lists them (the same state directory, the user's own).
        virtual.processes = lambda: serving(trusted_state_dir(), cfg.workspace, cfg.agent)
        self.quick: fuseloop.QuickWait | None = None
        self.poll = BusyPoll(cfg.mount.busy_poll_us)
        self.ops.on_request = self.poll.touch
        self.writes.on_config_change = self.reload_privacy
        self.stop = trio.Event()  # set first when stopping, so the watcher's thread returns at once
        self.socket = SocketServer(self.memory, mountpoint, kind="mount")

    def _recorded_settings(self) -> tuple[str, ...]:
        """What a command run inside the mount must take from it: the flags it was started with,
        and the settings deciding answers that it took from its environment (MEMFS_PG_DSN,
        MEMFS_INDEX_BACKEND, ...; not the mount's and daemons' own), which a shell elsewhere
        lacks: without them, a command inside a mount on PostgreSQL searched an empty SQLite
        index of its own.  The record is the user's own (state folder, 0700), as the flags'
        DSN already was."""
        given = [(str(k), v) for k, v in self.launch.get("overrides", ())]
        named = {key for key, _ in given}
        from_env = [(key, os.environ[name]) for key, source in self.cfg.sources.items()
                    if "." in key and not key.startswith(("mount.", "daemon.")) and key not in named
                    and source.startswith("env ")
                    and (name := source.removeprefix("env ")) in os.environ]
        return tuple(f"{k}={v}" for k, v in given + from_env)

    def _requests(self) -> bytes:
        """``.memfs/requests``: how many requests of each kind the kernel sent since the mount
        (reading this file adds its own lookup, open, read, flush and release)."""
        lines = [f"{name} {count}" for name, count in sorted(self.ops.requests.items())]
        # Each sync message is validated once, as write() takes it, not again when it is stored.
        lines.append(f"# sync messages validated {self.memory.sync_validated}")
        if self.quick is not None:
            lines.append(f"# of all requests (forgets too), picked up at once {self.quick.quick}, after a wait "
                         f"through the event loop {self.quick.waited}")
        return ("\n".join(lines) + "\n").encode()

    async def reload_privacy(self) -> None:
        """.memfs.toml changed: take its privacy settings at once (hide what became private,
        move chunks between the public and private parts of the index, make the kernel forget
        the names it cached), and its context settings; the rest waits for the next mount."""
        try:
            fresh = await trio.to_thread.run_sync(lambda: load_config(**self.launch))
        except ConfigError as exc:
            log.warning(".memfs.toml cannot be used (%s): this mount keeps the settings it has, and commands run "
                        "with the workspace's settings fail until it is fixed", exc)
            return
        now = {key: repr(value) for key, value, _ in self.cfg.leaves()}
        changed = [key for key, value, _ in fresh.leaves() if now.get(key) != repr(value)]
        later = [key for key in changed if not key.startswith(LIVE_SECTIONS)]
        if later:
            log.warning(".memfs.toml changed %s: this mount keeps what it was mounted with until it is mounted again",
                        ", ".join(later))
        if fresh.bundle != self.cfg.bundle:
            # context/main.md must say what `memfs context` says with the same file (a day apart
            # when only bundle.timezone differed), and it only shapes what is read, not the index
            log.warning(".memfs.toml changed %s: context/ follows it now",
                        ", ".join(key for key in changed if key.startswith("bundle.")))
            self.memory.set_bundle(fresh.bundle)
        if fresh.privacy == self.cfg.privacy:
            return
        log.warning("privacy settings changed: private %s, shared mounts may change %s",
                    fresh.privacy.private_paths, fresh.privacy.shared_writable)
        self.memory.set_privacy(fresh.privacy)
        self.ops.view.privacy = self.memory.privacy(self.cfg.mode)
        self.ops.view.writable = tuple(fresh.privacy.shared_writable)
        for path, inode in list(self.ops.inodes.by_path.items()):
            if not path:
                continue
            folder, _, name = path.rpartition("/")
            parent = self.ops.inodes.inode_of(folder)
            if parent is not None:
                pyfuse3.invalidate_entry_async(parent, os.fsencode(name), ignore_enoent=True)
        await trio.to_thread.run_sync(self.memory.reconcile_index)

    async def _invalidate(self, rel: str, exists: bool) -> None:
        """Something changed beside the mount: make the kernel forget what it cached of it."""
        if rel == CONFIG_FILE:
            await self.reload_privacy()
        inode = self.ops.inodes.inode_of(rel)
        parent_rel, _, name = rel.rpartition("/")
        parent = self.ops.inodes.inode_of(parent_rel)
        same_file = False
        if inode is not None:
            # Decided now, not when the watcher looked: the path may have been created again
            # through the mount since, and its new inode must keep its name.
            try:
                st = os.lstat(self.cfg.workspace / rel)
                node = self.ops.inodes.nodes.get(inode)
                same_file = node is not None and node.key == (st.st_dev, st.st_ino)
            except FileNotFoundError:
                self.ops.inodes.unlinked(rel)
            except OSError:
                pass
            try:
                await trio.to_thread.run_sync(pyfuse3.invalidate_inode, inode)  # attributes and pages
            except OSError as exc:
                if exc.errno not in (errno.ENOENT, errno.ENOSYS):
                    log.warning("invalidate %s: %s", rel, exc)
        # The name is dropped only if it no longer leads to the file the kernel knows: dropping a
        # valid one costs a lookup, and a folder's dentry dropped under a shell in it fails getcwd().
        if parent is not None and not same_file:
            pyfuse3.invalidate_entry_async(parent, os.fsencode(name), ignore_enoent=True)

    async def _tune(self) -> None:
        # The kernel sets the mount's read-ahead when it gets our INIT reply; change it after.
        await self.ops.initialized.wait()
        set_read_ahead(self.mountpoint, self.cfg.mount.read_ahead_kb)

    async def _signals(self) -> None:
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as received:
            async for signum in received:
                log.info("signal %s: unmounting", signal.Signals(signum).name)
                self.stop.set()
                self.memory.stop()
                pyfuse3.terminate()
                return

    async def _serve(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self.writes.embed_worker)
            nursery.start_soon(self.writes.complete_worker)
            if self.cfg.mount.watch:
                nursery.start_soon(watch_workspace, self.memory, self.writes.kick, self.stop, self._invalidate,
                                   self.writes.is_own)
            nursery.start_soon(self._signals)
            await nursery.start(self.socket.run)
            nursery.start_soon(self.poll.run)
            nursery.start_soon(self._tune)
            self.writes.kick()  # embed whatever reconciliation left pending
            await pyfuse3.main(min_tasks=4, max_tasks=64)
            self.stop.set()
            self.memory.stop()
            nursery.cancel_scope.cancel()

    def run(self) -> None:
        for warning in shadowed_warnings(self.cfg):
            log.warning("%s", warning)
        # The model loads as the mount starts, beside the reconcile: the first search and the first
        # note written must not find it cold (a newcomer's first search, a second after mounting,
        # found a fresh note by keyword only).  Waited for at most WARM_WAIT_S before the mount
        # answers; a model that takes longer goes on loading behind it.
        warming = threading.Thread(target=self.memory.warm, name="memfs-warm", daemon=True)
        warming.start()
        outcomes = self.memory.reconcile()
        changed = [o for o in outcomes if o.action in ("indexed", "removed")]
        log.info("reconciled %d memory files (%d changed since the last run)", len(outcomes), len(changed))
        warming.join(timeout=WARM_WAIT_S)
        self.socket.open()
        try:
            pyfuse3.init(self.ops, str(self.mountpoint), mount_options(self.cfg.mount.allow_other))
            if self.cfg.mount.quick_wait:
                # The spin is a short busy poll: off with it.
                self.quick = fuseloop.install(fuseloop.SPIN_S if self.cfg.mount.busy_poll_us else 0.0)
        except BaseException:
            self.socket.close()
            raise
        record = pid_file(self.cfg.state_dir, self.mountpoint)
        make_private_dir(record.parent)
        info = MountInfo(os.getpid(), str(self.mountpoint), str(self.cfg.workspace), self.cfg.agent, time.time(),
                         self.cfg.mode, str(self.launch.get("config_file") or ""), self._recorded_settings())
        write_private(record, json.dumps(info.__dict__))
        log.info("mounted %s on %s (agent %s, %s mode%s)", self.cfg.workspace, self.mountpoint, self.cfg.agent,
                 self.cfg.mode, ", other users reach its real files" if self.cfg.mount.allow_other else "")
        clean = False
        try:
            trio.run(self._serve)
            clean = True
        finally:
            self.memory.stop()
            self.socket.close()
            pyfuse3.close(unmount=True)
            self.memory.settle()
            left = self.memory.pending_told()  # a shared mount's message counts public passages
            self.memory.close()
            if left:
                # Another mount or daemon of this index goes on embedding them: not "the next start".
                by = embedded_by(self.cfg.state_dir, self.cfg.workspace, self.cfg.agent,
                                 "the next mount or `memfs index` embeds them")
                log.info("left %d passages waiting for an embedding: %s", left, by)
                write_private(leftover_file(self.cfg.state_dir, self.mountpoint),
                              f"{left} passages wait for an embedding: {by}")
            record.unlink(missing_ok=True)
            log.info("unmounted %s%s", self.mountpoint, "" if clean else " after an error")


def start_background(cfg: Config, mountpoint: Path, argv: list[str], timeout: float = 60.0) -> int:
    """Start the daemon as a separate process and return once the mount answers (its pid)."""
    logf = log_file(cfg.state_dir, mountpoint)
    make_private_dir(logf.parent)
    with open(logf, "ab", opener=private_opener) as out:
        start = out.tell()  # the log is appended to: an earlier mount's failure is not this one's
        child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out,
                                 start_new_session=True, close_fds=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = child.poll()
        if code is not None:
            with open(logf, "rb") as written:
                written.seek(start)
                tail = written.read().decode(errors="replace").strip().splitlines()[-5:]
            raise MountError("the mount failed to start:\n  " + "\n  ".join(tail or [f"exit status {code}"]))
        if is_mounted(mountpoint):
            try:
                os.stat(mountpoint)
                return child.pid
            except OSError:
                pass
        time.sleep(0.05)
    child.terminate()
    raise MountError(f"the mount did not become ready within {timeout:.0f}s (log: {logf})")
