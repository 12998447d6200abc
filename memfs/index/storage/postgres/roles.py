"""Tenants and their login roles (``memfs pg grant``).

One (workspace id, agent) is one tenant with up to two LOGIN roles: its own (everything of its
tenant, private rows too) and, on request, a shared-mode role (its public rows only: the role a
shared-mode mount uses, which must never see MEMORY.md or ``privacy.private_paths``).  Another
tenant's memory becomes readable only by an explicit reader grant (public rows, no writes).  Who
sees what is the table ``memfs.access``, read by the policies of every tenant table.

Passwords are made here and sent to the server as SCRAM-SHA-256 verifiers, so the password
itself never reaches the server (nor its statement log); rotating one replaces the verifier, and
the old password stops working for new connections at once.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memfs.index.storage.postgres.connect import PgError, check_server, connect
from memfs.index.storage.postgres.schema import LATEST, LOCK_KEY, add_partitions, names, version

if TYPE_CHECKING:
    import psycopg

SCRAM_ITERATIONS = 4096  # PostgreSQL's default (scram_iterations)


@dataclass(frozen=True)
class Login:
    tenant_id: int
    role: str
    dsn: str  # the admin DSN with this role's user and password
    created: bool  # False: the role was there and its password was rotated


def scram_verifier(password: str, iterations: int = SCRAM_ITERATIONS) -> str:
    """What PostgreSQL stores for a SCRAM-SHA-256 password (RFC 5802/7677)."""
    salt = secrets.token_bytes(16)
    salted = hashlib.pbkdf2_hmac("sha256", password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", "sha256").digest()
    stored_key = hashlib.sha256(client_key).digest()
    server_key = hmac.new(salted, b"Server Key", "sha256").digest()
    b64 = base64.b64encode
    return f"SCRAM-SHA-256${iterations}:{b64(salt).decode()}${b64(stored_key).decode()}:{b64(server_key).decode()}"


def _ready(conn: psycopg.Connection) -> None:
    check_server(conn, create_vector=False)
    found = version(conn)
    if found == 0:
        raise PgError("this database has no memfs schema: run `memfs pg init DSN` first")
    if found < LATEST:
        raise PgError(f"the memfs schema is version {found}, this memfs needs {LATEST}: run `memfs pg init DSN`")


def tenant(conn: psycopg.Connection, workspace: uuid.UUID, agent: str, create: bool) -> int | None:
    """The tenant id of (workspace, agent), made (with its partitions) when ``create``."""
    row = conn.execute("SELECT tenant_id FROM memfs.tenants WHERE workspace_id = %s AND agent = %s",
                       (workspace, agent)).fetchone()
    if row is not None or not create:
        return None if row is None else int(row[0])
    tenant_id = int(conn.execute("INSERT INTO memfs.tenants(workspace_id, agent) VALUES (%s, %s) RETURNING tenant_id",
                                 (workspace, agent)).fetchone()[0])
    add_partitions(conn, tenant_id)
    return tenant_id


def _role_exists(conn: psycopg.Connection, role: str) -> bool:
    return conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone() is not None


def _dsn_for(admin_dsn: str, role: str, password: str) -> str:
    from psycopg.conninfo import make_conninfo

    return make_conninfo(admin_dsn, user=role, password=password)


def grant_login(dsn: str, workspace: uuid.UUID, agent: str, shared: bool = False) -> Login:
    """Create the login role of (workspace, agent) (its shared-mode role with ``shared``), or
    rotate its password; returns the DSN it connects with."""
    from psycopg import sql

    if not agent:
        raise PgError("an agent name is needed (--agent)")
    password = secrets.token_urlsafe(32)
    with connect(dsn) as conn:
        _ready(conn)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            these = names(conn)
            tenant_id = tenant(conn, workspace, agent, create=True)
            assert tenant_id is not None
            role = these.login_role(tenant_id, shared)
            verifier = sql.Literal(scram_verifier(password))
            created = not _role_exists(conn, role)
            if created:
                conn.execute(sql.SQL("CREATE ROLE {} LOGIN INHERIT NOSUPERUSER NOCREATEDB NOCREATEROLE "
                                     "NOREPLICATION NOBYPASSRLS PASSWORD {}").format(sql.Identifier(role), verifier))
                conn.execute(sql.SQL("GRANT {} TO {}").format(sql.Identifier(these.tenant_group),
                                                              sql.Identifier(role)))
            else:
                conn.execute(sql.SQL("ALTER ROLE {} PASSWORD {}").format(sql.Identifier(role), verifier))
            conn.execute("INSERT INTO memfs.access(role, tenant_id, private, writes) VALUES (%s, %s, %s, true) "
                         "ON CONFLICT (role, tenant_id) DO UPDATE SET private = excluded.private, writes = true",
                         (role, tenant_id, not shared))
    return Login(tenant_id, role, _dsn_for(dsn, role, password), created)


def grant_reader(dsn: str, workspace: uuid.UUID, agent: str, reader_workspace: uuid.UUID, reader: str,
                 revoke: bool = False) -> tuple[int, list[str]]:
    """Let the roles of (reader_workspace, reader) read the public rows of (workspace, agent), or
    stop letting them (``revoke``).  Returns the owner's tenant id and the roles changed: none when
    the grant was already there (or, revoking, was never made)."""
    with connect(dsn) as conn:
        _ready(conn)
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (LOCK_KEY,))
            these = names(conn)
            owner = tenant(conn, workspace, agent, create=False)
            if owner is None:
                raise PgError(f"agent {agent!r} of workspace {workspace} has no tenant yet: grant it a login first")
            other = tenant(conn, reader_workspace, reader, create=False)
            if other is None:
                raise PgError(f"reader {reader!r} of workspace {reader_workspace} has no login yet: "
                              f"run `memfs pg grant --agent {reader}` first")
            if other == owner:
                raise PgError("an agent always reads its own memory: name another agent with --reader")
            roles = [r for r in (these.login_role(other), these.login_role(other, shared=True))
                     if _role_exists(conn, r)]
            changed = []
            for role in roles:
                if revoke:
                    done = conn.execute("DELETE FROM memfs.access WHERE role = %s AND tenant_id = %s",
                                        (role, owner))
                else:
                    done = conn.execute("INSERT INTO memfs.access(role, tenant_id, private, writes) "
                                        "VALUES (%s, %s, false, false) ON CONFLICT (role, tenant_id) DO NOTHING",
                                        (role, owner))
                if done.rowcount:
                    changed.append(role)
    return owner, changed
