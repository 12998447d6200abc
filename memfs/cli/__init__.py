"""The ``memfs`` command line: the only place that parses argv and prints (but for
:mod:`memfs.quickcli`, the entry point, which answers a read-only command a daemon serves without
it).  :mod:`~memfs.cli.app` holds the group and what commands share; each other module one group
of commands: reading memory, changing it, running processes; ``memfs pg`` is :mod:`memfs.pgcli`."""

from memfs.cli import capture, reading, running, writing  # noqa: F401  (each registers its commands on main)
from memfs.cli.app import main
from memfs.pgcli import register as _register_pg

_register_pg(main)

__all__ = ["main"]
