"""Big writes through a real mount: a large transcript appended to costs what the appended
bytes cost (the daemon reads no more than that of the file), and the version kept is exact."""

from __future__ import annotations

import ctypes
import errno
import json
import os
import signal
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Self

import pytest
from mounts import memfs_cli, wait_until

from memfs.memory import Memory
from memfs.workspace import init_workspace

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


# Issue #20 asks for 10 MB/s: measured by scripts/bench_write.py, not asserted here (the machine
# is shared).  These tests hold the shape that makes it possible (memfs.index.bigwrites): keyword
# rows before close() returns, the exact chunks after, the same as indexing in one step makes.


def indexed(memory: Memory, rel: str) -> list[tuple]:
    """A file's chunks with their units, as the index holds them (ids left out)."""
    conn = memory.store.conn
    rows = conn.execute("SELECT id, start_line, end_line, hash, text, embedded, private, jsonl, first_day, last_day, "
                        "chat_id, chat_title FROM chunks WHERE path = ? ORDER BY start_line, id", (rel,)).fetchall()
    out = []
    for chunk_id, *chunk in rows:
        units = conn.execute("SELECT start_line, end_line, hash, text, context, reading FROM units WHERE chunk_id = ? "
                             "ORDER BY start_line, id", (chunk_id,)).fetchall()
        out.append((*chunk, tuple(units)))
    return out


def in_one_step(tmp_path: Path, make_memory, rel: str, data: bytes) -> list[tuple]:
    """What indexing ``data`` as ``rel`` in one step (no mount, nothing deferred) stores."""
    other = tmp_path / "one-step"
    init_workspace(other)
    (other / rel).parent.mkdir(parents=True, exist_ok=True)
    (other / rel).write_bytes(data)
    memory = make_memory(other, embedding__provider="none")
    memory.reconcile()
    return indexed(memory, rel)


def provisional(m) -> list[str]:
    memory = m.memory(**{"embedding.provider": "none"})
    try:
        return memory.provisional_paths()
    finally:
        memory.close()


def test_a_30_mb_transcript_is_searchable_when_close_returns_and_chunked_exactly_after(
        workspace: Path, mount_factory, make_memory, tmp_path: Path) -> None:
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
    # Right after close() returned, the exact chunks are still owed, and another process finds
    # the last line by its word, cited by its own line number.
    assert provisional(m) == ["sessions/import.jsonl"]
    hits = m.search_json("Xylophonist")["results"]
    assert hits and hits[0]["path"] == "sessions/import.jsonl"
    last = data.count(b"\n")
    assert hits[0]["start_line"] <= last == hits[0]["end_line"]
    assert "Xylophonist" in hits[0]["snippet"]
    cited = (m.mnt / "search" / "Xylophonist.md").read_text()
    assert f"sessions/import.jsonl#L{hits[0]['start_line']}-L{last}" in cited
    assert "1 file still being chunked (sessions/import.jsonl): found by keyword only" in cited  # says so
    print(f"30 MB transcript: {wall:.1f} s wall ({len(data) / 1e6 / wall:.2f} MB/s), {cpu:.1f} s CPU")
    assert wait_until(lambda: not provisional(m), timeout=600, step=0.5)
    memory = m.memory(**{"embedding.provider": "none"})
    try:
        after = indexed(memory, "sessions/import.jsonl")
    finally:
        memory.close()
    assert after == in_one_step(tmp_path, make_memory, "sessions/import.jsonl", data)
    hits = m.search_json("Xylophonist")["results"]
    assert hits and (hits[0]["start_line"], hits[0]["end_line"]) == (last, last)


def test_a_daemon_stopped_before_the_exact_chunks_makes_them_at_its_next_start(
        workspace: Path, mount_factory, make_memory, tmp_path: Path) -> None:
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    data = bigwrites.daily_log(8 << 20) + b"The Quetzalcoatlus flew over.\n"
    source = tmp_path / "log.md"
    source.write_bytes(data)
    subprocess.run(["cp", str(source), str(m.mnt / "memory" / "2023-05-08.md")], check=True)
    assert m.pid is not None
    os.kill(m.pid, signal.SIGKILL)  # before the worker is done: it has some seconds of work left
    assert provisional(m) == ["memory/2023-05-08.md"]
    found = memfs_cli("search", "--json", "Quetzalcoatlus", "-w", str(m.workspace), "--set", "embedding.provider=none",
                      env={"MEMFS_STATE_DIR": str(m.state)})
    assert json.loads(found.stdout)["results"], found.stderr  # the keyword rows were committed
    subprocess.run(["fusermount3", "-u", "-z", str(m.mnt)], capture_output=True)
    again = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    assert not provisional(again)
    memory = again.memory(**{"embedding.provider": "none"})
    try:
        after = indexed(memory, "memory/2023-05-08.md")
    finally:
        memory.close()
    assert after == in_one_step(tmp_path, make_memory, "memory/2023-05-08.md", data)


