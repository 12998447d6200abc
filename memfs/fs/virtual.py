"""Virtual files on the mount: ``search/[OPTIONS/]<query>.md|.json``, ``context/<mode>.md``,
``history/<path>/<version>`` (see :mod:`memfs.fs.historyfiles`) and ``.memfs/status``.  They are read-only (EROFS on any change) and rendered by the same Memory call
and renderer as the matching CLI command, so both print the same bytes.

They sit at the mount's root, or all inside one folder (``mount.virtual_prefix``, for example
``.memfs/search/``) so that a workspace with real ``search/`` or ``context/`` folders can be
mounted whole.  A shared-mode mount renders everything for the shared view, and its
``context/main.md`` is EACCES.

A file's bytes are rendered when it is looked up or opened; ``stat`` reports the size of the bytes
the next open will read, and an open handle keeps its own snapshot, so a reader never sees a
result change under it.  Search results are cached per index generation, and while vectors are
still arriving a rendering serves the lookup, open and fstat of one read (for REUSE_S, unless the
text of the index changed meanwhile), so a ``cat`` renders once.
"""

from __future__ import annotations

import errno
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from memfs.config import MAIN_MODE
from memfs.fs.historyfiles import HistoryFiles
from memfs.fs.vnode import VirtualError, VNode
from memfs.memory import BUNDLE_MODES, BadOption, IndexOffline, Memory, SearchOptions, parse_options
from memfs.render.results import render_json, render_markdown
from memfs.render.status import render_status

log = logging.getLogger(__name__)
FIRST_INODE = 1 << 48  # far above anything the passthrough allocates
SEARCH, CONTEXT, META, HISTORY = "search", "context", ".memfs", "history"
ROOT_NAMES = (SEARCH, CONTEXT, META, HISTORY)
STATUS = "status"
RECENT_QUERIES = 50
NAME_MAX = 255
MAX_QUERY_NODES = 2000
REUSE_S = 1.0  # how long a search file's rendering serves the lookups and opens that follow it


def parse_folder(name: str) -> SearchOptions:
    """``n=10,min=0.2,in=sessions`` -> options; BadOption (naming the option) for anything else.
    A path can hold no ``/``, so ``in=`` writes a deeper folder with ``:`` (``in=projects:alpha``)."""
    values: dict[str, str] = {}
    for part in name.split(","):
        key, sep, value = part.partition("=")
        if not sep:
            raise BadOption(f"{part!r} is not an option: write key=value (n, min, in, after, before, mmr, decay), "
                            "separated by commas")
        if key in values:
            raise BadOption(f"option {key!r} is given twice")
        values[key] = value.replace(":", "/") if key == "in" else value
    return parse_options(values)


def split_query(name: str) -> tuple[str, str] | None:
    """``what we decided.md`` -> ("what we decided", "md"); None for other names."""
    for ext in ("md", "json"):
        if name.endswith("." + ext) and len(name) > len(ext) + 1:
            query = name[: -len(ext) - 1]
            if query.strip():
                return query, ext
    return None


def top_names(prefix: str) -> tuple[str, ...]:
    """The names the virtual tree takes at the mount's root."""
    return (prefix,) if prefix else ROOT_NAMES


