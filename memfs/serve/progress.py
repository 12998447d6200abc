"""How far a long `memfs index` got, where its output is not a terminal: a plain line every
PLAIN_EVERY_S (done, total, rate, time left), fed by (done, total) callbacks; and, when a daemon
runs the command (its answer comes at the end), those callbacks from a second connection that asks
the daemon every second how many passages still wait; before that, which mount or daemon is
embedding them already (:func:`already_embedding`).  Standard library only, like
:mod:`memfs.serve.wire`: the lean entry point (:mod:`memfs.quickcli`) uses it as the full CLI does."""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

TYPE_CHECKING = False  # not typing at import, as memfs.serve.wire (the lean entry point uses this)
if TYPE_CHECKING:
    from memfs.serve.wire import Client, Invocation

# When the mount or daemon answering `memfs index` stops before the backlog is done (an unmount):
# the command goes on in its own process.
STOPPED = "the mount or daemon that was embedding them stopped before it was done: this command embeds the rest itself"
# Ctrl-C of `memfs index`: each batch's vectors are stored as they come.
ABORTED = ("Aborted! Nothing is lost: what is embedded stays; the rest waits for a mount or the next "
           "`memfs index`")
PLAIN_EVERY_S = 10.0  # how often `memfs index` says how far it got when stderr is not a terminal
MIN_TOTAL = 20  # fewer passages than this are done before a line would help


class PlainProgress:
    def __init__(self, label: str, rate: bool, write: Callable[[str], None]) -> None:
        self.label = label
        self.rate = rate
        self.write = write
        self.began = self.said = time.monotonic()

    def speed(self, done: int, total: int) -> str:
        elapsed = time.monotonic() - self.began
        if not done or elapsed <= 0:
            return ""
        from memfs.render.status import duration  # how status says a time left

        per_s = done / elapsed
        return f"{per_s:.1f}/s, {duration((total - done) / per_s)} left"

    def __call__(self, done: int, total: int) -> None:
        if self.rate and total >= MIN_TOTAL and time.monotonic() - self.said >= PLAIN_EVERY_S:
            self.said = time.monotonic()
            self.write(f"{self.label}: {done} of {total} passages, {self.speed(done, total)}")


def to_stderr(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def already_embedding(client: Client) -> str:
    """Before `memfs index` asks the daemon that runs now: when passages wait, the line that
    says which mount or daemon of the index is embedding them already (the command waits with it
    for all of them, and its answer comes at the end); "" otherwise, or when no daemon runs."""
    from memfs.serve.listing import names

    answer = client.run("status", {"json": True})
    if answer is None or answer.error is not None:
        return ""
    info = json.loads(answer.stdout)
    waiting = int(info.get("pending") or 0) + int(info.get("pending_estimated") or 0)
    processes = info.get("processes") or []
    if not waiting or not processes:
        return ""
    one = len(processes) == 1
    return (f"{names(processes)} {'is' if one else 'are'} already embedding the {waiting} "
            f"passages waiting: this waits until they are done (stopping it leaves them to {'it' if one else 'them'}; "
            "`memfs status` shows how far it got)")


@contextmanager
def daemon_progress(invocation: Invocation, update: Callable[[int, int], None]) -> Iterator[None]:
    """While a daemon answers `memfs index`, feed ``update`` from its status every second."""
    from memfs.serve.wire import Client

    stop = threading.Event()

    def watch() -> None:
        base: int | None = None
        while not stop.wait(1.0):
            client = Client(invocation)
            try:
                answer = client.run("status", {"json": True})
            finally:
                client.close()
            if answer is None or answer.error is not None:
                continue
            info = json.loads(answer.stdout)
            # What waits includes the passages big writes still being chunked will make (an
            # estimate): done is what got its vector since the command began, so it does not
            # fall back when their exact chunks arrive (it did, measured as the first count
            # waiting less the count waiting now).
            waiting = int(info.get("pending", 0)) + int(info.get("pending_estimated") or 0)
            embedded = max(0, int(info.get("passages") or 0) - waiting)
            base = embedded if base is None else min(base, embedded)
            update(embedded - base, embedded - base + waiting)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield
    finally:
        stop.set()
        watcher.join()
