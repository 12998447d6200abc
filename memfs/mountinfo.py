"""What the kernel's table of mounts says (/proc/self/mountinfo), with the standard library only:
which memfs mount a path is in.  The configuration uses it too (a state directory inside a memfs
mount would be written into a workspace), so it imports nothing of memfs."""

from __future__ import annotations

import re
from pathlib import Path

FSNAME = "memfs"


def unescape(field: str) -> str:
    """/proc mount tables write space, tab, newline and backslash as octal escapes."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def mountinfo_rows() -> list[list[str]]:
    try:
        with open("/proc/self/mountinfo") as mountinfo:
            return [line.split() for line in mountinfo]
    except OSError:
        return []


def memfs_mount_containing(path: Path) -> Path | None:
    """The memfs mountpoint at or above ``path`` (the innermost), if there is one."""
    target = str(path)
    found: Path | None = None
    for fields in mountinfo_rows():
        if "-" not in fields:
            continue
        fstype = fields[fields.index("-") + 1]
        point = unescape(fields[4])
        if fstype != f"fuse.{FSNAME}" or not (target == point or target.startswith(point.rstrip("/") + "/")):
            continue
        if found is None or len(point) > len(str(found)):
            found = Path(point)
    return found
