#!/usr/bin/env python3
"""Many small memory files through a real mount (issue #45): 1,000 Markdown daily notes of 1-10 KB
copied in with ``cp -r``, against the same copy to a native folder in the same run, quiet and
under load; whether each file is keyword-searchable when its close() returns; and where a file's
time goes.

    python scripts/bench_smallfiles.py [--files 1000] [--runs 3] [--loads 0,2]
                                       [--variant KEY=VALUE[,KEY=VALUE]] [--profile] [--py-spy PATH]

- Notes: ``memory/YYYY-MM-DD.md``, one a day, 1-10 KB each (uniform), a day's headings, meetings,
  tasks and paragraphs of real LoCoMo dialogue (../shared/bench/locomo-dev); each holds one word
  no other file does (``PRJnnnnx``), for the search check.
- Copies: every run mounts a fresh workspace (``memfs mount``, default settings: the local
  model embeds in the background, history on, watcher on), writes one note and waits until it
  is embedded (the model is loaded, as in a mount that has been up a while), then times
  ``cp -r notes/. MNT/memory/`` and, after it, how long until every file is chunked exactly
  ("chunked s": a burst's files get their keyword rows at close, the rest once the closes pause,
  see memfs.bursts; with ``--until-embedded``, also until every passage has its vector); the plain
  copy is ``cp -r`` of the same folder to a native
  folder beside it, in the same run.  Also the daemon's CPU seconds during the copy.
  ``--variant`` adds mounts with other settings (``embedding.provider=none``,
  ``history.enabled=false``, ``mount.watch=false``...): what each part costs, by taking it away.
- Searchable at close: a Python loop copies the notes one by one (open, write, close) into a
  fresh mount and, right after every --check-every'th close, searches the file's own word from
  another connection to the index (a second Memory, as another process reads it), without
  waiting for vectors; each close()'s latency is recorded.
- ``--profile``: the copy again through a mount whose daemon is this script (``--daemon``), which
  wraps the FUSE handlers and the steps of a close in timers (nothing in memfs is changed) and
  writes what each took when it is unmounted: FUSE requests per file by kind and the time in
  each, the close's work (history version, indexing and its parts, commits), the watcher, the
  background embedder.  ``--py-spy PATH``: also ``py-spy record`` of the daemon during the copy
  (--idle, all threads), summarised by function.
"""

from __future__ import annotations

import argparse
import atexit
import collections
import datetime as dt
import functools
import inspect
import json
import multiprocessing
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parent
DEV = SCRIPTS.parent.parent / "shared" / "bench" / "locomo-dev"
OWN = SCRIPTS.parent / "tests" / "data"
MEMFS = [sys.executable, "-m", "memfs"]


# -- the notes -------------------------------------------------------------------------------------

def dialogue(dev: Path) -> list[str]:
    """Real sentences: the LoCoMo dev set's turns (or the day the tests ship)."""
    turns: list[str] = []
    for path in sorted(dev.glob("conv-*/memory/*.md")) or sorted(OWN.glob("locomo-*.md")):
        turns += [line.strip() for line in path.read_text().splitlines()
                  if line.strip() and not line.startswith("#")]
    if not turns:
        raise SystemExit(f"no LoCoMo text under {dev}")
    return turns


PEOPLE = ["Mara", "Jonas", "Priya", "Tomasz", "Aiko", "Lena", "Omar", "Sofia"]
TOPICS = ["release planning", "backup restore drill", "club newsletter", "photo archive import", "budget review",
          "onboarding", "API rate limits", "garden plan", "trip to Lisbon", "flaky CI job"]


