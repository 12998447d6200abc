"""Bounds on sync input: a message's and an envelope's size, how deep its JSON nests, what a
single write() may cost; past them a clear refusal (EINVAL at write(), exit 1 from `memfs sync`),
never a traceback.  And JSONL that a writer controls (transcripts, day files edited beside the
mount) does not crash indexing: a line too deep or too long is skipped, with the reason recorded."""

from __future__ import annotations

import errno
import json
import os
import time
from pathlib import Path

import pytest
from mounts import memfs_cli, wait_until

from memfs.sync import protocol
from memfs.sync.protocol import MAX_DEPTH, EnvelopeScan, Limits, SyncError, TooLarge, check_unfinished, parse

NOW = int(time.time() * 1000)
DEEP = 200_000  # what the security review wrote: the json module raised RecursionError


def message(i: int = 0, content: str = "a message about the okapi sanctuary", **extra: object) -> dict:
    record = {"id": f"m-{i}", "chatId": "c1", "chatTitle": "Okapi", "role": "user", "content": content,
              "timestamp": NOW - 60_000 + i}
    record.update(extra)
    return record


def line(record: dict) -> bytes:
    return json.dumps(record, ensure_ascii=False).encode()


def deep_line(depth: int = DEEP) -> bytes:
    """A message whose one extra field nests ``depth`` lists deep."""
    head = line(message(9))[:-1]
    return head + b', "extra": ' + b"[" * depth + b"]" * depth + b"}"


def sized_line(size: int, i: int = 0) -> bytes:
    """A message whose JSONL line is exactly ``size`` bytes."""
    bare = line(message(i, content=""))
    data = line(message(i, content="x" * (size - len(bare))))
    assert len(data) == size
    return data


def envelope(messages: list[dict]) -> bytes:
    return b"[CLAWGPT-SYNC]\n" + json.dumps({"deviceId": "phone", "messages": messages}).encode()  # ends "}]}"


# -- the protocol ---------------------------------------------------------------------------------

def test_a_line_nested_200000_deep_is_refused_with_its_reason_not_a_recursion_error() -> None:
    for data in (deep_line(), b"[" * DEEP + b"]" * DEEP,
                 # NaN: orjson refuses it, so the json module is asked (and recursed until it raised)
                 deep_line().replace(b'"extra"', b'"nan": NaN, "extra"')):
        with pytest.raises(SyncError, match=f"line 1: JSON nested deeper than {MAX_DEPTH} levels"):
            parse(data)
        if data.endswith(b"}"):
            with pytest.raises(SyncError, match="nested deeper"):
                check_unfinished(data)  # a complete object: judged at the write that completes it
    inside = envelope([message(1)])[:-3] + b', "extra": ' + b'{"a": ' * DEEP + b"1" + b"}" * DEEP + b"}]}"
    with pytest.raises(SyncError, match=f"nested deeper than {MAX_DEPTH + 2} levels"):
        parse(inside)


def test_nesting_up_to_the_bound_passes_and_one_level_more_is_refused() -> None:
    # A message is one level; what it holds besides its fields may nest MAX_DEPTH - 1 more.
    assert [m.id for m in parse(deep_line(MAX_DEPTH - 1))] == ["m-9"]
    with pytest.raises(SyncError, match="nested deeper"):
        parse(deep_line(MAX_DEPTH))
    records = [message(1, extra=json.loads("[" * (MAX_DEPTH - 1) + "]" * (MAX_DEPTH - 1)))]
    assert len(parse(envelope(records))) == 1
    records[0]["extra"] = [records[0]["extra"]]
    with pytest.raises(SyncError, match="nested deeper"):
        parse(envelope(records))


