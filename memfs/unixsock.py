"""Unix sockets only their user can use: the peer's uid, a path short enough to bind, and the
record that tells clients who listens.  Standard library only; shared by the daemons' sockets
and the per-user embedding service."""

from __future__ import annotations

import json
import os
import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _peer_uid(sock: socket.socket) -> int:
    creds = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    return struct.unpack("3i", creds)[1]


def check_peer(sock: socket.socket) -> bool:
    """Whether the other end of ``sock`` runs as this user."""
    try:
        return _peer_uid(sock) == os.getuid()
    except OSError:
        return False


@contextmanager
def folder_path(folder: Path, name: str) -> Iterator[str]:
    """A path to ``folder/name`` short enough for a Unix socket (108 bytes), through a descriptor
    of the folder: state directories under a long $HOME or a test's tmp dir are longer."""
    fd = os.open(folder, os.O_PATH | os.O_DIRECTORY)
    try:
        yield f"/proc/self/fd/{fd}/{name}"
    finally:
        os.close(fd)


def bind_private(sock: socket.socket, folder: Path, name: str) -> None:
    """Bind ``sock`` at ``folder/name`` with mode 0600, replacing a socket left by a process that
    died (the caller holds the lock that says the name is its own)."""
    with folder_path(folder, name) as path:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        old = os.umask(0o177)
        try:
            sock.bind(path)
        finally:
            os.umask(old)


def write_record(path: Path, info: dict[str, object]) -> None:
    """Write the JSON record that describes a listening socket: 0600, and whole or not at all
    (a client reading it never sees half of it)."""
    temp = path.with_suffix(".tmp")
    temp.write_text(json.dumps(info))
    os.chmod(temp, 0o600)
    os.replace(temp, path)