def note(i: int, day: dt.date, size: int, turns: list[str], rng: random.Random) -> str:
    """A day's note of about ``size`` bytes: headings, meetings, tasks, paragraphs."""
    parts = [f"# {day.isoformat()}\n", f"Ref PRJ{i:04d}x: {rng.choice(TOPICS)}.\n"]
    t = rng.randrange(len(turns))
    section = 0
    while sum(len(p.encode()) for p in parts) < size:
        kind = section % 4
        section += 1
        if kind == 0:
            parts.append(f"\n## {rng.randint(8, 18):02d}:{rng.choice(['00', '15', '30', '45'])} - "
                         f"{rng.choice(TOPICS).capitalize()} with {rng.choice(PEOPLE)}\n")
            for _ in range(rng.randint(2, 5)):
                parts.append(f"- {turns[t % len(turns)]}\n")
                t += 1
        elif kind == 1:
            parts.append("\n## Notes\n")
            parts.append(" ".join(turns[(t + k) % len(turns)] for k in range(rng.randint(3, 7))) + "\n")
            t += 7
        elif kind == 2:
            parts.append("\n## Tasks\n")
            for _ in range(rng.randint(2, 4)):
                done = "x" if rng.random() < 0.5 else " "
                parts.append(f"- [{done}] {turns[t % len(turns)][:90]}\n")
                t += 1
        else:
            parts.append(f"\n> {turns[t % len(turns)]}\n")
            t += 1
    text = "".join(parts)
    data = text.encode()[:size]
    return data.decode(errors="ignore").rstrip() + "\n"


def make_notes(folder: Path, files: int, dev: Path, seed: int = 45) -> list[tuple[str, str]]:
    """``files`` notes in ``folder``: (file name, its own word)."""
    rng = random.Random(seed)
    turns = dialogue(dev)
    folder.mkdir(parents=True, exist_ok=True)
    first = dt.date(2022, 1, 1)
    out = []
    for i in range(files):
        day = first + dt.timedelta(days=i)
        name = f"{day.isoformat()}.md"
        (folder / name).write_text(note(i, day, rng.randint(1024, 10 * 1024), turns, rng))
        out.append((name, f"PRJ{i:04d}x"))
    return out


# -- mounts ----------------------------------------------------------------------------------------

class Mount:
    """A fresh workspace mounted (``memfs mount``, or this script as the daemon with --daemon)."""

    def __init__(self, root: Path, name: str, env: dict[str, str], settings: list[str], profile: Path | None = None):
        self.ws, self.mnt, self.env = root / f"ws-{name}", root / f"mnt-{name}", env
        (self.ws / "memory").mkdir(parents=True)
        self.mnt.mkdir()
        self.profile = profile
        sets = [a for s in settings for a in ("--set", s)]
        if profile is None:
            out = subprocess.run([*MEMFS, "mount", str(self.ws), str(self.mnt), *sets], env=env,
                                 capture_output=True, text=True)
            if out.returncode != 0:
                raise SystemExit(out.stderr)
            self.process = None
        else:
            log = open(root / f"daemon-{name}.log", "w")
            self.process = subprocess.Popen(
                [sys.executable, str(Path(__file__).resolve()), "--daemon", str(profile), "mount", str(self.ws),
                 str(self.mnt), "--foreground", *sets, "--set", f"state_dir={env['MEMFS_STATE_DIR']}"],
                env=env, stdout=log, stderr=subprocess.STDOUT)
            deadline = time.monotonic() + 60
            while not os.path.ismount(self.mnt):
                if self.process.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"the profiled daemon did not mount: see {log.name}")
                time.sleep(0.05)
        self.pid = self._pid()

    def _pid(self) -> int:
        if self.process is not None:
            return self.process.pid
        for record in (Path(self.env["MEMFS_STATE_DIR"]) / "mounts").glob("*.json"):
            info = json.loads(record.read_text())
            if info["mountpoint"] == str(self.mnt):
                return int(info["pid"])
        raise RuntimeError("no mount record")

    def cpu(self) -> float:
        fields = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def status(self) -> dict[str, str]:
        text = (self.mnt / ".memfs" / "status").read_text()
        return {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in text.splitlines()) if v}

    def pending(self) -> int:
        return int(self.status().get("pending", "0").split()[0])

    def settled(self, timeout: float = 1800) -> float:
        """Seconds until no file is left with keyword rows only (a burst's files chunked exactly),
        asked of the index through a connection of this script's own (``.memfs/status`` counts
        the whole index: asked every 50 ms, it took the daemon's time)."""
        sys.path.insert(0, str(SCRIPTS.parent))
        from memfs.config import load_config
        from memfs.memory import Memory

        began = time.perf_counter()
        memory = Memory(load_config(workspace=self.ws, agent="main", env={},
                                    overrides=[("state_dir", self.env["MEMFS_STATE_DIR"])]))
        try:
            while memory.provisional_paths() and time.perf_counter() - began < timeout:
                time.sleep(0.05)
            chunked = time.perf_counter() - began
            if EMBEDDED:  # --until-embedded: and until every passage has its vector
                while (memory.provisional_paths() or memory.has_pending) and time.perf_counter() - began < timeout:
                    time.sleep(0.5)
                self.embedded_s = time.perf_counter() - began
        finally:
            memory.close()
        return chunked

    def warm(self, timeout: float = 300) -> None:
        """One note written and embedded: the model is loaded before anything is timed."""
        (self.mnt / "memory" / "2021-12-31.md").write_text("# 2021-12-31\n\nThe model is loaded now.\n")
        deadline = time.monotonic() + timeout
        while self.pending() and time.monotonic() < deadline:
            time.sleep(0.1)

    def close(self) -> None:
        subprocess.run([*MEMFS, "umount", str(self.mnt)], env=self.env, capture_output=True)
        if self.process is not None:
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.process.kill()
        shutil.rmtree(self.ws, ignore_errors=True)


