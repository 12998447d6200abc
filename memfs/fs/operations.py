"""The mount's operations: virtual nodes (search/, context/, .memfs/) first, the passthrough for
everything else.  Virtual nodes are read-only: every change to them fails with EROFS.

On a shared-mode mount the private paths do not exist: ENOENT on lookup, absent from listings,
EACCES on anything that would create them or move something onto or out of them.

Everything virtual is derived from the index and the version store, which hold MEMORY.md's text
whatever its file's mode: it belongs to the user who mounted (0500 folders, 0400 files) and
answers nobody else (EACCES, checked here as well as by the kernel), so with ``allow_other`` no
other user reads through it what the real files' modes keep from them."""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import time
from collections.abc import AsyncIterator
from typing import Any

import pyfuse3
import trio
from pyfuse3 import FUSEError

from memfs.fs import syncfiles
from memfs.fs.inodes import ROOT
from memfs.fs.passthrough import DirHandle, Handle, Passthrough
from memfs.fs.virtual import VirtualError, VirtualTree, VNode
from memfs.fs.visibility import MountView
from memfs.memory import SyncError
from memfs.workspace import SYNC_DIR, daily_date


def is_sync_file(rel: str) -> bool:
    """Any visible file directly in clawgpt-memory/: what is written there is a sync message."""
    folder, _, name = rel.partition("/")
    return folder == SYNC_DIR and bool(name) and "/" not in name and not name.startswith(".")


log = logging.getLogger(__name__)


