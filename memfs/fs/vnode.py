"""A node of the mount's virtual tree (search/, context/, history/, .memfs/) and its error."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol


class VirtualError(Exception):
    def __init__(self, errno_: int) -> None:
        super().__init__(errno_)
        self.errno = errno_


@dataclass
class VNode:
    inode: int
    name: str
    parent: int  # inode of the parent (1 for the mount's root)
    is_dir: bool
    render: Callable[[], bytes] | None = None  # files only
    content: bytes = b""
    rendered_at: int = -1  # index generation of `content` (-1: never rendered)
    rendered_content: int = -1  # the index's content generation then (search files)
    rendered_mono: float | None = None  # time.monotonic() of that rendering
    children: dict[str, int] = field(default_factory=dict)
    # history/ nodes: what they stand for (see memfs.fs.historyfiles)
    hkind: str = ""  # "dir" (a folder of paths), "file" (a file's versions), "version", "diffdir", "diff"
    hpath: str = ""  # the workspace path (or folder) a history node is about
    size: int | None = None  # known without rendering (a version): stat answers from it
    mtime_ns: int | None = None  # a version's time; a rendered file's last change


class NodeTree(Protocol):
    """What a part of the virtual tree (history/) needs of the tree it lives in: its nodes, a way
    to add one, and the reader it renders for."""

    nodes: dict[int, VNode]
    mode: str

    def add(self, name: str, parent: int, is_dir: bool, render: Callable[[], bytes] | None = None) -> VNode: ...