def cp_r(source: Path, target: Path) -> float:
    target.mkdir(parents=True, exist_ok=True)
    began = time.perf_counter()
    subprocess.run(["cp", "-r", f"{source}/.", str(target)], check=True)
    return time.perf_counter() - began


def busy() -> None:
    while True:
        pass


_NAMES = iter(range(1 << 30))  # each mount its own folders, whatever the load level


def copies(root: Path, env: dict[str, str], notes: Path, files: int, runs: int,
           variants: dict[str, list[str]]) -> list[dict]:
    """Round after round, every variant once per round (a machine whose load drifts then weighs
    on all of them alike)."""
    times: dict[str, dict[str, list[float]]] = {name: {"mount": [], "plain": [], "cpu": [], "settled": [],
                                                       "embedded": []} for name in variants}
    for run in range(runs):
        for name, settings in variants.items():
            mount = Mount(root, str(next(_NAMES)), env, settings)
            try:
                mount.warm()
                native = root / f"native-{run}"
                times[name]["plain"].append(cp_r(notes, native))
                before = mount.cpu()
                times[name]["mount"].append(cp_r(notes, mount.mnt / "memory"))
                times[name]["cpu"].append(mount.cpu() - before)
                times[name]["settled"].append(mount.settled())
                if EMBEDDED:
                    times[name]["embedded"].append(mount.embedded_s)
                shutil.rmtree(native)
            finally:
                mount.close()
            print(f"  round {run + 1}, {name}: {times[name]['mount'][-1]:.2f} s through the mount, "
                  f"{times[name]['plain'][-1]:.3f} s plain, every file chunked exactly "
                  f"{times[name]['settled'][-1]:.2f} s after"
                  + (f", every passage embedded {times[name]['embedded'][-1]:.1f} s after" if EMBEDDED else "")
                  + f"; load average {os.getloadavg()[0]:.2f}", flush=True)
    rows = []
    for name, t in times.items():
        m, p, c, settled = (statistics.median(t[k]) for k in ("mount", "plain", "cpu", "settled"))
        rows.append({"variant": name, "mount_s": m, "plain_s": p, "mount_ms_per_file": m / files * 1000,
                     "plain_ms_per_file": p / files * 1000, "daemon_cpu_s": c, "settled_s": settled,
                     "all_mount_s": [round(x, 2) for x in t["mount"]], "loadavg_1m": round(os.getloadavg()[0], 2)})
        print(json.dumps(rows[-1]), flush=True)
    return rows