def _zanzibarite_private_only(m, where: str) -> None:
    """The word Zanzibarite is in the private keyword table only, no chunk ``where`` is public,
    and a shared-mode search finds nothing."""
    memory = m.memory(**{"embedding.provider": "none"})
    try:
        conn = memory.store.conn
        match = "SELECT count(*) FROM {} WHERE {} MATCH 'zanzibarite'"
        assert conn.execute(match.format("chunks_fts", "chunks_fts")).fetchone()[0] == 0
        assert conn.execute(match.format("private_fts", "private_fts")).fetchone()[0] >= 1
        assert conn.execute(f"SELECT count(*) FROM chunks WHERE {where} AND private = 0").fetchone()[0] == 0
    finally:
        memory.close()
    shared = memfs_cli("search", "--json", "Zanzibarite", "-w", str(m.workspace), "--mode", "shared",
                       env={"MEMFS_STATE_DIR": str(m.state)})
    assert shared.returncode == 0 and json.loads(shared.stdout)["results"] == []


def test_a_big_private_file_stays_private_before_and_after_its_exact_chunks(
        workspace: Path, mount_factory) -> None:
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    data = bigwrites.daily_log(8 << 20) + b"- The vault code is Zanzibarite.\n"
    (m.mnt / "MEMORY.md").write_bytes(data)

    def private_only() -> None:
        _zanzibarite_private_only(m, "path = 'MEMORY.md'")
        assert m.search_json("Zanzibarite")["results"][0]["path"] == "MEMORY.md"

    assert provisional(m) == ["MEMORY.md"]
    private_only()
    assert wait_until(lambda: not provisional(m), timeout=600, step=0.5)
    private_only()


