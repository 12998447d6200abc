"""The FUSE operations: every call passes through to the workspace directory.

Kept thin on purpose: paths come from the inode table, files from the backing directory, and
memory-file side effects go to :class:`memfs.fs.writes.MemoryWrites`.  Every handler is guarded
so an OSError becomes its errno and anything unexpected becomes EIO with a log line; an exception
escaping a handler would stop pyfuse3's loop and leave a dead mount.
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import stat
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyfuse3
import trio
from pyfuse3 import FUSEError

from memfs.fs.inodes import ROOT, InodeTable
from memfs.fs.longpaths import reachable, request_ended, request_started
from memfs.fs.writes import MemoryWrites

log = logging.getLogger(__name__)

_libc = ctypes.CDLL(None, use_errno=True)
_AT_FDCWD = -100
IS_ROOT = os.geteuid() == 0


# The requests pyfuse3 hands us; each is guarded once, on the instance (see Passthrough.__init__).
FUSE_HANDLERS = (
    "lookup", "getattr", "setattr", "readlink", "statfs", "opendir", "readdir", "releasedir", "fsyncdir",
    "mkdir", "rmdir", "mknod", "symlink", "link", "unlink", "rename", "open", "create", "read", "write",
    "flush", "fsync", "release", "setxattr", "getxattr", "listxattr", "removexattr",
)


def guarded(owner: Passthrough, method: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
    """``method`` as a FUSE handler: every OSError becomes its errno, anything else EIO."""
    name = method.__name__

    async def handler(*args: Any) -> Any:
        owner.requests[name] += 1
        owner.on_request()
        scope = request_started()
        try:
            return await method(*args)
        except FUSEError:
            raise
        except OSError as exc:
            if exc.errno is None:
                log.error("%s%r: %s", name, args[:2], exc)
                raise FUSEError(errno.EIO) from None
            raise FUSEError(exc.errno) from None
        except KeyError:
            # An inode or handle the kernel still names but we no longer know (e.g. unlinked).
            raise FUSEError(errno.ENOENT) from None
        except Exception:
            log.exception("unexpected error in %s%r", name, args[:2])
            raise FUSEError(errno.EIO) from None
        finally:
            request_ended(*scope)

    handler.__name__ = name
    return handler


def renameat2(old: bytes, new: bytes, flags: int) -> None:
    if _libc.renameat2(_AT_FDCWD, old, _AT_FDCWD, new, ctypes.c_uint(flags)) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@dataclass
class Handle:
    fd: int
    inode: int
    path: str  # at open time; the inode table has the current one
    dirty: bool = False
    written: bool = False  # written to since the last version (not only truncated)
    writable: bool = False
    staged: bytearray | None = None  # sync files: bytes written, held until flush (see operations)
    staged_base: int = 0  # file size at open: staged[0] belongs at this offset
    checked: int = 0  # staged[:checked] is complete lines already validated
    checked_lines: int = 0  # how many lines staged[:checked] holds
    parsed: list | None = None  # the messages of staged[:checked] (None: not known, parsed at flush)
    scan: Any = None  # an envelope's reading so far (memfs.fs.syncfiles), None: from its start
    created: bool = False  # made by this open (create)
    wrote: bool = False  # written since the kernel's pages were last known to match the file
    who: Any = None  # the Provenance of the process that opened it for writing (memory files)


@dataclass
class DirHandle:
    inode: int
    entries: list[tuple[str, os.stat_result]] = field(default_factory=list)
    extra: list[tuple[str, pyfuse3.EntryAttributes]] = field(default_factory=list)  # not backed by a file
    dots: list[tuple[str, pyfuse3.EntryAttributes]] = field(default_factory=list)  # . and ..


class Passthrough(pyfuse3.Operations):
    # The kernel's writeback cache stays off: with it the kernel trusts its own size and mtime
    # of a cached file over the daemon's, so a file appended or shrunk beside the mount keeps
    # its old size on the mount, and the next append through the mount lands at that old end
    # over what was written beside it (measured on 6.18, invalidation notwithstanding).
    enable_writeback_cache = False

    def __init__(self, workspace: Path, writes: MemoryWrites, entry_timeout: float = 1.0,
                 attr_timeout: float = 1.0, xattrs: bool = False) -> None:
        super().__init__()
        # Without xattrs every getxattr answers ENOSYS once and the kernel stops asking, which
        # saves the security.capability round trip it otherwise makes before every write.
        self.xattrs = xattrs
        self.root = Path(os.path.realpath(workspace))
        self.root_bytes = os.fsencode(self.root)
        st = os.lstat(self.root)
        self.inodes = InodeTable((st.st_dev, st.st_ino), self._key_of)
        self.writes = writes
        self.entry_timeout = entry_timeout
        self.attr_timeout = attr_timeout
        self.handles: dict[int, Handle] = {}
        self.dirs: dict[int, DirHandle] = {}
        self._next_fh = 1
        self.on_request: Callable[[], None] = lambda: None  # the daemon's BusyPoll.touch
        # How many requests of each kind the kernel sent (.memfs/requests): what a workload
        # costs the daemon, and which of the kernel's caches answered instead.
        self.requests: Counter[str] = Counter()
        self.initialized = trio.Event()  # the kernel's INIT is answered once this is set
        # Guard the handlers here rather than with a decorator on each method, so a subclass
        # override calling super() is still guarded once per request, not once per layer.
        for handler_name in FUSE_HANDLERS:
            setattr(self, handler_name, guarded(self, getattr(self, handler_name)))

    # -- helpers --------------------------------------------------------------------------------

    def _key_of(self, rel: str) -> tuple[int, int] | None:
        try:
            st = os.lstat(self.full(rel))
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def full(self, rel: str) -> bytes:
        """The backing path of ``rel``, short enough for the kernel (see :mod:`longpaths`)."""
        return reachable(self.root_bytes + b"/" + os.fsencode(rel)) if rel else self.root_bytes

    def child(self, parent: int, name: bytes) -> str:
        if name in (b".", b"..") or b"/" in name:
            raise FUSEError(errno.EINVAL)
        base = self.inodes.path(parent)
        text = os.fsdecode(name)
        return f"{base}/{text}" if base else text

    def attrs(self, inode: int, st: os.stat_result) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = inode
        entry.generation = 0
        entry.entry_timeout = self.entry_timeout
        entry.attr_timeout = self.attr_timeout
        entry.st_mode = st.st_mode
        entry.st_nlink = st.st_nlink
        entry.st_uid = st.st_uid
        entry.st_gid = st.st_gid
        entry.st_rdev = st.st_rdev
        entry.st_size = st.st_size
        entry.st_blksize = st.st_blksize
        entry.st_blocks = st.st_blocks
        entry.st_atime_ns = st.st_atime_ns
        entry.st_mtime_ns = st.st_mtime_ns
        entry.st_ctime_ns = st.st_ctime_ns
        return entry

    def entry_for(self, rel: str, st: os.stat_result | None = None) -> pyfuse3.EntryAttributes:
        st = st or os.lstat(self.full(rel))
        inode = self.inodes.remember(rel, (st.st_dev, st.st_ino))
        return self.attrs(inode, st)

    def init(self) -> None:
        # pyfuse3 calls this while handling INIT and replies in the same step, so whoever wakes
        # up on the event runs after the kernel has applied the connection's settings.
        self.initialized.set()

    def _new_fh(self) -> int:
        fh = self._next_fh
        self._next_fh += 1
        return fh

    def _own(self, path: bytes, ctx: pyfuse3.RequestContext, follow: bool = True) -> None:
        """Give a new node the caller's uid/gid (we run as root; the kernel checked access)."""
        if IS_ROOT:
            os.chown(path, ctx.uid, ctx.gid, follow_symlinks=follow)

    # -- lookups and attributes -----------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if name == b".":
            return await self.getattr(parent_inode, ctx)
        if name == b"..":
            parent_path = self.inodes.path(parent_inode)
            up = parent_path.rpartition("/")[0]
            return self.entry_for(up) if parent_path else await self.getattr(ROOT, ctx)
        rel = self.child(parent_inode, name)
        try:
            st = os.lstat(self.full(rel))
        except FileNotFoundError:
            return self.no_entry()
        if self.hidden(rel, st):
            raise FUSEError(errno.ENOENT)  # not cached: what is hidden may change with the settings
        return self.entry_for(rel, st)

    def no_entry(self) -> pyfuse3.EntryAttributes:
        """"No such file", which the kernel may remember as long as a name it found: a name made
        through the mount replaces it there, and the watcher drops it when one is made beside
        the mount (shells and interpreters look up the same missing names over and over)."""
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = 0
        entry.entry_timeout = self.entry_timeout
        return entry

    def hidden(self, rel: str, st: os.stat_result | None = None) -> bool:
        """Whether an entry that exists in the workspace must not exist on this mount."""
        return False

    async def forget(self, inode_list: Any) -> None:
        for inode, count in inode_list:
            self.inodes.forget(inode, count)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext | None = None) -> pyfuse3.EntryAttributes:
        if self.inodes.has_paths(inode):
            try:
                return self.attrs(inode, os.lstat(self.full(self.inodes.path(inode))))
            except FileNotFoundError:
                pass  # renamed or removed behind this daemon's back; an open handle still knows it
        handle = next((h for h in self.handles.values() if h.inode == inode), None)
        if handle is None:
            raise FUSEError(errno.ENOENT)
        st = os.fstat(handle.fd)  # unlinked (or moved) but still open
        self.check_open_file(handle, st)
        return self.attrs(inode, st)

    def check_open_file(self, handle: Handle, st: os.stat_result) -> None:
        """Raise FUSEError if this mount may no longer answer for what ``handle`` has open."""

    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes, fields: pyfuse3.SetattrFields,
                      fh: int | None, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        handle = self.handles.get(fh) if fh is not None else None
        rel = self.inodes.path(inode) if self.inodes.has_paths(inode) else handle.path if handle else None
        if rel is None:
            raise FUSEError(errno.ENOENT)
        path = self.full(rel)
        if fields.update_size:
            await self.writes.before_change(rel)
            self.writes.wrote(rel, attr.st_size)
            if handle is not None:
                os.ftruncate(handle.fd, attr.st_size)
            else:
                os.truncate(path, attr.st_size)
        if fields.update_mode:
            if stat.S_ISLNK(os.lstat(path).st_mode):
                raise FUSEError(errno.EOPNOTSUPP)
            os.chmod(path, stat.S_IMODE(attr.st_mode))
        if fields.update_uid or fields.update_gid:
            uid = attr.st_uid if fields.update_uid else -1
            gid = attr.st_gid if fields.update_gid else -1
            os.chown(path, uid, gid, follow_symlinks=False)
        if fields.update_atime or fields.update_mtime:
            st = os.lstat(path)
            atime = attr.st_atime_ns if fields.update_atime else st.st_atime_ns
            mtime = attr.st_mtime_ns if fields.update_mtime else st.st_mtime_ns
            os.utime(path, ns=(atime, mtime), follow_symlinks=False)
        if fields.update_size or fields.update_mtime:
            self.inodes.nodes[inode].seen = None  # let the next open start from the file as it is
        if fields.update_size:
            # `>` opens, then truncates by name: the writer's close settles it (one version,
            # not an empty one in between).  A truncate with nothing open is a change of its own.
            writer = handle or next((h for h in self.handles.values() if h.inode == inode and h.writable), None)
            if writer is not None:
                writer.dirty = True
            else:
                await self.writes.changed(rel, self.writes.caller(rel, ctx.uid, ctx.pid))
        else:
            self.writes.note_own(rel)  # chmod, chown, touch: the watcher sees their echo too
        return self.attrs(inode, os.lstat(path))

    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        return os.readlink(self.full(self.inodes.path(inode)))

    async def statfs(self, ctx: pyfuse3.RequestContext) -> pyfuse3.StatvfsData:
        st = os.statvfs(self.root_bytes)
        data = pyfuse3.StatvfsData()
        for name in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail", "f_files", "f_ffree",
                     "f_favail", "f_namemax"):
            setattr(data, name, getattr(st, name))
        return data

    # -- directories ----------------------------------------------------------------------------

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        rel = self.inodes.path(inode)
        prefix = f"{rel}/" if rel else ""
        entries = []
        # Listed through a descriptor: each entry is stat'ed relative to it, so a folder whose
        # children's full paths pass PATH_MAX lists like any other.
        fd = os.open(self.full(rel), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            with os.scandir(fd) as it:
                for entry in it:
                    name = os.fsdecode(entry.name)
                    try:
                        st = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if not self.hidden(prefix + name, st):
                        entries.append((name, st))
        finally:
            os.close(fd)
        entries.sort(key=lambda e: e[0])
        fh = self._new_fh()
        self.dirs[fh] = DirHandle(inode, entries, dots=self.dot_entries(inode, rel))
        return fh

    def dot_entries(self, inode: int, rel: str) -> list[tuple[str, pyfuse3.EntryAttributes]]:
        """``.`` and ``..`` as ``ls -a`` expects them (the kernel takes no lookup reference for
        them, so neither do we).  The root's ``..`` is outside the mount: it is the root."""
        up = rel.rpartition("/")[0]
        parent = ROOT if not rel else self.inodes.inode_of(up)
        own = self.attrs(inode, os.lstat(self.full(rel)))
        above = own if parent is None or parent == inode else self.attrs(parent, os.lstat(self.full(up)))
        return [(".", own), ("..", above)]

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        handle = self.dirs[fh]
        base = self.inodes.path(handle.inode) if self.inodes.has_paths(handle.inode) else None
        if base is None:
            return
        # One offset space: . and .., then the directory's entries, then entries not backed by
        # a file.
        dots, entries, extra = handle.dots, handle.entries, handle.extra
        for index in range(start_id, len(dots) + len(entries) + len(extra)):
            if len(dots) <= index < len(dots) + len(entries):
                name, st = entries[index - len(dots)]
                rel = f"{base}/{name}" if base else name
                inode = self.inodes.remember(rel, (st.st_dev, st.st_ino), count_lookup=False)
                if not pyfuse3.readdir_reply(token, os.fsencode(name), self.attrs(inode, st), index + 1):
                    return
                self.inodes.nodes[inode].lookups += 1
                continue
            name, attrs = dots[index] if index < len(dots) else extra[index - len(dots) - len(entries)]
            if not pyfuse3.readdir_reply(token, os.fsencode(name), attrs, index + 1):
                return

    async def releasedir(self, fh: int) -> None:
        self.dirs.pop(fh, None)

    async def fsyncdir(self, fh: int, datasync: bool) -> None:
        handle = self.dirs[fh]
        fd = os.open(self.full(self.inodes.path(handle.inode)), os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        rel = self.child(parent_inode, name)
        path = self.full(rel)
        os.mkdir(path, stat.S_IMODE(mode))
        os.chmod(path, stat.S_IMODE(mode) & ~ctx.umask)
        self._own(path, ctx)
        self.writes.note_own(rel)  # so the watcher knows its echo
        return self.entry_for(rel)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self._remove(parent_inode, name, os.rmdir, ctx)

    async def _remove(self, parent_inode: int, name: bytes, remove: Callable[[bytes], None],
                      ctx: pyfuse3.RequestContext) -> None:
        rel = self.child(parent_inode, name)
        await self.writes.before_change(rel)
        remove(self.full(rel))
        self.inodes.unlinked(rel)
        await self.writes.removed(rel, self.writes.caller(rel, ctx.uid, ctx.pid))

    # -- names ----------------------------------------------------------------------------------

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        rel = self.child(parent_inode, name)
        path = self.full(rel)
        os.mknod(path, stat.S_IFMT(mode) | (stat.S_IMODE(mode) & ~ctx.umask), rdev)
        os.chmod(path, stat.S_IMODE(mode) & ~ctx.umask)
        self._own(path, ctx)
        self.writes.note_own(rel)  # so the watcher knows its echo
        return self.entry_for(rel)

    async def symlink(self, parent_inode: int, name: bytes, target: bytes,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        rel = self.child(parent_inode, name)
        path = self.full(rel)
        os.symlink(target, path)
        self._own(path, ctx, follow=False)
        self.writes.note_own(rel)
        return self.entry_for(rel)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        rel = self.child(new_parent_inode, new_name)
        os.link(self.full(self.inodes.path(inode)), self.full(rel), follow_symlinks=False)
        entry = self.entry_for(rel)
        await self.writes.changed(rel, self.writes.caller(rel, ctx.uid, ctx.pid))
        return entry

    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        await self._remove(parent_inode, name, os.unlink, ctx)

    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int, name_new: bytes,
                     flags: int, ctx: pyfuse3.RequestContext) -> None:
        old = self.child(parent_inode_old, name_old)
        new = self.child(parent_inode_new, name_new)
        await self.writes.before_change(old)
        await self.writes.before_change(new)  # replaced (or exchanged): what it held is kept first
        who = self.writes.who(ctx.uid, ctx.pid)
        if flags:
            renameat2(self.full(old), self.full(new), flags)
        else:
            os.rename(self.full(old), self.full(new))
        if flags & pyfuse3.RENAME_EXCHANGE:
            self.inodes.exchanged(old, new)
            await self.writes.moved(old, new, who)
            await self.writes.changed(old, who)
        else:
            self.inodes.renamed(old, new)
            await self.writes.moved(old, new, who)

    # -- files ----------------------------------------------------------------------------------

    def _file_info(self, fd: int, inode: int, rel: str, flags: int) -> pyfuse3.FileInfo:
        fh = self._new_fh()
        writable = (flags & os.O_ACCMODE) != os.O_RDONLY
        self.handles[fh] = Handle(fd, inode, rel, writable=writable)
        if writable:
            self.writes.open_for_write(rel)
        self.inodes.opened(inode)
        info = pyfuse3.FileInfo(fh=fh)
        info.keep_cache = True  # the watcher invalidates pages changed beside the mount
        if flags & os.O_DIRECT:
            info.direct_io = True
        return info

    @staticmethod
    def _backing_flags(flags: int) -> int:
        # O_DIRECT would make the backing fd demand aligned buffers that FUSE does not give us;
        # the kernel side of the open keeps its direct-I/O semantics through direct_io.
        flags = (flags & ~(os.O_DIRECT | os.O_NOFOLLOW)) | os.O_CLOEXEC
        return flags

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        rel = self.inodes.path(inode)
        # Opened without O_TRUNC first: a name can have gone to another file since the kernel
        # learned it, and that file must be neither truncated nor handed out (ESTALE instead).
        fd = os.open(self.full(rel), self._backing_flags(flags) & ~(os.O_CREAT | os.O_TRUNC))
        try:
            st = os.fstat(fd)
            node = self.inodes.nodes.get(inode)
            if node is None or (node.key is not None and node.key != (st.st_dev, st.st_ino)):
                raise FUSEError(errno.ESTALE)
            if flags & os.O_TRUNC and stat.S_ISREG(st.st_mode):
                await self.writes.before_change(rel)
                self.writes.wrote(rel, 0)
                os.ftruncate(fd, 0)
        except BaseException:
            os.close(fd)
            raise
        info = self._file_info(fd, inode, rel, flags)
        if stat.S_ISREG(st.st_mode):
            await self._keep_cache_if_unchanged(info, inode, st)
        handle = self.handles[info.fh]
        if handle.writable and self.writes.is_memory(rel):
            handle.who = self.writes.who(ctx.uid, ctx.pid)
        if flags & os.O_TRUNC:
            handle.dirty = True
        return info

    async def _keep_cache_if_unchanged(self, info: pyfuse3.FileInfo, inode: int, st: os.stat_result) -> None:
        """The kernel keeps the pages it has of this file only if the file is as it was when they
        were last known to match it.  The watcher drops them when the file changes beside the
        mount; this catches a change it has not reported yet (or a mount without it), and then
        also drops the size and mtime the kernel holds."""
        node = self.inodes.nodes[inode]
        now = (st.st_size, st.st_mtime_ns)
        info.keep_cache = node.seen == now
        if node.seen is not None and node.seen != now:
            try:
                await trio.to_thread.run_sync(pyfuse3.invalidate_inode, inode, True)
            except OSError:
                pass  # the kernel no longer holds it: nothing is stale
        node.seen = now

    def _saw_own_write(self, handle: Handle) -> None:
        """After our own writes the kernel's pages match the file (writes go through them)."""
        node = self.inodes.nodes.get(handle.inode)
        if node is not None:
            st = os.fstat(handle.fd)
            node.seen = (st.st_size, st.st_mtime_ns)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        rel = self.child(parent_inode, name)
        path = self.full(rel)
        # The kernel's "no such file" may be out of date (made beside the mount a moment ago):
        # what such a file holds is kept before this open writes over it.
        await self.writes.before_change(rel)
        fd = os.open(path, self._backing_flags(flags) | os.O_CREAT, stat.S_IMODE(mode))
        try:
            os.fchmod(fd, stat.S_IMODE(mode) & ~ctx.umask)
            if IS_ROOT:
                os.fchown(fd, ctx.uid, ctx.gid)
            entry = self.entry_for(rel)
        except BaseException:
            os.close(fd)
            raise
        info = self._file_info(fd, entry.st_ino, rel, flags)
        handle = self.handles[info.fh]
        handle.dirty = True
        if self.writes.is_memory(rel):
            handle.who = self.writes.who(ctx.uid, ctx.pid)
        return info, entry

    async def read(self, fh: int, off: int, size: int) -> bytes:
        return os.pread(self.handles[fh].fd, size, off)

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        handle = self.handles[fh]
        if not handle.dirty and handle.who is not None:
            await self.writes.before_change(handle.path, own_handles=1)  # the first write since the last version
        written = os.pwrite(handle.fd, buf, off)
        if handle.who is not None:
            self.writes.wrote(handle.path, off)  # was it only an append? (the history asks)
        handle.dirty = handle.written = handle.wrote = True
        return written

    async def _index_if_dirty(self, handle: Handle, memory_only: bool = False) -> None:
        if not handle.dirty or not self.inodes.has_paths(handle.inode):
            return
        rel = self.inodes.path(handle.inode)
        if memory_only and not self.writes.settled_at_close(rel):
            return
        if memory_only and not handle.written:
            # Only truncated so far: a shell's `>` closes its first descriptor (after dup2) before
            # it writes; the last close settles it, so no empty version is kept in between.
            return
        handle.dirty = handle.written = False
        await self.writes.changed(rel, handle.who or self.writes.unknown_caller)

    async def flush(self, fh: int) -> None:
        # close() returns after FLUSH (RELEASE comes later, asynchronously): index memory files
        # (and take .memfs.toml's settings) here so a search right after close() sees the new
        # content.  Anything else is settled at RELEASE, which close() does not wait for.
        handle = self.handles[fh]
        if handle.wrote:
            handle.wrote = False
            self._saw_own_write(handle)
        await self._index_if_dirty(handle, memory_only=True)

    async def fsync(self, fh: int, datasync: bool) -> None:
        handle = self.handles[fh]
        if datasync:
            os.fdatasync(handle.fd)
        else:
            os.fsync(handle.fd)
        await self._index_if_dirty(handle)

    async def release(self, fh: int) -> None:
        handle = self.handles.pop(fh)
        try:
            if handle.wrote:  # written after the last flush (through a mapping, or by a dup)
                self._saw_own_write(handle)
            os.close(handle.fd)
        finally:
            self.inodes.closed(handle.inode)
            if handle.writable:
                self.writes.closed_for_write(handle.path)
        await self._index_if_dirty(handle)

    # -- extended attributes --------------------------------------------------------------------

    def _xattrs_enabled(self) -> None:
        if not self.xattrs:
            raise FUSEError(errno.ENOSYS)  # the kernel then answers EOPNOTSUPP by itself

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: pyfuse3.RequestContext) -> None:
        self._xattrs_enabled()
        os.setxattr(self.full(self.inodes.path(inode)), name, value, follow_symlinks=False)

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        self._xattrs_enabled()
        try:
            return os.getxattr(self.full(self.inodes.path(inode)), name, follow_symlinks=False)
        except OSError as exc:
            if exc.errno == errno.ENODATA:
                raise FUSEError(pyfuse3.ENOATTR) from None
            raise

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[bytes]:
        self._xattrs_enabled()
        names = os.listxattr(self.full(self.inodes.path(inode)), follow_symlinks=False)
        return [os.fsencode(n) for n in names]

    async def removexattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self._xattrs_enabled()
        os.removexattr(self.full(self.inodes.path(inode)), name, follow_symlinks=False)