def searchable(root: Path, env: dict[str, str], notes: Path, names: list[tuple[str, str]], every: int) -> dict:
    """Notes copied one by one; after every ``every``'th close, its own word searched from a
    second connection at once (no wait for vectors)."""
    sys.path.insert(0, str(SCRIPTS.parent))
    from memfs.config import load_config
    from memfs.memory import Memory

    mount = Mount(root, f"searchable-{next(_NAMES)}", env, [])
    closes, found, checked, search_ms = [], 0, 0, []
    try:
        mount.warm()
        memory = Memory(load_config(workspace=mount.ws, agent="main", env={},
                                    overrides=[("state_dir", env["MEMFS_STATE_DIR"])]))
        try:
            for i, (name, word) in enumerate(names):
                data = (notes / name).read_bytes()
                began = time.perf_counter()
                with open(mount.mnt / "memory" / name, "wb") as out:
                    out.write(data)
                closes.append(time.perf_counter() - began)
                if i % every == 0:
                    at = time.perf_counter()
                    hits = memory.search(word, wait_ms=0).results
                    search_ms.append((time.perf_counter() - at) * 1000)
                    checked += 1
                    found += any(r.path == f"memory/{name}" for r in hits)
        finally:
            memory.close()
    finally:
        mount.close()
    closes.sort()
    return {"files": len(names), "loop_s": sum(closes), "close_ms_p50": closes[len(closes) // 2] * 1000,
            "close_ms_p95": closes[int(len(closes) * 0.95)] * 1000, "checked": checked, "found_at_close": found,
            "search_ms_p50": statistics.median(search_ms) if search_ms else 0}


def profiled(root: Path, env: dict[str, str], notes: Path, files: int, py_spy: str | None,
             settings: list[str] | None = None) -> dict:
    out = root / "profile.json"
    mount = Mount(root, f"profiled-{next(_NAMES)}", env, settings or [], profile=out)
    spy = None
    try:
        mount.warm()
        if py_spy:
            # Without --idle: samples of threads on a core (CPU), with: waits too (wall time)
            spy = subprocess.Popen([py_spy, "record", "--pid", str(mount.pid), *(["--idle"] if SPY_IDLE else []),
                                    "--threads", "--format", "raw", "--rate", "250", "--output", str(root / "spy.txt"),
                                    "--nonblocking"],
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            time.sleep(1.0)
        (out.with_suffix(".mark")).write_text(str(time.time()))  # the daemon starts counting now
        time.sleep(0.3)
        began = time.perf_counter()
        copy_s = cp_r(notes, mount.mnt / "memory")
        wall = time.perf_counter() - began
        (out.with_suffix(".mark")).write_text("stop")
        time.sleep(0.3)
        if spy is not None:
            spy.send_signal(2)
            spy.wait(timeout=60)
    finally:
        mount.close()
    stats = json.loads(out.read_text()) if out.exists() else {}
    stats["copy_s"] = copy_s
    stats["wall_s"] = wall
    if py_spy and (root / "spy.txt").exists():
        stats["py_spy"] = summarise_spy(root / "spy.txt")
    return stats


SPY_IDLE = False  # --spy-idle
EMBEDDED = False  # --until-embedded


def summarise_spy(path: Path, top: int = 30) -> dict[str, object]:
    """py-spy's raw (collapsed) stacks: samples per thread; and, of the samples whose stack is
    in a close's work (``Memory.file_changed``), the share each function is on the stack for
    (inclusive) and at the top of (self), so the close's time splits by function."""
    threads: collections.Counter[str] = collections.Counter()
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    everywhere: collections.Counter[str] = collections.Counter()
    leaves: collections.Counter[str] = collections.Counter()
    total = close = 0
    for line in path.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = [f.split(" (")[0] for f in stack.split(";")]
        threads[frames[0].split(")", 1)[-1].strip(": ")] += n
        total += n
        for name in set(frames[1:]):
            everywhere[name] += n
        leaves[frames[-1]] += n
        if "Memory.file_changed" not in frames:
            continue
        close += n
        for name in set(frames[frames.index("Memory.file_changed"):]):
            inclusive[name] += n
        own[frames[-1]] += n
    return {"samples": total, "close_samples": close, "threads": dict(threads.most_common(12)),
            "inclusive": dict(inclusive.most_common(top)), "self": dict(own.most_common(top)),
            "all_inclusive": dict(everywhere.most_common(top)), "all_self": dict(leaves.most_common(top))}


# -- the profiled daemon (run as: bench_smallfiles.py --daemon OUT mount WS MNT --foreground ...) ----

class Timers:
    def __init__(self, mark: Path) -> None:
        self.lock = threading.Lock()
        self.calls: collections.Counter[str] = collections.Counter()
        self.seconds: collections.defaultdict[str, float] = collections.defaultdict(float)
        self.mark = mark
        self.on = False

    def poll(self) -> None:
        """Counting between the benchmark's marks (a file it writes before and after the copy)."""
        while True:
            try:
                self.on = self.mark.read_text() not in ("", "stop")
            except OSError:
                self.on = False
            time.sleep(0.05)

    def add(self, name: str, seconds: float) -> None:
        if self.on:
            with self.lock:
                self.calls[name] += 1
                self.seconds[name] += seconds


def _wrap(owner: type, attr: str, name: str, timers: Timers) -> None:
    original = getattr(owner, attr)
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def timed_async(*args, **kwargs):
            began = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                timers.add(name, time.perf_counter() - began)
        setattr(owner, attr, timed_async)
    else:
        @functools.wraps(original)
        def timed(*args, **kwargs):
            began = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                timers.add(name, time.perf_counter() - began)
        setattr(owner, attr, timed)


def daemon(out: Path, argv: list[str]) -> int:
    """The mount's daemon with timers around its FUSE handlers and a close's steps."""
    import apsw

    from memfs import cli, watch
    from memfs.embedder import BackgroundEmbedder  # noqa: F401
    from memfs.fs import operations, passthrough, writes
    from memfs.history import keeper
    from memfs.history import store as history_store
    from memfs.index import indexer
    from memfs.index.storage.sqlite import store
    from memfs.memory import Memory

    timers = Timers(out.with_suffix(".mark"))
    threading.Thread(target=timers.poll, daemon=True).start()
    fuse = ["lookup", "getattr", "setattr", "create", "open", "write", "flush", "release", "fsync", "mkdir",
            "opendir", "readdir", "releasedir", "getxattr", "listxattr", "setxattr", "statfs", "forget", "read",
            "access", "unlink", "rename"]
    for attr in fuse:
        owner = operations.MemfsOperations
        if hasattr(owner, attr):
            _wrap(owner, attr, f"fuse.{attr}", timers)
    steps = [
        (passthrough.Passthrough, "_index_if_dirty", "close: _index_if_dirty (awaited at flush)"),
        (writes.MemoryWrites, "changed", "close: MemoryWrites.changed"),
        (writes.MemoryWrites, "before_change", "open: MemoryWrites.before_change"),
        (writes.MemoryWrites, "note_own", "close: note_own (stat for the watcher)"),
        (Memory, "file_changed", "thread: Memory.file_changed"),
        (Memory, "before_change", "thread: Memory.before_change"),
        (keeper.History, "changed", "  history: History.changed"),
        (keeper.History, "unseen", "  history: History.unseen"),
        (keeper.History, "_snapshot", "    history: _snapshot (read the file)"),
        (history_store.HistoryStore, "add", "    history: HistoryStore.add (rows; commit after)"),
        (indexer.Indexer, "index_file", "  index: Indexer.index_file"),
        (indexer.Indexer, "_read", "    index: read + hash"),
        (indexer.Indexer, "chunk_text", "    index: chunk_text (tokenise, units)"),
        (store.Store, "file", "    index: Store.file (previous record)"),
        (store.Store, "cached_vectors", "    index: Store.cached_vectors"),
        (store.Store, "replace_file", "    index: Store.replace_file (one transaction)"),
        (Memory, "embed_pending", "background: Memory.embed_pending"),
        (store.Store, "store_embedded", "background: Store.store_embedded"),
        (watch, "_reindex", "watcher: _reindex (not own)"),
        (writes.MemoryWrites, "is_own", "watcher: is_own"),
    ]
    for owner, attr, name in steps:
        if hasattr(owner, attr):
            _wrap(owner, attr, name, timers)
    # Commits of the index and of the history: apsw's execute of COMMIT, timed by the statement.
    original_execute = apsw.Connection.execute

    class Conn(apsw.Connection):
        def execute(self, statements, bindings=None, **kw):  # type: ignore[override]
            if isinstance(statements, str) and statements.strip().upper() in ("COMMIT", "BEGIN IMMEDIATE", "BEGIN"):
                began = time.perf_counter()
                try:
                    return original_execute(self, statements, bindings, **kw)
                finally:
                    where = os.path.basename(self.filename)
                    timers.add(f"sql: {statements.strip().upper()} on {where.split('.')[-2] if '.' in where else where}",
                               time.perf_counter() - began)
            return original_execute(self, statements, bindings, **kw)

    apsw.Connection = Conn  # the modules call apsw.Connection(...) at open
    watch_batches = collections.Counter()
    original_awatch = watch.watchfiles.awatch

    async def counted_awatch(*args, **kwargs):
        async for changes in original_awatch(*args, **kwargs):
            if timers.on:
                watch_batches["batches"] += 1
                watch_batches["paths"] += len(changes)
            yield changes

    watch.watchfiles.awatch = counted_awatch

    def dump() -> None:
        out.write_text(json.dumps({"calls": dict(timers.calls), "seconds": dict(timers.seconds),
                                   "watch": dict(watch_batches)}, indent=1))

    atexit.register(dump)
    try:
        cli.main(argv, standalone_mode=False)
    finally:
        dump()
    return 0


# -- report ----------------------------------------------------------------------------------------

def print_profile(stats: dict, files: int) -> None:
    print(f"\nprofiled copy: {files} files in {stats['copy_s']:.2f} s ({stats['copy_s'] / files * 1000:.2f} ms a file)")
    print(f"{'where':<62} {'calls/file':>10} {'ms/file':>9} {'ms/call':>9}")
    for name in sorted(stats.get("seconds", {}), key=lambda n: -stats["seconds"][n]):
        calls, seconds = stats["calls"][name], stats["seconds"][name]
        print(f"{name:<62} {calls / files:>10.2f} {seconds / files * 1000:>9.3f} {seconds / calls * 1000:>9.3f}")
    if stats.get("watch"):
        print(f"watcher: {stats['watch']}")
    seconds = stats.get("seconds", {})
    hop = seconds.get("close: MemoryWrites.changed", 0) - seconds.get("thread: Memory.file_changed", 0) \
        - seconds.get("close: note_own (stat for the watcher)", 0)
    print(f"{'derived: to_thread hop (dispatch, wake, GIL) = changed - file_changed - note_own':<82} "
          f"{hop / files * 1000:>9.3f} ms/file")
    spy = stats.get("py_spy")
    if spy:
        print(f"\npy-spy ({'wall: waits included' if SPY_IDLE else 'CPU: threads on a core'}): {spy['samples']} "
              f"samples; by thread: {spy['threads']}")
        print("of all samples: inclusive, self")
        for (name, n), (leaf, m) in zip(spy["all_inclusive"].items(), spy["all_self"].items()):
            print(f"  {n / spy['samples'] * 100:5.1f}%  {name:<52} {m / spy['samples'] * 100:5.1f}%  {leaf}")
    if spy and spy["close_samples"]:
        print(f"of the {spy['close_samples']} samples in a close's work (Memory.file_changed): inclusive, self")
        for (name, n), (leaf, m) in zip(spy["inclusive"].items(), spy["self"].items()):
            print(f"  {n / spy['close_samples'] * 100:5.1f}%  {name:<52} {m / spy['close_samples'] * 100:5.1f}%  {leaf}")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--daemon":
        return daemon(Path(sys.argv[2]), sys.argv[3:])
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--loads", default="0,2", help="busy loops beside, comma-separated levels")
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]")
    parser.add_argument("--check-every", type=int, default=10)
    parser.add_argument("--no-copies", action="store_true")
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--py-spy", help="path of a py-spy binary (with --profile)")
    parser.add_argument("--spy-idle", action="store_true", help="py-spy samples waiting threads too")
    parser.add_argument("--profile-set", action="append", default=[], metavar="KEY=VALUE",
                        help="settings of the profiled mount")
    parser.add_argument("--until-embedded", action="store_true",
                        help="after each copy, also time until every passage has its vector (minutes)")
    parser.add_argument("--dev", type=Path, default=DEV)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    global SPY_IDLE, EMBEDDED
    SPY_IDLE, EMBEDDED = args.spy_idle, args.until_embedded

    root = Path(tempfile.mkdtemp(prefix="memfs-small-"))
    runtime = root / "run"
    runtime.mkdir(mode=0o700)
    os.environ["XDG_RUNTIME_DIR"] = str(runtime)  # the run's own embedding service, stopped at the end
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("MEMFS_")},
           "MEMFS_STATE_DIR": str(root / "state"), "MEMFS_DAEMON_ON_DEMAND": "false"}
    notes = root / "notes"
    names = make_notes(notes, args.files, args.dev)
    text = sum(p.stat().st_size for p in notes.iterdir())
    print(f"{args.files} notes, {text / 1e6:.2f} MB ({text / args.files / 1024:.1f} KiB a note on average)", flush=True)
    variants = {"default": []}
    for v in args.variant:
        variants[v] = v.split(",")
    results: dict[str, object] = {"files": args.files, "bytes": text}
    try:
        for load in [int(x) for x in args.loads.split(",")]:
            loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(load)]
            for loop in loops:
                loop.start()
            try:
                if not args.no_copies:
                    results[f"copies, load {load}"] = copies(root, env, notes, args.files, args.runs, variants)
                if not args.no_check and load == 0:
                    results["searchable"] = searchable(root, env, notes, names, args.check_every)
                    print(json.dumps(results["searchable"]), flush=True)
                if args.profile and load == 0:
                    results["profile"] = profiled(root, env, notes, args.files, args.py_spy, args.profile_set)
            finally:
                for loop in loops:
                    loop.terminate()
    finally:
        sys.path.insert(0, str(SCRIPTS))
        try:
            import bench_index

            bench_index._stop_service()
        except Exception:  # no service was started (embedding off), or it has gone
            pass
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
        shutil.rmtree(root, ignore_errors=True)

    print(f"\n{args.files} notes of 1-10 KB ({text / 1e6:.2f} MB), cp -r, medians of {args.runs} runs, {os.cpu_count()} cores")
    print(f"{'load':>4} {'variant':<44} {'mount s':>8} {'ms/file':>8} {'plain s':>8} {'ms/file':>8} {'x plain':>8} "
          f"{'daemon cpu s':>12} {'chunked s':>9} {'load avg':>8}")
    for key, rows in results.items():
        if not key.startswith("copies"):
            continue
        for r in rows:  # type: ignore[union-attr]
            print(f"{key.split()[-1]:>4} {r['variant']:<44} {r['mount_s']:>8.2f} {r['mount_ms_per_file']:>8.2f} "
                  f"{r['plain_s']:>8.3f} {r['plain_ms_per_file']:>8.3f} {r['mount_s'] / r['plain_s']:>8.0f} "
                  f"{r['daemon_cpu_s']:>12.2f} {r['settled_s']:>9.2f} {r['loadavg_1m']:>8.2f}")
    if "searchable" in results:
        s = results["searchable"]
        print(f"\none by one (open, write, close): {s['loop_s']:.2f} s for {s['files']} files; close() p50 "
              f"{s['close_ms_p50']:.2f} ms, p95 {s['close_ms_p95']:.2f} ms; found by keyword right after close: "
              f"{s['found_at_close']}/{s['checked']} (search p50 {s['search_ms_p50']:.1f} ms)")
    if "profile" in results:
        print_profile(results["profile"], args.files)  # type: ignore[arg-type]
    return 0


if __name__ == "__main__":
    sys.exit(main())
