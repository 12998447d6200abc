"""The inode table of the passthrough: FUSE inode numbers <-> workspace-relative paths.

Inode numbers are ours (allocated from 2 up; 1 is the root), keyed by the backing file's
(st_dev, st_ino), so hard links share one FUSE inode and a number is never reused while the kernel
still remembers it.  A node can have several paths (hard links); a directory rename rewrites the
paths of everything below it.

A number stays the file's for as long as the file lives, even across the kernel forgetting it
(memory pressure, an invalidation): a forgotten node's number is retired under its backing key
and given back when that key turns up again, so ``stat`` shows one number, and tail -f, rsync,
git and shells that compare numbers see one file.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

import pyfuse3

ROOT = pyfuse3.ROOT_INODE
# Retired numbers remembered (about 100 bytes each): past this, the longest-forgotten files get a
# new number when next looked up, as every file did before.
RETIRED_MAX = 1 << 20


@dataclass
class Node:
    inode: int
    key: tuple[int, int] | None
    paths: set[str] = field(default_factory=set)
    lookups: int = 0
    open_handles: int = 0
    # (size, mtime) of the backing file when the kernel's cached pages of it were last known to
    # match it (an open, or our own write); None: unknown, the pages must not be trusted.
    seen: tuple[int, int] | None = None


class InodeTable:
    def __init__(self, root_key: tuple[int, int],
                 key_of: Callable[[str], tuple[int, int] | None] = lambda path: None) -> None:
        # What a path's backing (st_dev, st_ino) is now (None if gone): checked when a known
        # inode number turns up under a new path, since the file system reuses the numbers of
        # deleted files and a name learned before may belong to another file by now.
        self.key_of = key_of
        root = Node(ROOT, root_key, {""}, lookups=1)
        self.nodes: dict[int, Node] = {ROOT: root}
        self.by_key: dict[tuple[int, int], int] = {root_key: ROOT}
        self.by_path: dict[str, int] = {"": ROOT}
        # backing key -> the number its node had when the kernel forgot it (see the module doc)
        self.retired: OrderedDict[tuple[int, int], int] = OrderedDict()
        self._next = ROOT + 1

    def path(self, inode: int) -> str:
        """One current path of the inode; KeyError if it has none (unlinked or unknown)."""
        node = self.nodes[inode]
        if "" in node.paths:
            return ""
        if not node.paths:
            raise KeyError(inode)  # unlinked while the kernel still holds it: ENOENT, not EIO
        return min(node.paths)  # deterministic among hard links

    def has_paths(self, inode: int) -> bool:
        node = self.nodes.get(inode)
        return bool(node and node.paths)

    def inode_of(self, path: str) -> int | None:
        return self.by_path.get(path)

    def remember(self, path: str, key: tuple[int, int], count_lookup: bool = True) -> int:
        """The inode for a backing file seen at ``path``; allocates one for a new file."""
        inode = self.by_key.get(key)
        if inode is None:
            inode = self.retired.pop(key, None)
            if inode is None or inode in self.nodes:  # (still held under a name gone to another file)
                inode = self._next
                self._next += 1
            self.nodes[inode] = Node(inode, key)
            self.by_key[key] = inode
        node = self.nodes[inode]
        old = self.by_path.get(path)
        if old is not None and old != inode:
            self._drop_path(old, path)
        others = node.paths - {path}
        node.paths.add(path)
        self.by_path[path] = inode
        for other in others:
            if other and self.key_of(other) != key:
                self._drop_path(inode, other)  # a name that meanwhile went to another file
        if count_lookup:
            node.lookups += 1
        return inode

    def _drop_path(self, inode: int, path: str) -> None:
        node = self.nodes.get(inode)
        if node is None:
            return
        node.paths.discard(path)
        if self.by_path.get(path) == inode:
            del self.by_path[path]
        if not node.paths and node.key is not None and self.by_key.get(node.key) == inode:
            # The backing inode number may be reused by a new file: stop mapping it to this node.
            del self.by_key[node.key]
        self._maybe_free(node)

    def _maybe_free(self, node: Node) -> None:
        if node.inode != ROOT and node.lookups <= 0 and node.open_handles <= 0 and not node.paths:
            if self.nodes.pop(node.inode, None) is not None and node.key is not None:
                self.retired[node.key] = node.inode
                self.retired.move_to_end(node.key)
                if len(self.retired) > RETIRED_MAX:
                    self.retired.popitem(last=False)

    def unlinked(self, path: str) -> int | None:
        inode = self.by_path.get(path)
        if inode is not None:
            self._drop_path(inode, path)
        return inode

    def renamed(self, old: str, new: str) -> None:
        """``old`` now lives at ``new``; paths below a renamed directory follow it."""
        replaced = self.by_path.get(new)
        if replaced is not None:
            self._drop_path(replaced, new)
        inode = self.by_path.pop(old, None)
        if inode is not None:
            node = self.nodes[inode]
            node.paths.discard(old)
            node.paths.add(new)
            self.by_path[new] = inode
        prefix = old + "/"
        moved = [(p, i) for p, i in self.by_path.items() if p.startswith(prefix)]
        for p, i in moved:
            target = new + "/" + p[len(prefix):]
            del self.by_path[p]
            node = self.nodes[i]
            node.paths.discard(p)
            node.paths.add(target)
            self.by_path[target] = i

    def exchanged(self, a: str, b: str) -> None:
        """RENAME_EXCHANGE: the two paths swapped places (with everything below them)."""
        marker = "\x00exchange"
        self.renamed(a, marker)
        self.renamed(b, a)
        self.renamed(marker, b)

    def forget(self, inode: int, count: int) -> None:
        node = self.nodes.get(inode)
        if node is None or inode == ROOT:
            return
        node.lookups -= count
        if node.lookups <= 0:
            # The kernel forgot it; paths stay known only while a lookup count exists.
            for path in list(node.paths):
                if self.by_path.get(path) == inode:
                    del self.by_path[path]
            node.paths.clear()
            if node.key is not None and self.by_key.get(node.key) == inode:
                del self.by_key[node.key]
            self._maybe_free(node)

    def opened(self, inode: int) -> None:
        self.nodes[inode].open_handles += 1

    def closed(self, inode: int) -> None:
        node = self.nodes.get(inode)
        if node is not None:
            node.open_handles -= 1
            self._maybe_free(node)
