"""Connections to PostgreSQL with errors a person can act on: a wrong DSN, an unreachable server,
a refused password, a server too old or without pgvector 0.8 each give one line (:class:`PgError`),
never a driver traceback.  Every connection is bounded in time (``index.timeout_s``): connecting,
and waiting on a server that stopped answering mid-statement (TCP keepalives and
``tcp_user_timeout``), so a read never hangs on a server that is gone."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import psycopg

MIN_SERVER = 150000  # PostgreSQL 15: MERGE, security_invoker views, PUBLIC without CREATE on public
MIN_VECTOR = (0, 8)  # pgvector 0.8: iterative index scans (hnsw.iterative_scan) for filtered KNN
CONNECT_TIMEOUT = 5.0  # seconds (index.timeout_s's default), unless the DSN says otherwise


class PgError(RuntimeError):
    """A problem with the server or the DSN, said in one line."""


class PgUnreachable(PgError):
    """The server could not be reached (refused, timed out, a host that does not resolve or
    answer), or it is starting up or shutting down: nothing it said refuses this login, and it may
    answer later.  Any other PgError is the server's answer (a password, a database, a schema)."""


# What a server says while it cannot take connections for now: not a refusal of this login.
_TRANSIENT = ("the database system is starting up", "the database system is shutting down",
              "the database system is in recovery mode", "the database system is not yet accepting connections",
              "the database system is not accepting connections", "too many clients already",
              "remaining connection slots are reserved")


def _driver() -> object:
    try:
        import psycopg
    except ImportError:
        raise PgError("the PostgreSQL driver is not installed: pip install 'memfs[postgres]'") from None
    return psycopg


def redacted(dsn: str) -> str:
    """The DSN without its password, to print."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    try:
        parts = conninfo_to_dict(dsn)
    except Exception:
        return "(unparsable DSN)"
    parts.pop("password", None)
    return make_conninfo(**{k: v for k, v in parts.items() if v is not None})


def _unquoted(message: str) -> str:
    """libpq's parse errors quote the text they stumbled on, which may be a password ("unexpected
    spaces found in "sec ret""): keep only quoted option names."""
    return re.sub(r'"([^"]*)"', lambda m: m.group(0) if re.fullmatch(r"[a-z_]+", m.group(1)) else '"..."', message)


def _bounded(options: dict[str, object], timeout: float) -> dict[str, object]:
    """libpq options that give up on a server after about ``timeout`` seconds, those the DSN does
    not set itself: connecting (libpq's connect_timeout, whole seconds, at least 2), and a sent
    statement whose bytes the server's host stops acknowledging (tcp_user_timeout) or an idle
    connection whose peer vanished (keepalives).  A server that stops (pg_ctl stop, a restart)
    closes its connections and is refused at once: no wait at all."""
    seconds = max(2, round(timeout))
    wanted: dict[str, object] = {
        "connect_timeout": seconds,
        "tcp_user_timeout": int(timeout * 1000),
        "keepalives": 1,
        "keepalives_idle": seconds,
        "keepalives_interval": 1,
        "keepalives_count": 3,
    }
    return {k: v for k, v in wanted.items() if k not in options}


def connect(dsn: str, autocommit: bool = True, timeout: float = CONNECT_TIMEOUT) -> psycopg.Connection:
    """A connection, or PgError saying in one line why there is none."""
    psycopg = _driver()
    from psycopg.conninfo import conninfo_to_dict

    try:
        options = conninfo_to_dict(dsn)
    except psycopg.ProgrammingError as exc:  # type: ignore[attr-defined]
        raise PgError(f"not a valid DSN: {_unquoted(_first_line(exc))}") from None
    extra = _bounded(options, timeout)
    try:
        # prepare_threshold=None: psycopg's automatic prepared statements cache generic plans,
        # which cannot prune a tenant's partitions by the value of the moment.
        return psycopg.connect(dsn, autocommit=autocommit, prepare_threshold=None, **extra)  # type: ignore[attr-defined]
    except psycopg.OperationalError as exc:  # type: ignore[attr-defined]
        said = f"cannot connect to {redacted(dsn)}: {_first_line(exc)}"
        raise (PgUnreachable if _unreachable(exc) else PgError)(said) from None
    except psycopg.Error as exc:  # type: ignore[attr-defined]
        raise PgError(f"cannot connect to {redacted(dsn)}: {_first_line(exc)}") from None


def _unreachable(exc: BaseException) -> bool:
    """Whether a failed connect never got an answer from the server: libpq says what the server
    answered after "FATAL:" (psycopg gives no SQLSTATE for a failed connect)."""
    text = str(exc)
    return "FATAL:" not in text or any(words in text for words in _TRANSIENT)


def _first_line(exc: BaseException) -> str:
    """libpq's message without its "connection to server at ... failed:" preamble and hints."""
    text = str(exc).strip()
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    # "connection failed: connection to server at "127.0.0.1", port 1 failed: Connection refused"
    first = lines[0].rsplit("failed: ", 1)[-1]
    return first.replace("FATAL:  ", "").strip()


def _version_tuple(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def check_server(conn: psycopg.Connection, create_vector: bool) -> str:
    """See :func:`_check_server`; a query the server refuses is a PgError too."""
    import psycopg as pg

    try:
        return _check_server(conn, create_vector)
    except pg.Error as exc:
        raise PgError(f"cannot check the server's pgvector: {_first_line(exc)}") from None


def _check_server(conn: psycopg.Connection, create_vector: bool) -> str:
    """Refuse a server older than PostgreSQL 15 or one whose pgvector is missing or older than
    0.8; with ``create_vector`` install the extension if it is available but not installed.
    Returns the installed pgvector version."""
    if conn.info.server_version < MIN_SERVER:
        raise PgError(f"PostgreSQL {conn.info.server_version // 10000} is too old: memfs needs PostgreSQL 15 or later")
    want = ".".join(map(str, MIN_VECTOR))
    row = conn.execute("SELECT default_version, installed_version FROM pg_available_extensions "
                       "WHERE name = 'vector'").fetchone()
    if row is None:
        raise PgError("the server has no pgvector (extension 'vector' is not available): install pgvector "
                      f">= {want} on the server")
    default, installed = row
    if installed is None:
        if _version_tuple(default) < MIN_VECTOR:
            raise PgError(f"the server's pgvector is {default}, older than {want}: install pgvector >= {want}")
        if not create_vector:
            raise PgError("extension 'vector' is not installed in this database: run `memfs pg init` first")
        try:
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        except Exception as exc:
            raise PgError(f"cannot create extension 'vector': {_first_line(exc)} (pgvector is not a trusted "
                          "extension: a superuser runs CREATE EXTENSION vector in this database once)") from None
        installed = conn.execute("SELECT extversion FROM pg_extension WHERE extname = 'vector'").fetchone()[0]
    if _version_tuple(installed) < MIN_VECTOR:
        newer = "" if _version_tuple(default) < MIN_VECTOR else " (run ALTER EXTENSION vector UPDATE)"
        raise PgError(f"pgvector {installed} is installed in this database, older than {want}: update it{newer}")
    return str(installed)