def test_a_message_at_the_bound_passes_and_one_byte_more_is_refused() -> None:
    limits = Limits(message=4096, envelope=64 * 1024)
    assert len(parse(sized_line(4096), limits=limits)) == 1
    with pytest.raises(TooLarge, match=r"line 1: a message of 4,097 bytes is larger than sync.max_message_kb "
                                        r"\(4 KiB = 4,096 bytes\)"):
        parse(sized_line(4097), limits=limits)
    # Bytes, not characters: two-byte characters count twice.
    bare = line(message(0, content=""))
    wide = line(message(0, content="é" * ((4096 - len(bare)) // 2)))
    assert len(wide) == 4096 and len(parse(wide, limits=limits)) == 1
    with pytest.raises(TooLarge):
        parse(line(message(0, content="é" * ((4098 - len(bare)) // 2))), limits=limits)
    # A line is judged by itself: the lines of a file add up to any size.
    assert len(parse(b"\n".join(sized_line(4096, i) for i in range(40)), limits=limits)) == 40
    # An envelope's message, as the line it is stored as (the envelope's deviceId stamped on it).
    stored = parse(envelope([message(0, content="")]))[0].line()
    fits = message(0, content="x" * (4096 - len(stored)))
    assert len(parse(envelope([fits]), limits=limits)[0].line()) == 4096
    with pytest.raises(TooLarge, match=r"message 1 of 1 \(id 'm-0'\): a message of 4,097 bytes"):
        parse(envelope([{**fits, "content": fits["content"] + "x"}]), limits=limits)


def test_an_envelope_at_the_bound_passes_and_one_byte_more_is_refused() -> None:
    limits = Limits(message=4096, envelope=64 * 1024)
    records = [message(i, content="x" * 3000) for i in range(20)]
    data = envelope(records)
    data += b" " * (64 * 1024 - len(data))
    assert len(data) == 64 * 1024 and len(parse(data, limits=limits)) == 20
    with pytest.raises(TooLarge, match=r"envelope of 65,537 bytes is larger than sync.max_envelope_mb"):
        parse(data + b" ", limits=limits)


def test_an_oversized_line_is_refused_before_it_is_complete() -> None:
    """What a mount holds of a line that is still being written is bounded too: the write() that
    takes it past the bound fails, not the one that would have completed it 60 MB later."""
    limits = Limits(message=4096, envelope=64 * 1024)
    start = sized_line(8192)[:4096]
    check_unfinished(start, limits=limits)  # may still be a message
    with pytest.raises(TooLarge, match="4,097 bytes"):
        check_unfinished(start + b"x", limits=limits)
    begun = envelope([message(0, content="x" * 70_000)])[:64 * 1024 + 1]
    with pytest.raises(TooLarge, match="envelope of 65,537 bytes"):
        check_unfinished(begun, limits=limits)


def test_an_envelope_written_piece_by_piece_is_parsed_once_when_it_is_complete(monkeypatch) -> None:
    """A write's cost is its own bytes: an envelope written in pieces that each end in a '}'
    (inside its strings) used to be parsed whole at each of them (quadratic: a 30 MB envelope
    in 128 KiB writes cost a mount 17 s of CPU, 2 s now)."""
    records = [message(i, content='a} "quoted" \\ back\\slash é } ' * 20) for i in range(200)]
    data = envelope(records)
    parsed = []
    real = protocol.parse
    monkeypatch.setattr(protocol, "parse", lambda *a, **k: parsed.append(1) or real(*a, **k))
    for step in (1, 7, 1000):
        cuts = sorted({i + 1 for i in range(len(data)) if data[i] == ord("}") or i % step == 0} | {len(data)})
        scan, staged, done = EnvelopeScan(), bytearray(), 0
        parsed.clear()
        for cut in cuts:
            staged += data[done:cut]
            done = cut
            check_unfinished(staged, scan=scan)
            assert scan.closed is (cut == len(data))
        assert len(parsed) == 1
    # Complete but wrong, or more after its end: refused at that write, not waited on.
    for wrong in (envelope([message(1, timestamp="x")]), envelope([message(1)]) + b"}"):
        with pytest.raises(SyncError):
            check_unfinished(wrong, scan=EnvelopeScan())


def test_refusing_a_60_mb_message_or_a_200000_deep_line_costs_milliseconds() -> None:
    """The refusals are made before anything is parsed: CPU time, generous for a busy machine
    (storing the 60 MB message cost some 3 minutes of CPU)."""
    big = line(message(0, content="x" * (60 << 20)))
    for data, reason in ((big, "larger than sync.max_message_kb"),
                         (b"[CLAWGPT-SYNC] " + json.dumps({"messages": [message(0, content="x" * (60 << 20))]}).encode(),
                          "larger than sync.max_envelope_mb"),
                         (deep_line(), "nested deeper")):
        began = time.process_time()
        with pytest.raises(SyncError, match=reason):
            parse(data)
        assert time.process_time() - began < 0.5


# -- `memfs sync` ---------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["main", "shared"])
def test_memfs_sync_refuses_a_deep_line_and_an_oversized_message_in_one_line(tmp_path: Path, mode: str) -> None:
    ws = tmp_path / "ws"
    (ws / "clawgpt-memory").mkdir(parents=True)
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}

    def sync(data: bytes, *more: str):
        return memfs_cli("sync", "--mode", mode, "-w", str(ws), *more, env=env, input=data.decode())

    cases = [
        (deep_line() + b"\n", f"line 1: JSON nested deeper than {MAX_DEPTH} levels"),
        (envelope([message(1)])[:-3] + b', "x": ' + b'{"a": ' * DEEP + b"1" + b"}" * DEEP + b"}]}",
         f"JSON nested deeper than {MAX_DEPTH + 2} levels"),
        (line(message(2, content="x" * (2 << 20))) + b"\n", "line 1: a message of 2,097,"),
        (envelope([message(3, content="x" * (2 << 20))]), "message 1 of 1 (id 'm-3'): a message of 2,097,"),
    ]
    for data, reason in cases:
        out = sync(data)
        assert out.returncode == 1, out.stderr
        assert out.stdout == "" and "Traceback" not in out.stderr and "recursion" not in out.stderr
        said = out.stderr.strip().splitlines()
        assert len(said) == 1 and said[0].startswith("Error: sync message rejected: ") and reason in said[0], said
    assert not list((ws / "clawgpt-memory").glob("*.jsonl"))
    # Of what was refused for its size, its head is kept to look at, not the 2 MB.
    oversized = [p for p in (ws / "clawgpt-memory" / ".rejected").glob("*.reason") if "larger than" in p.read_text()]
    assert len(oversized) == 2
    for reason in oversized:
        assert "(kept: its first 65,536 of 2,097," in reason.read_text()
        assert Path(str(reason)[: -len(".reason")]).stat().st_size == 65_536
    # At the bound it is stored, one byte over it is refused (a bound set small: 4 KiB).
    small = ("--set", "sync.max_message_kb=4")
    out = sync(sized_line(4096, 4) + b"\n", *small)
    assert out.returncode == 0, out.stderr
    out = sync(sized_line(4097, 5) + b"\n", *small)
    assert out.returncode == 1 and "a message of 4,097 bytes is larger than sync.max_message_kb (4 KiB" in out.stderr
    assert [r["id"] for r in map(json.loads, _day_lines(ws))] == ["m-4"]
    # One `memfs sync` carries one sync, in any form: JSONL lines too are bounded as a whole.
    lines = b"\n".join(sized_line(4000, 10 + i) for i in range(300)) + b"\n"  # 1.2 MB
    out = sync(lines, *small, "--set", "sync.max_envelope_mb=1")
    assert out.returncode == 1 and "a sync message on stdin of 1,200,300 bytes is larger than sync.max_envelope_mb" \
        in out.stderr
    assert len(_day_lines(ws)) == 1


def _day_lines(ws: Path) -> list[str]:
    return [x for p in sorted((ws / "clawgpt-memory").glob("*.jsonl")) for x in p.read_text().splitlines() if x]


# -- through a mount ------------------------------------------------------------------------------

@pytest.fixture
def smount(workspace: Path, mount_factory):
    (workspace / "clawgpt-memory").mkdir()
    return mount_factory(workspace)


def _log(m) -> str:
    return next((m.state / "mounts").glob("*.log")).read_text()


@pytest.mark.fuse
def test_a_200000_deep_line_fails_its_write_with_einval_and_the_mount_goes_on(smount) -> None:
    mnt, ws = smount.mnt, smount.workspace
    day = (mnt / "clawgpt-memory" / "today.jsonl")
    (mnt / "clawgpt-memory" / "first.jsonl").write_bytes(line(message(1)) + b"\n")
    stored = {p.name: p.read_bytes() for p in (ws / "clawgpt-memory").glob("*.jsonl")}
    assert stored
    fd = os.open(day, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError) as raised:
            os.write(fd, deep_line() + b"\n")
        assert raised.value.errno == errno.EINVAL
    finally:
        os.close(fd)  # nothing left to store, nothing to fail
    assert {p.name: p.read_bytes() for p in (ws / "clawgpt-memory").glob("*.jsonl")} == stored
    log = _log(smount)
    assert f"refused sync write to clawgpt-memory/today.jsonl: line 1: JSON nested deeper than {MAX_DEPTH}" in log
    assert "Traceback" not in log and "RecursionError" not in log
    with open(day, "ab") as f:  # the mount goes on
        f.write(line(message(2)) + b"\n")
    assert [r["id"] for r in map(json.loads, _day_lines(ws))] == ["m-1", "m-2"]


@pytest.mark.fuse
def test_an_oversized_message_fails_the_write_that_takes_it_past_the_bound(workspace: Path, mount_factory) -> None:
    (workspace / "clawgpt-memory").mkdir()
    m = mount_factory(workspace, "main", "--set", "sync.max_message_kb=64")
    day = m.mnt / "clawgpt-memory" / "inbox.jsonl"
    with open(day, "ab") as f:  # at the bound: stored
        f.write(sized_line(65536, 1) + b"\n")
    assert [r["id"] for r in map(json.loads, _day_lines(workspace))] == ["m-1"]
    before = {p.name: p.read_bytes() for p in (workspace / "clawgpt-memory").glob("*.jsonl")}
    big = sized_line(65537, 2) + b"\n"  # one byte over
    fd = os.open(day, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError) as raised:
            os.write(fd, big)
        assert raised.value.errno == errno.EINVAL
        # A line that grows write by write is refused at the write that passes the bound, not
        # held until its end (a 60 MB one used to be held, then stored).
        huge = sized_line(600_000, 3)
        assert os.write(fd, huge[:60_000]) == 60_000
        with pytest.raises(OSError) as raised:
            os.write(fd, huge[60_000:120_000])
        assert raised.value.errno == errno.EINVAL
    finally:
        os.close(fd)
    assert {p.name: p.read_bytes() for p in (workspace / "clawgpt-memory").glob("*.jsonl")} == before
    log = _log(m)
    assert "refused sync write to clawgpt-memory/inbox.jsonl: line 1: a message of 65,537 bytes is larger than " \
           "sync.max_message_kb (64 KiB = 65,536 bytes)" in log
    assert "a message of 120,000 bytes" in log and "Traceback" not in log


@pytest.mark.fuse
def test_an_envelope_over_its_bound_fails_at_write_in_the_shared_mode_too(workspace: Path, mount_factory) -> None:
    (workspace / "clawgpt-memory").mkdir()
    m = mount_factory(workspace, "main", "--mode", "shared", "--set", "sync.max_envelope_mb=0.5")
    data = envelope([message(i, content="y" * 30_000) for i in range(40)])  # 1.2 MB: refused
    fits = envelope([message(i, content="y" * 30_000) for i in range(40, 50)])  # 300 KB: stored
    fd = os.open(m.mnt / "clawgpt-memory" / "inbox.txt", os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        with pytest.raises(OSError) as raised:
            for start in range(0, len(data), 128 * 1024):
                os.write(fd, data[start : start + 128 * 1024])
        assert raised.value.errno == errno.EINVAL
        assert start < 1024 * 1024  # refused at the write past 512 KiB, not at the end
    finally:
        os.close(fd)
    (m.mnt / "clawgpt-memory" / "fits.txt").write_bytes(fits)
    assert sorted(r["id"] for r in map(json.loads, _day_lines(workspace))) == [f"m-{i}" for i in range(40, 50)]
    assert "envelope of 655,360 bytes is larger than sync.max_envelope_mb (0.5 MiB = 524,288 bytes)" in _log(m)


# -- indexing what a writer controls -------------------------------------------------------------

SESSION_HEAD = {"type": "session", "id": "s1", "timestamp": "2026-01-26T09:59:00Z"}


def said(text: str) -> dict:
    return {"type": "message", "timestamp": "2026-01-26T10:00:00Z", "message": {"role": "user", "content": text}}


@pytest.mark.fuse
def test_a_transcript_with_a_deep_and_an_enormous_line_is_indexed_without_them(workspace: Path,
                                                                                mount_factory) -> None:
    """sessions/*.jsonl are whatever the agent runtime wrote: a line nested 200,000 deep, or
    longer than index.max_file_mb, is skipped with the reason recorded; the rest is indexed."""
    m = mount_factory(workspace, "main", "--set", "index.max_file_mb=0.5")
    (m.mnt / "sessions").mkdir()
    lines = [json.dumps(SESSION_HEAD).encode(), json.dumps(said("the gazebo roof needs new shingles")).encode(),
             b'{"type": "message", "message": ' + b"[" * DEEP + b"]" * DEEP + b"}",
             json.dumps(said("enormous " * 70_000)).encode(),  # 630 KB
             json.dumps(said("the marmalade recipe uses seville oranges")).encode()]
    (m.mnt / "sessions" / "s1.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    for query, expected in (("gazebo shingles", True), ("marmalade seville", True), ("enormous", False)):
        found = json.loads((m.mnt / "search" / f"{query}.json").read_text())["results"]
        assert bool(found and found[0]["path"] == "sessions/s1.jsonl") is expected, (query, found)
    status = memfs_cli("status", "--json", "-w", str(workspace), env={"MEMFS_STATE_DIR": str(m.state)})
    problems = {p["path"]: p["warning"] for p in json.loads(status.stdout)["problems"]}
    assert problems["sessions/s1.jsonl"] == "line 3 skipped (JSON nested too deep to read) and 1 more line", problems
    log = _log(m)
    assert "sessions/s1.jsonl: line 3 skipped" in log and "Traceback" not in log and "RecursionError" not in log


@pytest.mark.fuse
def test_a_deep_line_edited_into_a_day_file_beside_the_mount_breaks_neither_index_nor_sync(smount) -> None:
    mnt, ws = smount.mnt, smount.workspace
    (mnt / "clawgpt-memory" / "in.jsonl").write_bytes(line(message(1)) + b"\n")
    day = next((ws / "clawgpt-memory").glob("*.jsonl"))
    with open(day, "ab") as f:  # beside the mount: no validation on the way in
        f.write(deep_line() + b"\n")
    assert wait_until(lambda: "line 2 skipped" in _log(smount), timeout=30)
    # The sync store reads the day files for their ids: the deep line is passed over.
    (mnt / "clawgpt-memory" / "more.jsonl").write_bytes(line(message(2)) + b"\n" + line(message(1)) + b"\n")
    ids = [json.loads(x)["id"] for x in day.read_text().splitlines() if x and len(x) < 1000]
    assert ids == ["m-1", "m-2"]
    found = json.loads((mnt / "search" / "okapi sanctuary.json").read_text())["results"]
    assert found and found[0]["path"] == f"clawgpt-memory/{day.name}"
    assert "Traceback" not in _log(smount)