class VirtualTree:
    def __init__(self, memory: Memory, mounted_at: str, mode: str = MAIN_MODE, prefix: str = "") -> None:
        self.memory = memory
        self.mounted_at = mounted_at
        self.mode = mode
        self.nodes: dict[int, VNode] = {}
        self._next = FIRST_INODE
        self.recent: OrderedDict[str, None] = OrderedDict()  # query file names, newest last
        self.top: dict[str, int] = {}  # name at the mount's root -> inode
        # What .memfs/status tells of the search files: how often they were rendered, and the
        # longest any rendering waited for vectors.
        self.renders = 0
        self.longest_wait_ms = 0.0
        # Which processes serve the workspace, for the "served by:" lines `memfs status` prints
        # too; set by the mount (the listing is the serve layer's).
        self.processes: Callable[[], list[dict[str, Any]]] | None = None
        if prefix:
            folder = self.add(prefix, 1, True)
            self.top[prefix] = folder.inode
            self.roots = {SEARCH: self.add(SEARCH, folder.inode, True).inode,
                          CONTEXT: self.add(CONTEXT, folder.inode, True).inode,
                          HISTORY: self.add(HISTORY, folder.inode, True).inode,
                          META: folder.inode}
        else:
            self.roots = {name: self.add(name, 1, True).inode for name in ROOT_NAMES}
            self.top = dict(self.roots)
        self.top_names = frozenset(self.top)
        self.nodes[self.roots[HISTORY]].hkind = "dir"
        self.history = HistoryFiles(self, memory)
        # Bundles this mount may not read (a shared mount: the main one) answer EACCES.
        self.denied: set[str] = set()
        for bundle_mode in BUNDLE_MODES:
            if bundle_mode == MAIN_MODE and memory.privacy(mode).shared:
                self.denied.add(f"{bundle_mode}.md")
                continue
            self.add(f"{bundle_mode}.md", self.roots[CONTEXT], False,
                      lambda m=bundle_mode: self.memory.bundle(m, viewer=self.mode).encode())
        self.add(STATUS, self.roots[META], False, self._status)

    def add_meta_file(self, name: str, render: Callable[[], bytes]) -> None:
        """A read-only file in ``.memfs/`` rendered by ``render`` (the daemon's own facts)."""
        self.add(name, self.roots[META], False, render)

    def owns(self, inode: int) -> bool:
        return inode >= FIRST_INODE

    def add(self, name: str, parent: int, is_dir: bool, render: Callable[[], bytes] | None = None) -> VNode:
        node = VNode(self._next, name, parent, is_dir, render)
        self._next += 1
        self.nodes[node.inode] = node
        if parent in self.nodes:
            self.nodes[parent].children[name] = node.inode
        return node

    def _status(self) -> bytes:
        info = self.memory.status(mode=self.mode)
        info["mounted_at"] = self.mounted_at
        info["uptime_s"] = round(time.time() - self.memory.started, 1)
        info["search_renders"] = self.renders
        info["longest_vector_wait_ms"] = self.longest_wait_ms
        if self.processes is not None:
            info["processes"] = self.processes()
        return render_status(info).encode()

    def _search_renderer(self, query: str, ext: str, options: SearchOptions) -> Callable[[], bytes]:
        def render() -> bytes:
            response = self.memory.search(query, options=options, mode=self.mode)
            self.renders += 1
            self.longest_wait_ms = max(self.longest_wait_ms, response.waited_ms)
            text = render_json(response) if ext == "json" else render_markdown(response)
            return text.encode()

        return render

    def lookup(self, parent: int, name: str) -> VNode:
        """The child ``name`` of virtual dir ``parent``; creates search result nodes on demand."""
        if len(os.fsencode(name)) > NAME_MAX:
            raise VirtualError(errno.ENAMETOOLONG)  # FUSE passes longer names on; a file system must not
        if parent == 1:
            if name not in self.top:
                raise VirtualError(errno.ENOENT)
            return self.nodes[self.top[name]]
        node = self.nodes.get(parent)
        if node is None or not node.is_dir:
            raise VirtualError(errno.ENOENT)
        if node.hkind:
            return self.history.lookup(node, name)
        if parent == self.roots[CONTEXT] and name in self.denied:
            raise VirtualError(errno.EACCES)
        if name in node.children and name != "":
            child = self.nodes.get(node.children[name])
            if child is not None:
                return child
        in_search_root = parent == self.roots[SEARCH]
        in_options = node.parent == self.roots[SEARCH]
        if in_search_root and "=" in name:
            # A name that parses as options is an options folder whatever its values end in
            # (``in=MEMORY.md``); only a name that does not is a query (``x=1 or y.md``).
            try:
                parse_folder(name)
            except BadOption as exc:
                if split_query(name) is None:
                    log.warning("search/%s: %s", name, exc)
                    raise VirtualError(errno.EINVAL) from None
            else:
                return self.add(name, parent, True)
        if in_search_root or in_options:
            parsed = split_query(name)
            if parsed is None:
                if any(name.endswith(ext) and not name[: -len(ext)].strip() for ext in (".md", ".json")):
                    raise VirtualError(errno.ENOENT)  # an empty query
                where = f"{node.name}/{name}" if in_options else name
                # A question holding "/" arrives here cut at it: the kernel looks its first part
                # up as a folder.  Say so, or the EINVAL is a riddle.
                cut = "" if "." in name[-6:] else (
                    "; if the question holds a '/', the path was cut there: a file name cannot hold '/', "
                    "so write it otherwise (1 of 2, or ∕ U+2215)")
                log.warning("search/%s: a query is a file ending in .md or .json (search/<query>.md)%s", where, cut)
                raise VirtualError(errno.EINVAL)
            options = parse_folder(node.name) if in_options else SearchOptions()
            self._trim()
            child = self.add(name, parent, False, self._search_renderer(parsed[0], parsed[1], options))
            return child
        raise VirtualError(errno.ENOENT)

    def _trim(self) -> None:
        files = [n for n in self.nodes.values() if self.is_search(n)]
        for old in files[: max(0, len(files) - MAX_QUERY_NODES)]:
            self.nodes[old.parent].children.pop(old.name, None)
            del self.nodes[old.inode]

    def is_search(self, node: VNode) -> bool:
        parent = self.nodes.get(node.parent)
        return node.render is not None and parent is not None and (
            parent.inode == self.roots[SEARCH] or parent.parent == self.roots[SEARCH])

    def note_query(self, node: VNode) -> None:
        if node.parent == self.roots[SEARCH] and node.render is not None:
            self.recent.pop(node.name, None)
            self.recent[node.name] = None
            while len(self.recent) > RECENT_QUERIES:
                self.recent.popitem(last=False)

    def refresh(self, node: VNode) -> bytes:
        """Render ``node`` again unless the index has not moved since its last rendering (blocking:
        call it off the event loop)."""
        assert node.render is not None
        if node.size is not None:
            return node.render()  # a version: never changes, and is not kept in memory
        store = self.memory.store
        search = self.is_search(node)
        try:
            generation = store.generation
            # Search results depend on the index only: cache them per generation (unless chunks are
            # still waiting for vectors).  Bundles read any file and status changes by the second.
            cacheable = search and not self.memory.has_pending
            # One `cat` looks the file up, opens it and fstats it: each would render it again while
            # vectors keep arriving.  A rendering made a moment ago serves them all, as long as no
            # text changed since (only vectors): the size stat reports is the size the open reads.
            content_generation = store.content_generation if search else -1
        except IndexOffline:  # its server is away: every file renders (a search says so, a bundle reads files)
            generation, cacheable, content_generation = -1, False, -2
        recent = (search and node.rendered_mono is not None and node.rendered_content == content_generation
                  and time.monotonic() - node.rendered_mono < REUSE_S)
        if (node.rendered_at != generation or not cacheable) and not recent:
            content = node.render()
            if content != node.content or node.mtime_ns is None:
                node.mtime_ns = time.time_ns()  # so tools that compare size and time see a change
            node.content = content
            node.rendered_at = generation
            node.rendered_content = content_generation
            node.rendered_mono = time.monotonic()
        return node.content

    def listing(self, inode: int) -> list[VNode]:
        node = self.nodes[inode]
        if node.hkind:
            return self.history.listing(node)
        if inode == self.roots[SEARCH]:
            names = list(reversed(self.recent))
            return [self.nodes[node.children[n]] for n in names if n in node.children]
        return [self.nodes[i] for _, i in sorted(node.children.items())]
