"""``history/`` on the mount: every kept version of every memory file, read-only.

    history/MEMORY.md/                          the versions of MEMORY.md, oldest first by name
    history/MEMORY.md/2026-11-22T14-05-33Z.md   one version's exact bytes (stat: its size and time)
    history/MEMORY.md/diff/<version>.diff       what that version changed (against the one before)
    history/memory/2026-11-22.md/...            deeper paths as folders

A deleted file keeps its folder here.  The listing is read from the version store at every
``ls``; a mode sees only the paths it may see (:mod:`memfs.versions`), so on a shared mount
``history/MEMORY.md`` does not exist.  Like ``search/``, ``history/`` stays out of the root's
listing.
"""

from __future__ import annotations

import errno

from memfs.fs.vnode import NodeTree, VirtualError, VNode
from memfs.memory import Memory, Version, Versions, VersionsError

DIFF_DIR = "diff"
Entry = tuple[str, object]  # (kind, the path or the Version it stands for)


class HistoryFiles:
    def __init__(self, tree: NodeTree, memory: Memory) -> None:
        self.tree = tree
        self.memory = memory

    def _versions(self) -> Versions:
        return self.memory.versions(self.tree.mode)

    def entries(self, node: VNode) -> dict[str, Entry]:
        """The names in ``node`` (a history folder) and what each stands for."""
        versions = self._versions()
        out: dict[str, Entry] = {}
        if node.hkind == "diffdir":
            for version in self._listed(versions, node.hpath):
                out[f"{version.name}.diff"] = ("diff", version)
            return out
        prefix = f"{node.hpath}/" if node.hpath else ""
        for path in versions.paths():
            if not path.startswith(prefix):
                continue
            head, deeper, _ = path[len(prefix):].partition("/")
            if head and (not deeper or head not in out):
                out[head] = ("dir", prefix + head) if deeper else ("file", prefix + head)
        if node.hkind == "file":
            listed = self._listed(versions, node.hpath)
            for version in listed:
                out[version.name] = ("version", version)
            if listed:
                out[DIFF_DIR] = ("diffdir", node.hpath)
        return out

    @staticmethod
    def _listed(versions: Versions, rel: str) -> list[Version]:
        try:
            return versions.list(rel)
        except VersionsError:
            return []

    def lookup(self, parent: VNode, name: str) -> VNode:
        entry = self.entries(parent).get(name)
        if entry is None:
            raise VirtualError(errno.ENOENT)
        return self._node(parent, name, entry)

    def listing(self, node: VNode) -> list[VNode]:
        return [self._node(node, name, entry) for name, entry in sorted(self.entries(node).items())]

    def _node(self, parent: VNode, name: str, entry: Entry) -> VNode:
        kind, what = entry
        version = what if isinstance(what, Version) else None
        hpath = version.path if version is not None else str(what)
        # The same name keeps its inode while it stands for the same thing (a version's name is
        # never given to other bytes of its file: see memfs.history.store.version_name).
        known = self.tree.nodes.get(parent.children.get(name, -1))
        if known is not None and known.hkind == kind and known.hpath == hpath:
            return known
        if kind == "version":
            assert version is not None
            node = self.tree.add(name, parent.inode, False, self._content(version))
            node.size, node.mtime_ns = version.size, version.time_ns
        elif kind == "diff":
            assert version is not None
            node = self.tree.add(name, parent.inode, False, self._diff(version))
            node.mtime_ns = version.time_ns
        else:
            node = self.tree.add(name, parent.inode, True)
        node.hkind, node.hpath = kind, hpath
        return node

    def _content(self, version: Version):  # type: ignore[no-untyped-def]
        def render() -> bytes:
            versions = self._versions()
            try:
                # Asked again at each open: pruned, or hidden from this reader, since it was listed.
                now = versions.get(version.path, version.name)
                if now.sha256 != version.sha256:
                    raise VersionsError(f"{version.path} {version.name} is not what was listed")
                return versions.content(now)
            except VersionsError as exc:
                raise VirtualError(errno.ENOENT) from exc

        return render

    def _diff(self, version: Version):  # type: ignore[no-untyped-def]
        def render() -> bytes:
            try:
                return self._versions().diff(version.path, None, version.name).encode("utf-8", "surrogateescape")
            except VersionsError as exc:
                raise VirtualError(errno.ENOENT) from exc

        return render
