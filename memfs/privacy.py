"""What is private, and what each mode may see.

``privacy.private_paths`` lists workspace-relative paths or glob patterns; a path is private
when it or one of its parent folders matches.  The ``main`` mode sees everything.  Every other
mode is shared: for it a private path does not exist, through any route (files on the mount,
search results, the context bundle, status, ``memfs get``).  A path that reaches a private file
through a symlink is private too, and naming either spelling of the long-term file (MEMORY.md,
memory.md) makes both private.
"""

from __future__ import annotations

import fnmatch
import functools
import os
from collections.abc import Iterable, Sequence
from pathlib import Path, PurePosixPath

from memfs.config import MAIN_MODE
from memfs.workspace import LONG_TERM_NAMES

_GLOB = frozenset("*?[")


class Privacy:
    def __init__(self, patterns: Sequence[str], mode: str) -> None:
        self.mode = mode
        self.shared = mode != MAIN_MODE
        literal = {p for p in patterns if not _GLOB & set(p)}
        if literal & set(LONG_TERM_NAMES):
            literal |= set(LONG_TERM_NAMES)  # one long-term memory, whichever spelling it has
        self.literal = frozenset(literal)
        self.globs = tuple(p for p in patterns if _GLOB & set(p))
        # Asked for every name a shared mount looks up: remember the answers.
        self.is_private = functools.lru_cache(maxsize=8192)(self._is_private)

    def _is_private(self, rel: str) -> bool:
        if not rel:
            return False
        path = PurePosixPath(rel)
        for candidate in (rel, *(p.as_posix() for p in path.parents if p.as_posix() != ".")):
            if candidate in self.literal:
                return True
            if any(fnmatch.fnmatchcase(candidate, pattern) for pattern in self.globs):
                return True
        return False

    def hides(self, rel: str) -> bool:
        """Whether ``rel`` (workspace-relative) must not exist for this mode."""
        return self.shared and self.is_private(rel)

    def hides_file(self, workspace: Path, rel: str) -> bool:
        """``hides``, also following symlinks: a link to a private file is as private as it."""
        if not self.shared:
            return False
        if self.is_private(rel):
            return True
        full = workspace / rel
        real = Path(os.path.realpath(full))
        if real == full:
            return False
        try:
            target = real.relative_to(Path(os.path.realpath(workspace))).as_posix()
        except ValueError:
            return False  # outside the workspace: not ours to judge (memfs get refuses it anyway)
        return self.is_private(target)

    def hidden_among(self, paths: Iterable[str]) -> frozenset[str]:
        """The paths of ``paths`` this mode must not see."""
        if not self.shared:
            return frozenset()
        return frozenset(p for p in paths if self.is_private(p))