def test_a_big_sync_batch_is_searchable_when_close_returns_and_chunked_exactly_after(
        workspace: Path, mount_factory, make_memory, tmp_path: Path) -> None:
    # The watcher stays on: it re-reads day files the batch writes, and must not deadlock with it.
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    data = bigwrites.sync_lines(3 << 20, tag="batch")
    last = json.loads(data.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    data += json.dumps({**last, "id": "batch-last", "content": "The Quillwort bloomed."}).encode() + b"\n"
    (m.mnt / "clawgpt-memory").mkdir(exist_ok=True)
    (m.mnt / "clawgpt-memory" / "2023-05-08.jsonl").write_bytes(data)
    days = sorted(p.relative_to(m.workspace).as_posix() for p in (m.workspace / "clawgpt-memory").glob("*.jsonl"))
    assert len(days) > 10
    owed = provisional(m)
    assert owed and set(owed) <= set(days)
    hits = m.search_json("Quillwort")["results"]
    assert hits and hits[0]["path"] in days
    assert wait_until(lambda: not provisional(m), timeout=600, step=0.5)
    memory = m.memory(**{"embedding.provider": "none"})
    try:
        after = {rel: indexed(memory, rel) for rel in days}
    finally:
        memory.close()
    other = tmp_path / "one-step"
    init_workspace(other)
    (other / "clawgpt-memory").mkdir(exist_ok=True)
    for rel in days:
        (other / rel).write_bytes((m.workspace / rel).read_bytes())
    reference = make_memory(other, embedding__provider="none")
    reference.reconcile()
    assert after == {rel: indexed(reference, rel) for rel in days}


def day_ids(workspace: Path) -> list[str]:
    return [json.loads(line)["id"] for day in sorted((workspace / "clawgpt-memory").glob("*.jsonl"))
            for line in day.read_bytes().splitlines()]


def test_a_big_sync_file_with_repeats_and_a_line_that_is_not_text_fails_at_that_write(
        workspace: Path, mount_factory) -> None:
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    lines = bigwrites.sync_lines(2_000_000, tag="dup").splitlines(keepends=True)
    first, rest = lines[: len(lines) // 2], lines[len(lines) // 2:]
    # Valid JSON, but its \ud800 escape is a lone surrogate: no UTF-8 can hold it, so no day
    # file can.  It used to pass write(), and close() failed with EIO after some day files had
    # grown (and one was left empty).
    record = {**json.loads(first[-1]), "id": "not-text", "content": "broken \ud800 half"}
    bad = json.dumps(record).encode() + b"\n"
    assert b"\\ud800" in bad
    target = m.mnt / "clawgpt-memory" / "2023-05-08.jsonl"
    (m.mnt / "clawgpt-memory").mkdir(exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    try:
        accepted = b"".join(first + first[:40])  # with repeats of ids of this very batch
        assert os.write(fd, accepted) == len(accepted)
        with pytest.raises(OSError) as refused:
            os.write(fd, bad + b"".join(rest))
        assert refused.value.errno == errno.EINVAL
    finally:
        os.close(fd)  # stores what write() accepted, each id once
    ids = day_ids(m.workspace)
    assert sorted(ids) == sorted(json.loads(line)["id"] for line in first)
    assert all(day.stat().st_size for day in (m.workspace / "clawgpt-memory").glob("*.jsonl"))
    # Sent again in a second file, with the rest: the ids stored already are not stored twice.
    (m.mnt / "clawgpt-memory" / "inbox").write_bytes(b"".join(lines))
    assert sorted(day_ids(m.workspace)) == sorted(json.loads(line)["id"] for line in lines)


def test_the_day_files_of_a_big_sync_batch_are_the_mount_s_not_changes_beside_it(
        workspace: Path, mount_factory) -> None:
    # The watcher is on.  It used to see the day files grow while the batch was stored (they
    # are written directly, not through the mount) and take them for changes made beside it:
    # it indexed them again, logged each, and could keep their versions in the watcher's name.
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    (m.mnt / "clawgpt-memory").mkdir(exist_ok=True)
    (m.mnt / "clawgpt-memory" / "2023-05-08.jsonl").write_bytes(bigwrites.sync_lines(4 << 20, tag="own"))
    days = sorted(p.relative_to(m.workspace).as_posix() for p in (m.workspace / "clawgpt-memory").glob("*.jsonl"))
    assert len(days) > 50
    time.sleep(1.0)  # the watcher has seen every event of the batch
    log = "".join(p.read_text() for p in (m.state / "mounts").glob("*.log"))
    beside = [line for line in log.splitlines() if "changed beside the mount: clawgpt-memory/" in line]
    assert not beside, f"{len(beside)} day files taken for changes beside the mount, e.g. {beside[:2]}"
    for rel in days[:: max(1, len(days) // 8)]:
        out = memfs_cli("history", rel, "--json", "-w", str(m.workspace), env={"MEMFS_STATE_DIR": str(m.state)})
        assert out.returncode == 0, out.stderr
        assert [v["via"] for v in json.loads(out.stdout)["versions"]] == ["mount"], rel


def test_a_carrier_file_sent_to_twice_in_a_row_takes_or_refuses_each_line(workspace: Path, mount_factory) -> None:
    """A carrier file (a new name in clawgpt-memory/) is gone when close() returns: `>>` to the
    same name straight after creates it again, so the second line is refused with EINVAL (a bad
    one) or stored (a good one). The carrier used to go at release, which the kernel sends after
    close() returns, and its name stayed in the kernel's cache: the second `>>` opened the gone
    file and failed with ENOENT (2 of 3 tries in a newcomer's walk, every time here)."""
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    (m.mnt / "clawgpt-memory").mkdir(exist_ok=True)
    message = ('{"id": "m-%d", "chatId": "c1", "chatTitle": "Trip", "role": "user", '
               '"content": "ferry note %d", "timestamp": 1793613600000}')
    script = "; ".join(
        [f"echo bad >> clawgpt-memory/new{i}.jsonl; echo rc=$?" for i in range(4) for _ in range(2)]
        + [f"echo '{message % (i, i)}' >> clawgpt-memory/inbox.jsonl; echo rc=$?" for i in range(4)])
    out = subprocess.run(["bash", "-c", script], cwd=m.mnt, capture_output=True, text=True, timeout=60)
    assert out.stdout.split() == ["rc=1"] * 8 + ["rc=0"] * 4, out.stderr
    assert "No such file" not in out.stderr and out.stderr.count("Invalid argument") == 8, out.stderr
    assert sorted(day_ids(m.workspace)) == [f"m-{i}" for i in range(4)]
    assert len(list((m.workspace / "clawgpt-memory" / ".rejected").glob("*.reason"))) == 8


class ReadOnlyCloses:
    """The names of the files of ``folder`` opened read-only and closed meanwhile (inotify
    IN_CLOSE_NOWRITE): who read them does not matter here, nothing else reads the folder."""

    IN_CLOSE_NOWRITE = 0x10
    IN_NONBLOCK = 0o4000

    def __init__(self, folder: Path) -> None:
        self.libc = ctypes.CDLL(None, use_errno=True)
        self.fd = self.libc.inotify_init1(self.IN_NONBLOCK)
        assert self.fd >= 0
        assert self.libc.inotify_add_watch(self.fd, str(folder).encode(), self.IN_CLOSE_NOWRITE) >= 0

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def names(self) -> list[str]:
        found = []
        while True:
            try:
                buf = os.read(self.fd, 1 << 20)
            except BlockingIOError:
                return found
            at = 0
            while at < len(buf):
                _, mask, _, size = struct.unpack_from("iIII", buf, at)
                assert mask & 0x4000 == 0, "inotify queue overflowed"
                found.append(buf[at + 16: at + 16 + size].rstrip(b"\0").decode())
                at += 16 + size


def test_a_30_mb_sync_batch_is_stored_indexed_and_versioned_from_the_bytes_it_wrote(
        workspace: Path, mount_factory, tmp_path: Path) -> None:
    # Issue #20: a 30 MB sync file lands in hundreds of day files, each indexed (keyword rows)
    # and versioned before close() returns.  Reading each back for that (the index and the
    # history each read all of them again) doubled the work; the bytes the batch wrote are used.
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    lines = bigwrites.sync_lines(30 << 20, tag="big").splitlines(keepends=True)
    last = json.loads(lines[-1])
    final = {**last, "id": "big-last", "content": "The Xylophonist played at the end."}
    data = b"".join(lines + lines[:300]) + json.dumps(final).encode() + b"\n"  # 300 repeats of this batch's ids
    source = tmp_path / "import.jsonl"
    source.write_bytes(data)
    (m.mnt / "clawgpt-memory").mkdir(exist_ok=True)
    with ReadOnlyCloses(m.workspace / "clawgpt-memory") as reads:
        subprocess.run(["cp", str(source), str(m.mnt / "clawgpt-memory" / "2023-05-08.jsonl")], check=True)
        read_back = reads.names()
    # Each id once, each message in the day file of its date.
    ids = day_ids(m.workspace)
    assert len(ids) == len(set(ids)) == len(lines) + 1
    days = sorted((m.workspace / "clawgpt-memory").glob("*.jsonl"))
    assert len(days) > 300
    for day in days[:: max(1, len(days) // 20)]:
        for raw in day.read_bytes().splitlines():
            stamp = json.loads(raw)["timestamp"]
            assert time.strftime("%Y-%m-%d", time.gmtime(stamp / 1000)) == day.stem
    # Right after close(): the last message is found by a word only it holds, cited by its own
    # line of its day file.
    hits = m.search_json("Xylophonist")["results"]
    assert hits, "the last message of the batch is not searchable when close() returns"
    rel = hits[0]["path"]
    line = next(n for n, raw in enumerate((m.workspace / rel).read_bytes().splitlines(), 1)
                if json.loads(raw)["id"] == "big-last")
    assert hits[0]["start_line"] <= line <= hits[0]["end_line"]
    assert "Xylophonist" in hits[0]["snippet"]
    # The day files were not read back before close() returned (a few may have been by the
    # completion worker, which starts as close() returns).
    assert len(read_back) < len(days) // 10, f"{len(read_back)} of {len(days)} day files read back"
    # Each day file's version is its content, kept through the mount.
    for day in days[:: max(1, len(days) // 6)]:
        day_rel = day.relative_to(m.workspace).as_posix()
        out = memfs_cli("history", day_rel, "--json", "-w", str(m.workspace), env={"MEMFS_STATE_DIR": str(m.state)})
        assert out.returncode == 0, out.stderr
        versions = json.loads(out.stdout)["versions"]
        assert [v["via"] for v in versions] == ["mount"], day_rel
        shown = memfs_cli("history", day_rel, versions[0]["version"], "-w", str(m.workspace),
                          env={"MEMFS_STATE_DIR": str(m.state)})
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.encode() == day.read_bytes(), day_rel


def test_a_big_sync_batch_into_private_day_files_stays_private_before_and_after_its_exact_chunks(
        workspace: Path, mount_factory) -> None:
    (workspace / ".memfs.toml").write_text('[privacy]\nprivate_paths = ["MEMORY.md", "clawgpt-memory"]\n')
    m = mount_factory(workspace, "main", "--set", "embedding.provider=none")
    data = bigwrites.sync_lines(3 << 20, tag="private")
    last = json.loads(data.rstrip(b"\n").rsplit(b"\n", 1)[-1])
    data += json.dumps({**last, "id": "private-last", "content": "The vault code is Zanzibarite."}).encode() + b"\n"
    (m.mnt / "clawgpt-memory").mkdir(exist_ok=True)
    (m.mnt / "clawgpt-memory" / "2023-05-08.jsonl").write_bytes(data)

    def private_only() -> None:
        _zanzibarite_private_only(m, "path LIKE 'clawgpt-memory/%'")
        assert m.search_json("Zanzibarite")["results"][0]["path"].startswith("clawgpt-memory/")

    assert provisional(m)
    private_only()
    assert wait_until(lambda: not provisional(m), timeout=600, step=0.5)
    private_only()
