"""An index whose server cannot be reached (:class:`memfs.index.storage.interface.IndexOffline`): what was
owed to it meanwhile, and the catch-up once it answers again.

The files are the truth: a write whose indexing failed for want of the server still succeeded.
Its path is noted here (for status and search warnings) and a worker thread asks the server again
every :data:`RETRY_S`; once it answers, the whole index is reconciled with the files, which
catches every change made meanwhile (a removal or a rename too, whether or not it was noted), and
then what that left without a vector is embedded.  If the process ends first, the next start's
reconcile does the same: nothing owed is kept only in memory.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from memfs.index.storage.interface import IndexOffline

log = logging.getLogger(__name__)

RETRY_S = 1.0  # how often the server is asked again while it is away
STOP_WAIT_S = 30.0  # how long closing waits for a catch-up in progress


class Outage:
    """Whether the index is unavailable now, and the thread that catches up when it is back.
    ``probe`` raises IndexOffline while the server is away; ``catch_up`` reconciles with the files;
    ``after`` runs once caught up (embedding what the catch-up left pending)."""

    def __init__(self, probe: Callable[[], object], catch_up: Callable[[], object],
                 after: Callable[[], object] = lambda: None) -> None:
        self._probe = probe
        self._catch_up = catch_up
        self._after = after
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._marks = 0  # how many times it was found away (a mark during a catch-up: catch up again)
        self.reason = ""  # why it is away ("" when it is not)
        self.since: float | None = None  # when it was first found away (time.time())
        self.owed: set[str] = set()  # paths changed while it was away
        self.catching_up = False  # the server answers again; the files are being reconciled

    @property
    def active(self) -> bool:
        """Whether the index is away, or back and not caught up yet."""
        return self.since is not None

    def down(self, exc: IndexOffline, path: str | None = None) -> None:
        """The server was found away by a read, or by the indexing of ``path``."""
        with self._lock:
            first = self.since is None
            self._marks += 1
            self.reason = str(exc)
            if first:
                self.since = time.time()
            if path is not None:
                self.owed.add(path)
            if self._stop.is_set() or (self._worker is not None and self._worker.is_alive()):
                start = False
            else:
                self._worker = threading.Thread(target=self._run, name="memfs-index-catch-up", daemon=True)
                start = True
        if first:
            log.warning("%s: writes are kept and their indexing is owed; reads say the index is unavailable "
                        "until it answers again, then the index catches up with the files", exc)
        if path is not None:
            log.info("%s: written; indexed when the index server answers again", path)
        if start:
            assert self._worker is not None
            self._worker.start()

    def _run(self) -> None:
        while not self._stop.wait(RETRY_S):
            with self._lock:
                marks = self._marks
            began = time.monotonic()
            try:
                self._probe()
                self.catching_up = True
                self._catch_up()
            except IndexOffline as exc:
                with self._lock:
                    self.reason = str(exc)
                continue
            except Exception:  # a bug must not end the retries: the next round tries again
                log.exception("catching up with the files after the index server came back failed; trying again")
                continue
            finally:
                self.catching_up = False
            with self._lock:
                if self._marks != marks:
                    continue  # found away again during the catch-up: it may have missed a change
                owed, since = len(self.owed), self.since
                self.reason, self.since, self.owed = "", None, set()
                self._worker = None  # found away again from now on: a new worker
            log.info("the index server answers again after %.1f s: the index caught up with the files "
                     "(%d changed meanwhile) in %.2f s", time.time() - (since or time.time()), owed,
                     time.monotonic() - began)
            try:
                self._after()
            except Exception as exc:
                log.warning("embedding after the catch-up postponed: %s", exc)
            return

    def stop(self) -> None:
        """No further catch-up (the process is closing); waits a while for one in progress.  What
        is owed is caught up by the next start's reconcile."""
        self._stop.set()
        worker = self._worker
        if worker is not None and worker is not threading.current_thread():
            worker.join(STOP_WAIT_S)
