"""``memfs pg``: set up a PostgreSQL + pgvector database for memfs and hand out the
login roles that isolate its tenants.  Registered on the main command by :mod:`memfs.cli`; the
driver is imported only when one of these commands runs."""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click

DSN_HELP = "Admin DSN (a role that may create roles, e.g. the database owner with CREATEROLE); env MEMFS_PG_DSN."


def _dsn(given: str | None, how: str = "--dsn DSN") -> str:
    dsn = given or os.environ.get("MEMFS_PG_DSN", "")
    if not dsn:
        raise click.UsageError(f"a DSN is needed: pass it ({how}) or set MEMFS_PG_DSN")
    return dsn


def _agent(value: str, option: str) -> str:
    from memfs.config import AGENT_NAME

    if not AGENT_NAME.match(value):
        raise click.BadParameter(f"{value!r} is not an agent name memfs accepts: letters, digits, '.', '_' or '-' "
                                 "(at most 64, not starting with a symbol)", param_hint=option)
    return value


@contextlib.contextmanager
def _server_errors() -> Iterator[None]:
    """PgError as it is; any other error from the server (a DSN without the rights, say) in one
    line, never a traceback."""
    from memfs.index.storage.postgres.connect import PgError

    try:
        yield
    except PgError as exc:
        raise click.ClickException(str(exc)) from None
    except Exception as exc:
        import psycopg

        if not isinstance(exc, psycopg.Error):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        hint = (": use the admin DSN (the database owner, with CREATEROLE), not a tenant's"
                if isinstance(exc, psycopg.errors.InsufficientPrivilege) else "")
        raise click.ClickException(f"the server refused: {first}{hint}") from None


def _workspace_id(value: str, made_here: bool = False) -> tuple[uuid.UUID, Path | None]:
    """--workspace: a workspace folder or a workspace id itself (for an admin on a host without
    the files).  The id, and the folder it is still to be written into (None: nothing to write).
    A folder without an id gets a new one only with ``made_here`` (a login being granted), and
    only in memory: the caller writes it (:func:`_keep_id`) once the grant succeeded, so a grant
    that fails leaves the workspace as it was."""
    from memfs.workspaceid import ID_FILE, WorkspaceIdError, check_writable, read_id

    path = Path(value).expanduser()
    if not path.is_dir():
        try:
            return uuid.UUID(value), None
        except ValueError:
            raise click.ClickException(f"workspace {value} is neither a directory nor a workspace id") from None
    try:
        found = read_id(path)
        if found is not None:
            return found, None
        if not made_here:
            raise click.ClickException(f"workspace {path} has no id yet ({ID_FILE}): grant its agent a login first "
                                       f"(`memfs pg grant --workspace {path} --agent NAME`)")
        check_writable(path)  # before the server is changed: a login for an id that cannot be kept is no use
    except WorkspaceIdError as exc:
        raise click.ClickException(str(exc)) from None
    return uuid.uuid4(), path


def _keep_id(path: Path | None, made: uuid.UUID) -> None:
    """Write the id a grant just used into the workspace (see _workspace_id)."""
    from memfs.workspaceid import WorkspaceIdError, write_id

    if path is None:
        return
    try:
        kept = write_id(path, made)
    except WorkspaceIdError as exc:
        raise click.ClickException(f"the login was granted for workspace id {made}, but {exc}: write that id "
                                   f"into the file by hand") from None
    if kept != made:  # another process gave the folder its id meanwhile: the login is for neither
        raise click.ClickException(f"{path} got the id {kept} from another process while this grant was made "
                                   f"for {made}: run `memfs pg grant` again")


def register(main: click.Group) -> None:
    """Add the ``pg`` group to the main command."""

    @main.group("pg")
    def pg() -> None:
        """PostgreSQL + pgvector for a fleet of agents: the schema and one login per workspace and agent
        (the index runs there with index.backend = "postgres" and the DSN `grant` prints)."""

    @pg.command("init")
    @click.argument("dsn", required=False)
    def init(dsn: str | None) -> None:
        """Create the memfs schema in the database DSN names, or upgrade it (idempotent)."""
        from memfs.index.storage.postgres.schema import init as init_schema

        with _server_errors():
            before, after, vector = init_schema(_dsn(dsn, "memfs pg init DSN"))
        what = ("created" if before == 0 else "already current" if before == after
                else f"upgraded from version {before}")
        click.echo(f"memfs schema version {after}: {what} (pgvector {vector})")

    @pg.command("grant")
    @click.option("--workspace", "-w", "workspace", default=None, metavar="WS",
                  help="The workspace folder (its id is kept in WS/.memfs-id, written when a login is granted) or its id; "
                       "default: memfs's own --workspace or MEMFS_WORKSPACE.")
    @click.option("--agent", "-a", "agent", default=None,
                  help="The agent whose login this is (default: memfs's own --agent, MEMFS_AGENT, else main).")
    @click.option("--dsn", default=None, help=DSN_HELP)
    @click.option("--shared", is_flag=True, help="The agent's shared-mode role: it never sees private rows.")
    @click.option("--reader", default=None, metavar="OTHER",
                  help="Instead of a login: let agent OTHER read this agent's public memory.")
    @click.option("--reader-workspace", default=None, metavar="WS2",
                  help="With --reader: OTHER's workspace, when it is not WS.")
    @click.option("--revoke", is_flag=True, help="With --reader: take that grant back.")
    @click.pass_context
    def grant(ctx: click.Context, workspace: str | None, agent: str | None, dsn: str | None, shared: bool,
              reader: str | None, reader_workspace: str | None, revoke: bool) -> None:
        """Create or rotate the login role of one (workspace, agent): the last line printed is the
        DSN its mounts and commands use.  With --reader, grant (or --revoke) reading instead."""
        from memfs.index.storage.postgres.roles import grant_login, grant_reader

        given: dict[str, Any] = ctx.find_root().obj or {}
        workspace = workspace or (str(given["workspace"]) if given.get("workspace") else None) \
            or os.environ.get("MEMFS_WORKSPACE")
        if not workspace:
            raise click.UsageError("which workspace? give --workspace WS (a folder or a workspace id)")
        agent = _agent(agent or given.get("agent") or os.environ.get("MEMFS_AGENT") or "main", "--agent")
        if reader is not None:
            _agent(reader, "--reader")
        if reader is None and (reader_workspace or revoke):
            raise click.UsageError("--reader-workspace and --revoke go with --reader")
        if reader is not None and shared:
            raise click.UsageError("--shared makes a login; --reader grants reading: give one of them")
        owner, unwritten = _workspace_id(workspace, made_here=reader is None)
        with _server_errors():
            if reader is not None:
                other = _workspace_id(reader_workspace)[0] if reader_workspace else owner
                tenant_id, roles = grant_reader(_dsn(dsn), owner, agent, other, reader, revoke)
                if not roles:
                    had = "had no grant to read" if revoke else "may already read"
                    click.echo(f"{reader} {had} the public memory of {agent} (tenant {tenant_id}): nothing changed")
                    return
                verb = "may no longer read" if revoke else "may read"
                click.echo(f"{reader} ({', '.join(roles)}) {verb} the public memory of {agent} (tenant {tenant_id})")
                return
            login = grant_login(_dsn(dsn), owner, agent, shared)
        _keep_id(unwritten, owner)
        what = "created" if login.created else "password rotated"
        click.echo(f"tenant {login.tenant_id} (workspace {owner}, agent {agent}): role {login.role} {what}",
                   err=True)
        click.echo(login.dsn)
