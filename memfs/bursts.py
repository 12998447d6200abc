"""Whether the closes of memory files come in a burst (a notes folder copied in, an import writing
a file per session), and the wait for the pause after one.

A warm process's background work gives way to such a writer (issue #45): the model's calls (a
core each, and the index's write lock while their vectors are stored) and the exact chunks of
the files a burst wrote (:mod:`memfs.index.bigwrites`) wait for the pause, so each close pays only
for what must be done before it returns.  A note written alone is not a burst: everything about
it is done at once, as before.
"""

from __future__ import annotations

import math

import trio

# Two closes less than GAP_S apart make a burst.  A writer with a person or a model behind it
# pauses far longer between files (an agent's tool calls are seconds apart); a program copying
# files closes the next one within milliseconds (cp -r: 5-10 ms a note through the mount).
GAP_S = 0.2
# A writer that never pauses still lets the background work run at least this often.
MOST_S = 2.0


class Bursts:
    """The times of a mount's (or a daemon's) closes, on trio's clock."""

    def __init__(self) -> None:
        self._last_close = -math.inf  # when the last close's work ended
        self._started: float | None = None  # when the close in progress started (continues())
        self._going = False  # the last close started less than GAP_S after the one before ended

    def continues(self) -> bool:
        """Whether a close starting now continues a burst (the last one ended less than GAP_S
        ago): asked before its work, which may leave the rest for the pause."""
        self._started = trio.current_time()
        return self._started - self._last_close < GAP_S

    def closed(self) -> bool:
        """A close's work is done; returns whether it was one of a burst, judged as
        :meth:`continues` judged it when it started (its own work, however long, is no pause)."""
        now = trio.current_time()
        started = now if self._started is None else self._started
        self._going = started - self._last_close < GAP_S
        self._last_close, self._started = now, None
        return self._going

    async def pause(self, most_s: float | None = None) -> None:
        """While closes come in a burst, wait until they stop for GAP_S (at most ``most_s``,
        MOST_S by default)."""
        until = trio.current_time() + (MOST_S if most_s is None else most_s)
        while self._going:
            now = trio.current_time()
            quiet = self._last_close + GAP_S
            if now >= quiet:
                self._going = False
            elif now >= until:
                return
            else:
                await trio.sleep(min(quiet, until) - now)