class MemfsOperations(Passthrough):
    def __init__(self, *args: Any, virtual: VirtualTree, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.virtual = virtual
        self.view = MountView(self.root, virtual.memory.privacy(virtual.mode), virtual.top_names,
                              virtual.memory.cfg.privacy.shared_writable)
        self.hidden = self.view.hidden  # type: ignore[method-assign]
        self.vhandles: dict[int, bytes] = {}
        # The mounting user, not the workspace's owner: a root mount of someone's workspace must
        # not hand that someone (or anyone) what root's index derived from files they cannot read.
        self.owner = (os.geteuid(), os.getegid())
        self.started_ns = time.time_ns()

    # -- helpers --------------------------------------------------------------------------------

    def vattrs(self, node: VNode) -> pyfuse3.EntryAttributes:
        entry = pyfuse3.EntryAttributes()
        entry.st_ino = node.inode
        entry.entry_timeout = 0  # results change with the index: always ask again
        entry.attr_timeout = 0
        entry.st_mode = (stat.S_IFDIR | 0o500) if node.is_dir else (stat.S_IFREG | 0o400)
        entry.st_nlink = 2 if node.is_dir else 1
        entry.st_uid, entry.st_gid = self.owner
        entry.st_size = 0 if node.is_dir else len(node.content)
        entry.st_blksize = 4096
        entry.st_blocks = (entry.st_size + 511) // 512
        entry.st_atime_ns = entry.st_mtime_ns = entry.st_ctime_ns = node.mtime_ns or self.started_ns
        if node.size is not None:
            entry.st_size = node.size
            entry.st_blocks = (node.size + 511) // 512
            entry.entry_timeout = entry.attr_timeout = 60  # a version never changes
        return entry

    def _for_owner(self, ctx: pyfuse3.RequestContext | None, what: int | str) -> None:
        """Only the mounting user (and root, who reads the state directory anyway) reaches the
        virtual tree: the kernel's check of the modes above is not the only one."""
        if ctx is None or ctx.uid in (self.owner[0], 0):
            return
        log.warning("refused: uid %d asked for virtual %s, which answers only uid %d", ctx.uid, what,
                    self.owner[0])
        raise FUSEError(errno.EACCES)

    def _virtual_child(self, parent: int, name: bytes) -> bool:
        return self.virtual.owns(parent) or (parent == ROOT and os.fsdecode(name) in self.virtual.top_names)

    def _node(self, inode: int) -> VNode:
        node = self.virtual.nodes.get(inode)
        if node is None:
            raise FUSEError(errno.ENOENT)
        return node

    async def _rendered(self, node: VNode, opening: bool = False) -> bytes:
        if node.is_dir or (node.size is not None and not opening):
            return b""  # a version's size is known: it is read only when opened
        try:
            return await trio.to_thread.run_sync(self.virtual.refresh, node)
        except VirtualError as exc:
            raise FUSEError(exc.errno) from None

    def attrs(self, inode: int, st: os.stat_result) -> pyfuse3.EntryAttributes:
        entry = super().attrs(inode, st)
        if self.view.shared and stat.S_ISDIR(st.st_mode):
            entry.st_nlink = 1  # a real count would tell how many folders are hidden ("unknown", as btrfs says)
        return entry

    async def _checked_open(self, info: pyfuse3.FileInfo, inode: int, writing: bool) -> pyfuse3.FileInfo:
        """On a shared mount, the file opened must be the one looked up (the kernel may hold a
        name for a while after it was given to another file), not private by now, and not
        written to through another name."""
        if not self.view.shared:
            return info
        handle = self.handles[info.fh]
        st = os.fstat(handle.fd)
        node = self.inodes.nodes.get(inode)
        stale = node is None or node.key != (st.st_dev, st.st_ino)
        if stale or self.view.opened_private(handle.fd, st):
            await super().release(info.fh)
            log.warning("refused on a shared mount: %s is no longer the file that was looked up, or is private",
                        handle.path)
            raise FUSEError(errno.ESTALE if stale else errno.EACCES)
        return info

    # -- reading --------------------------------------------------------------------------------

    async def lookup(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        if not self._virtual_child(parent_inode, name):
            return await super().lookup(parent_inode, name, ctx)
        self._for_owner(ctx, os.fsdecode(name))
        if name == b"..":
            node = self._node(parent_inode)
            return self.vattrs(self._node(node.parent)) if node.parent != ROOT else await super().getattr(ROOT, ctx)
        try:
            node = self.virtual.lookup(parent_inode if self.virtual.owns(parent_inode) else 1, os.fsdecode(name))
        except VirtualError as exc:
            raise FUSEError(exc.errno) from None
        await self._rendered(node)
        return self.vattrs(node)

    async def getattr(self, inode: int, ctx: pyfuse3.RequestContext | None = None) -> pyfuse3.EntryAttributes:
        if not self.virtual.owns(inode):
            return await super().getattr(inode, ctx)
        self._for_owner(ctx, inode)
        node = self._node(inode)
        await self._rendered(node)
        return self.vattrs(node)

    async def opendir(self, inode: int, ctx: pyfuse3.RequestContext) -> int:
        if not self.virtual.owns(inode):
            # The virtual roots answer by name but stay out of the root's listing (like a
            # NetApp .snapshot): grep -r, git add -A, tar, rsync and backups of the mount would
            # otherwise walk rendered copies of the memory, which change on every read.
            return await super().opendir(inode, ctx)
        self._for_owner(ctx, inode)
        node = self._node(inode)
        above = self.vattrs(self._node(node.parent)) if node.parent != ROOT else await super().getattr(ROOT, ctx)
        extra = [(".", self.vattrs(node)), ("..", above)]
        for child in self.virtual.listing(inode):
            await self._rendered(child)
            extra.append((child.name, self.vattrs(child)))
        fh = self._new_fh()
        self.dirs[fh] = DirHandle(inode, [], extra)
        return fh

    async def readdir(self, fh: int, start_id: int, token: pyfuse3.ReaddirToken) -> None:
        handle = self.dirs[fh]
        if not self.virtual.owns(handle.inode):
            return await super().readdir(fh, start_id, token)
        for index in range(start_id, len(handle.extra)):
            name, attrs = handle.extra[index]
            if not pyfuse3.readdir_reply(token, os.fsencode(name), attrs, index + 1):
                return

    async def open(self, inode: int, flags: int, ctx: pyfuse3.RequestContext) -> pyfuse3.FileInfo:
        if not self.virtual.owns(inode):
            rel = self.inodes.path(inode)
            writing = flags & os.O_ACCMODE != os.O_RDONLY or bool(flags & os.O_TRUNC)
            if writing:
                self.view.refuse_change(rel)
            if is_sync_file(rel) and flags & os.O_ACCMODE != os.O_RDONLY:
                info = await self._open_sync(inode, rel, flags)
                self.handles[info.fh].who = self.writes.who(ctx.uid, ctx.pid)
                return await self._checked_open(info, inode, writing)
            return await self._checked_open(await super().open(inode, flags, ctx), inode, writing)
        self._for_owner(ctx, inode)
        if flags & os.O_ACCMODE != os.O_RDONLY or flags & os.O_TRUNC:
            raise FUSEError(errno.EROFS)
        node = self._node(inode)
        if node.is_dir:
            raise FUSEError(errno.EISDIR)
        fh = self._new_fh()
        self.vhandles[fh] = await self._rendered(node, opening=True)  # this handle's snapshot
        self.virtual.note_query(node)
        info = pyfuse3.FileInfo(fh=fh)
        info.direct_io = True  # no page cache: every open reads its own rendering
        return info

    # -- ClawGPT sync files: writes are staged, validated and routed at flush ------------------

    async def _open_sync(self, inode: int, rel: str, flags: int) -> pyfuse3.FileInfo:
        size = os.lstat(self.full(rel)).st_size
        if flags & os.O_TRUNC and size:
            log.warning("refused: truncating %s would lose synced messages", rel)
            raise FUSEError(errno.EPERM)
        fd = os.open(self.full(rel), os.O_RDONLY | os.O_CLOEXEC)
        info = self._file_info(fd, inode, rel, os.O_RDONLY)
        handle = self.handles[info.fh]
        handle.staged, handle.staged_base, handle.parsed = bytearray(), size, []
        info.direct_io = True  # the file does not hold staged bytes: keep the page cache out of it
        return info

    async def _ingest(self, handle: Any) -> None:
        if not handle.staged:
            if handle.created:
                # Nothing to store (a refused write left nothing staged): the carrier goes now, at
                # flush, which close() waits for; left to release, which the kernel sends after
                # close() returns, a quick second `>>` found the name and opened the file just as
                # release removed it (ENOENT instead of EINVAL or a stored message).
                await self._drop_inbox(handle)
            return
        data = bytes(handle.staged)
        # The lines validated as write() took them are not parsed again.
        parsed = (handle.parsed, handle.checked, handle.checked_lines) if handle.parsed is not None else None
        handle.staged_base += len(data)
        handle.staged.clear()
        handle.checked = handle.checked_lines = 0
        handle.parsed, handle.scan = [], None
        memory = self.writes.memory
        writes = self.writes
        claimed: list[str] = []

        def claim(rels: list[str]) -> None:
            """The day files the ingest's thread is about to append to are being written by us:
            the workspace watcher must not take them for changes made beside the mount (it
            would index them again, and could keep their versions under the wrong name)."""
            trio.from_thread.run_sync(lambda: [writes.open_for_write(rel) for rel in rels])
            claimed.extend(rels)

        try:
            result = await trio.to_thread.run_sync(memory.ingest_sync, data, handle.path, self.virtual.mode,
                                                   handle.who or writes.unknown_caller, parsed, True, claim)
        except SyncError as exc:
            log.warning("refused sync write to %s: %s", handle.path, exc)
            self._unclaim(claimed)
            await self._forget_cached(handle.path)  # the kernel counted bytes that never landed
            if handle.created:
                await self._drop_inbox(handle)  # before close() returns: a new open must not race it
            raise FUSEError(errno.EINVAL) from None
        except BaseException:
            self._unclaim(claimed)
            raise
        for rel in result.files:
            writes.note_own(rel)  # before the claims go: the watcher knows these versions as ours
        self._unclaim(claimed)
        await self._forget_cached(handle.path)
        if handle.created:
            await self._drop_inbox(handle)  # before close() returns: the inbox is gone by then
        for rel in result.files:
            await self._forget_cached(rel)
        # The workers last: started earlier, their threads would take the interpreter from the
        # steps above, which close() still waits for.
        writes.kick()
        for rel in result.provisional:
            writes.completer.add(rel)
        log.info("sync via %s: %d stored, %d duplicates", handle.path, result.stored, result.duplicates)

    def _unclaim(self, rels: list[str]) -> None:
        for rel in rels:
            self.writes.closed_for_write(rel)

    async def _forget_cached(self, rel: str) -> None:
        """A file changed behind the kernel's back (we appended to it directly)."""
        inode = self.inodes.inode_of(rel)
        if inode is not None:
            try:
                await trio.to_thread.run_sync(pyfuse3.invalidate_inode, inode)
            except OSError:
                pass
        parent = self.inodes.inode_of(rel.rpartition("/")[0])
        if parent is not None:
            pyfuse3.invalidate_entry_async(parent, os.fsencode(rel.rpartition("/")[2]), ignore_enoent=True)

    async def _drop_inbox(self, handle: Any) -> None:
        """A file created only to carry a sync message is removed once its messages are stored,
        unless it is a date file that now holds messages of its own."""
        rel = handle.path
        full = self.full(rel)
        try:
            if os.lstat(full).st_size == 0 and not (rel.endswith(".jsonl") and daily_date(rel)):
                inode = self.inodes.inode_of(rel)
                os.unlink(full)
                self.inodes.unlinked(rel)
                parent = self.inodes.inode_of(rel.rpartition("/")[0])
                if parent is not None:
                    # Waited for, not queued: the kernel must have forgotten the name before
                    # close() returns, or the next `>>` finds the cached entry, opens the gone
                    # file instead of creating it, and fails with ENOENT.  A worker thread, so
                    # requests the kernel needs meanwhile (a lookup in this folder) are answered.
                    name = os.fsencode(rel.rpartition("/")[2])
                    try:
                        await trio.to_thread.run_sync(pyfuse3.invalidate_entry, parent, name, inode or 0)
                    except OSError:
                        pass  # the kernel had no entry for it
        except FileNotFoundError:
            pass

    async def write(self, fh: int, off: int, buf: bytes) -> int:
        handle = self.handles.get(fh)
        if handle is not None and handle.staged is not None:
            return syncfiles.stage(handle, off, buf, self.writes.memory)
        if self.view.shared and handle is not None:  # renamed onto MEMORY.md since it was opened?
            self.check_open_file(handle, os.fstat(handle.fd))
        return await super().write(fh, off, buf)

    async def create(self, parent_inode: int, name: bytes, mode: int, flags: int,
                     ctx: pyfuse3.RequestContext) -> tuple[pyfuse3.FileInfo, pyfuse3.EntryAttributes]:
        self._refuse(parent_inode, names=(name,))
        self.view.refuse_create(self.child(parent_inode, name))
        if self.view.shared:
            # The kernel creates only after a lookup said "no such file"; if the file exists
            # all the same it is one this mount hides, and must not be opened by a create.
            flags |= os.O_EXCL
        async with self._hidden_exists():
            info, entry = await super().create(parent_inode, name, mode, flags, ctx)
        handle = self.handles[info.fh]
        self.view.created(handle.path)
        if is_sync_file(handle.path):
            handle.who = handle.who or self.writes.who(ctx.uid, ctx.pid)
            handle.staged, handle.staged_base, handle.parsed = bytearray(), 0, []
            handle.created = True
            handle.dirty = False
            info.direct_io = True
        return info, entry

    async def read(self, fh: int, off: int, size: int) -> bytes:
        data = self.vhandles.get(fh)
        if data is not None:
            return data[off : off + size]
        if self.view.shared:
            handle = self.handles[fh]
            self.check_open_file(handle, os.fstat(handle.fd))
        return await super().read(fh, off, size)

    def check_open_file(self, handle: Handle, st: os.stat_result) -> None:
        # A file opened under a public name may have been renamed onto MEMORY.md since.
        if self.view.opened_private(handle.fd, st):
            log.warning("refused on a shared mount: %s has become private since it was opened", handle.path)
            raise FUSEError(errno.EACCES)

    async def _settled_here(self, fh: int) -> bool:
        """Flush/fsync of a virtual or sync handle (done here); False: pass it through."""
        if fh in self.vhandles:
            return True
        handle = self.handles.get(fh)
        if handle is not None and handle.staged is not None:
            await self._ingest(handle)
            return True
        return False

    async def flush(self, fh: int) -> None:
        if not await self._settled_here(fh):
            await super().flush(fh)

    async def fsync(self, fh: int, datasync: bool) -> None:
        if not await self._settled_here(fh):
            await super().fsync(fh, datasync)

    async def release(self, fh: int) -> None:
        if self.vhandles.pop(fh, None) is not None:
            return
        handle = self.handles.get(fh)
        if handle is not None and handle.staged is not None:
            handle.staged.clear()  # whatever was not flushed was never acknowledged
            await super().release(fh)
            if handle.created:
                await self._drop_inbox(handle)
            return
        await super().release(fh)

    async def readlink(self, inode: int, ctx: pyfuse3.RequestContext) -> bytes:
        if self.virtual.owns(inode):
            raise FUSEError(errno.EINVAL)
        return await super().readlink(inode, ctx)

    @contextlib.asynccontextmanager
    async def _hidden_exists(self) -> AsyncIterator[None]:
        """On a shared mount, "exists" about a name it hides would tell that it is there."""
        try:
            yield
        except OSError as exc:
            if self.view.shared and exc.errno == errno.EEXIST:
                raise FUSEError(errno.EACCES) from None
            raise

    # -- everything that would change a virtual node: EROFS --------------------------------------

    def _refuse(self, *parents_or_inodes: int, names: tuple[bytes, ...] = ()) -> None:
        for inode in parents_or_inodes:
            if self.virtual.owns(inode):
                raise FUSEError(errno.EROFS)
        for parent, name in zip(parents_or_inodes, names):
            if parent == ROOT and os.fsdecode(name) in self.virtual.top_names:
                raise FUSEError(errno.EROFS)

    async def setattr(self, inode: int, attr: pyfuse3.EntryAttributes, fields: pyfuse3.SetattrFields,
                      fh: int | None, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        self._refuse(inode)
        if self.inodes.has_paths(inode):
            self.view.refuse_change(self.inodes.path(inode))
        if self.view.shared and fh is not None and fh in self.handles:
            handle = self.handles[fh]
            self.check_open_file(handle, os.fstat(handle.fd))
        if fields.update_size and self.inodes.has_paths(inode) and is_sync_file(self.inodes.path(inode)):
            handle = self.handles.get(fh) if fh is not None else None
            if handle is not None and handle.staged is not None and attr.st_size >= handle.staged_base:
                syncfiles.truncate(handle, attr.st_size)
                return self.attrs(inode, os.lstat(self.full(handle.path)))
            if attr.st_size < os.lstat(self.full(self.inodes.path(inode))).st_size:
                log.warning("refused: truncating %s would lose synced messages", self.inodes.path(inode))
                raise FUSEError(errno.EPERM)
        return await super().setattr(inode, attr, fields, fh, ctx)

    async def mkdir(self, parent_inode: int, name: bytes, mode: int, ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        self._refuse(parent_inode, names=(name,))
        self.view.refuse_create(self.child(parent_inode, name))
        async with self._hidden_exists():
            return await super().mkdir(parent_inode, name, mode, ctx)

    async def mknod(self, parent_inode: int, name: bytes, mode: int, rdev: int,
                    ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        self._refuse(parent_inode, names=(name,))
        self.view.refuse_create(self.child(parent_inode, name))
        async with self._hidden_exists():
            entry = await super().mknod(parent_inode, name, mode, rdev, ctx)
        self.view.created(self.child(parent_inode, name))
        return entry

    async def symlink(self, parent_inode: int, name: bytes, target: bytes,
                      ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        self._refuse(parent_inode, names=(name,))
        self.view.refuse_symlink(self.child(parent_inode, name), target)
        async with self._hidden_exists():
            return await super().symlink(parent_inode, name, target, ctx)

    async def link(self, inode: int, new_parent_inode: int, new_name: bytes,
                   ctx: pyfuse3.RequestContext) -> pyfuse3.EntryAttributes:
        self._refuse(inode, new_parent_inode, names=(b"", new_name))
        node = self.inodes.nodes.get(inode)
        self.view.refuse_link(sorted(node.paths) if node else [], self.child(new_parent_inode, new_name))
        async with self._hidden_exists():
            return await super().link(inode, new_parent_inode, new_name, ctx)

    async def unlink(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self._refuse(parent_inode, names=(name,))
        rel = self.child(parent_inode, name)
        self.view.refuse_change(rel)
        await super().unlink(parent_inode, name, ctx)
        self.view.gone(rel)

    async def rmdir(self, parent_inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self._refuse(parent_inode, names=(name,))
        self.view.refuse_change(self.child(parent_inode, name))
        await super().rmdir(parent_inode, name, ctx)

    async def rename(self, parent_inode_old: int, name_old: bytes, parent_inode_new: int, name_new: bytes,
                     flags: int, ctx: pyfuse3.RequestContext) -> None:
        self._refuse(parent_inode_old, parent_inode_new, names=(name_old, name_new))
        source, target = self.child(parent_inode_old, name_old), self.child(parent_inode_new, name_new)
        self.view.refuse_move(source, target, exchange=bool(flags & pyfuse3.RENAME_EXCHANGE))
        if is_sync_file(target):
            try:
                if os.lstat(self.full(target)).st_size:
                    log.warning("refused: renaming onto %s would replace synced messages", target)
                    raise FUSEError(errno.EPERM)
            except FileNotFoundError:
                pass
        await super().rename(parent_inode_old, name_old, parent_inode_new, name_new, flags, ctx)
        self.view.moved(source, target)

    async def setxattr(self, inode: int, name: bytes, value: bytes, ctx: pyfuse3.RequestContext) -> None:
        self._refuse(inode)
        if self.inodes.has_paths(inode):
            self.view.refuse_change(self.inodes.path(inode))
        await super().setxattr(inode, name, value, ctx)

    async def removexattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> None:
        self._refuse(inode)
        await super().removexattr(inode, name, ctx)

    async def getxattr(self, inode: int, name: bytes, ctx: pyfuse3.RequestContext) -> bytes:
        if self.virtual.owns(inode):
            self._xattrs_enabled()
            raise FUSEError(pyfuse3.ENOATTR)
        return await super().getxattr(inode, name, ctx)

    async def listxattr(self, inode: int, ctx: pyfuse3.RequestContext) -> list[bytes]:
        if self.virtual.owns(inode):
            self._xattrs_enabled()
            return []
        return await super().listxattr(inode, ctx)
