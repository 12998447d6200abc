"""Big writes through a real mount: a large transcript appended to costs what the appended
bytes cost (the daemon reads no more than that of the file), and the version kept is exact."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import bigwrites  # noqa: E402

pytestmark = pytest.mark.fuse


def bytes_read(pid: int) -> int:
    """What the daemon has read by system calls so far (files, the index, /dev/fuse)."""
    for line in Path(f"/proc/{pid}/io").read_text().splitlines():
        if line.startswith("rchar:"):
            return int(line.split()[1])
    raise AssertionError("no rchar in /proc/<pid>/io")


def test_an_append_to_a_large_transcript_reads_only_what_was_appended(workspace: Path, mount_factory) -> None:
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    (m.mnt / "sessions").mkdir(exist_ok=True)
    big = bigwrites.transcript(8 << 20)
    target = m.mnt / "sessions" / "import.jsonl"
    target.write_bytes(big)
    assert m.pid is not None
    added = bigwrites.session_records(1024, start_round=500).replace(b'"content": "', b'"content": "Quokka ', 1)
    costs = []
    for _ in range(3):
        before = bytes_read(m.pid)
        with open(target, "ab") as out:
            out.write(added)
        costs.append(bytes_read(m.pid) - before)
    # The history used to read the whole 8 MB at each close; now the appended KB, the 4 KiB
    # before the old end, the indexer's last chunk and 64 KiB checks, and index pages.
    print("bytes read per append", costs)
    assert min(costs) < 1 << 20, costs
    whole = big + added * 3
    assert (m.workspace / "sessions" / "import.jsonl").read_bytes() == whole
    newest = sorted(p for p in (m.mnt / "history" / "sessions" / "import.jsonl").iterdir() if p.is_file())[-1]
    assert newest.read_bytes() == whole  # the version kept from the appended bytes is exact
    hits = m.search_json("Quokka")["results"]
    assert hits and hits[0]["path"] == "sessions/import.jsonl"
    assert hits[0]["start_line"] > whole[: len(big)].count(b"\n")


def test_an_edit_below_the_end_is_kept_whole(workspace: Path, mount_factory) -> None:
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    (m.mnt / "sessions").mkdir(exist_ok=True)
    target = m.mnt / "sessions" / "edited.jsonl"
    first = bigwrites.transcript(2 << 20)
    target.write_bytes(first)
    with open(target, "r+b") as out:  # one byte changed in the middle, then an append
        out.seek(len(first) // 2)
        out.write(b"X")
    with open(target, "ab") as out:
        out.write(b'{"type":"message","message":{"role":"user","content":"late"}}\n')
    newest = sorted(p for p in (m.mnt / "history" / "sessions" / "edited.jsonl").iterdir() if p.is_file())[-1]
    assert newest.read_bytes() == (m.workspace / "sessions" / "edited.jsonl").read_bytes()


def validated(mnt: Path) -> int:
    """How many sync messages the mount has validated (a line of .memfs/requests)."""
    for line in (mnt / ".memfs" / "requests").read_text().splitlines():
        if line.startswith("# sync messages validated "):
            return int(line.rsplit(" ", 1)[1])
    raise AssertionError(".memfs/requests does not say how many sync messages were validated")


def test_a_sync_file_is_validated_and_deduplicated_in_one_pass(workspace: Path, mount_factory) -> None:
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    lines = bigwrites.sync_lines(400_000, tag="once").splitlines(keepends=True)
    data = b"".join(lines + lines[:50])  # the last 50 repeat ids stored a moment before
    (m.mnt / "clawgpt-memory").mkdir(exist_ok=True)
    (m.mnt / "clawgpt-memory" / "2023-05-08.jsonl").write_bytes(data)
    # Each line validated once, as write() took it; not again when the messages were stored.
    assert validated(m.mnt) == len(lines) + 50
    stored = [line for day in (m.workspace / "clawgpt-memory").glob("*.jsonl")
              for line in day.read_bytes().splitlines()]
    assert len(stored) == len(lines)  # each id once
    again = validated(m.mnt)
    with open(m.mnt / "clawgpt-memory" / "inbox", "wb") as out:
        out.write(b"".join(lines[:10]))
    assert validated(m.mnt) == again + 10
    assert sum(len(day.read_bytes().splitlines()) for day in (m.workspace / "clawgpt-memory").glob("*.jsonl")) \
        == len(lines)


def cpu_seconds(pid: int) -> float:
    """User and system CPU time the daemon has used so far (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# Issue #20 asks for 10 MB/s; not reached yet (chunking, the FTS5 and unit rows and their commit
# cost some 16 CPU seconds for 30 MB of transcript), so the rate is measured by
# scripts/bench_write.py, not asserted here: this test holds what is true now, searchable at close().


def test_a_30_mb_transcript_is_keyword_searchable_when_close_returns(workspace: Path, mount_factory,
                                                                      tmp_path: Path) -> None:
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    data = bigwrites.transcript(30 << 20)
    data += b'{"type":"message","id":"last","message":{"role":"user","content":"The Xylophonist closed it."}}\n'
    source = tmp_path / "import.jsonl"
    source.write_bytes(data)
    (m.mnt / "sessions").mkdir(exist_ok=True)
    assert m.pid is not None
    cpu = cpu_seconds(m.pid)
    started = time.perf_counter()
    subprocess.run(["cp", str(source), str(m.mnt / "sessions" / "import.jsonl")], check=True)
    wall = time.perf_counter() - started
    cpu = cpu_seconds(m.pid) - cpu
    hits = m.search_json("Xylophonist")["results"]  # another process, right after close() returned
    assert hits and hits[0]["path"] == "sessions/import.jsonl"
    assert hits[0]["start_line"] == data.count(b"\n")
    print(f"30 MB transcript: {wall:.1f} s wall ({len(data) / 1e6 / wall:.2f} MB/s), {cpu:.1f} s CPU")
