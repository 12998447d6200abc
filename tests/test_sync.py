"""ClawGPT sync: the protocol, the store, `memfs sync`, and writes through a real mount."""

from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import write
from mounts import memfs_cli, wait_until

from memfs.sync.protocol import SyncError, joined_lines, parse

DAY = 86_400_000
T0 = 1707123456789  # 2024-02-05 08:57:36 UTC


def message(i: int, ts: int = T0, **extra: object) -> dict:
    record = {"id": f"chat1-{i}", "chatId": "chat1", "chatTitle": "Trip", "role": "user" if i % 2 == 0 else "assistant",
              "content": f"message number {i} about the Porto trip", "timestamp": ts}
    record.update(extra)
    return record


def envelope(messages: list[dict], device: str = "desktop-abc") -> bytes:
    return ("[CLAWGPT-SYNC]\n" + json.dumps({"messages": messages, "deviceId": device, "syncedAt": T0})).encode()


BAD = {
    "invalid JSON": b'{"id": "x", ',
    "missing field": json.dumps({k: v for k, v in message(1).items() if k != "chatTitle"}).encode(),
    "wrong type": json.dumps(message(1, content=42)).encode(),
    "unknown role": json.dumps(message(1, role="system")).encode(),
    "non-numeric timestamp": json.dumps(message(1, ts="yesterday")).encode(),
}


def test_protocol_validation() -> None:
    parsed = parse(envelope([message(0), message(1)]))
    assert [m.device_id for m in parsed] == ["desktop-abc", "desktop-abc"]
    assert parsed[0].canonical().startswith('{"id":"chat1-0","chatId":"chat1","chatTitle":"Trip","role":"user"')
    for name, data in BAD.items():
        with pytest.raises(SyncError):
            parse(data)
    with pytest.raises(SyncError, match="line 2"):
        parse(json.dumps(message(0)).encode() + b"\n" + BAD["unknown role"])


@pytest.mark.parametrize("stamp,hint", [
    (1707123456, "looks like seconds (1707123456000 ms would be 2024-02-05"),
    (99999999999999, "more than a day ahead of now (year 5138)"),
    (1707123456789000, "looks like microseconds"),
    (86_400_000, "before 2000-01-01"),
])
def test_implausible_timestamps_are_rejected_naming_the_mistake(stamp: int, hint: str) -> None:
    with pytest.raises(SyncError, match=re.escape(hint)):
        parse(json.dumps(message(0, ts=stamp)).encode())
    now_ms = 1_800_000_000_000
    parse(json.dumps(message(0, ts=now_ms + DAY // 2)).encode(), now_ms=now_ms)  # a fast clock is fine
    with pytest.raises(SyncError, match="ahead"):
        parse(json.dumps(message(0, ts=now_ms + 2 * DAY)).encode(), now_ms=now_ms)
    for huge in ("9" * 400, "1e400", "-1e400", "NaN"):  # no OverflowError, no traceback
        with pytest.raises(SyncError, match="milliseconds"):
            parse(json.dumps(message(0)).replace(str(T0), huge).encode())


def test_lines_orjson_reads_or_writes_otherwise_are_judged_and_stored_as_json_would() -> None:
    """JSONL lines are read by orjson when it can and by json otherwise; stored lines are made by
    orjson: the messages, the verdicts and the bytes are json's all the same."""
    odd = [
        json.dumps(message(1, extra=float("nan"))),  # NaN: json reads it, orjson does not
        json.dumps(message(2, big=10**30)),  # beyond 64 bits: orjson reads a float
        json.dumps(message(3)).replace('"id": "chat1-3"', '"id": "first", "id": "chat1-3"'),  # last key wins
        json.dumps(message(4, ts=T0 + 0.5)),  # a float timestamp
        json.dumps(message(5, content="tab\t nul\x00 del\x7f \u2028 é 猫 \U0001f600 \"q\" \\ /")),
        json.dumps(message(6, content="x", deviceId="phone")),
    ]
    parsed = parse("\n".join(odd).encode())
    assert [m.id for m in parsed] == [f"chat1-{i}" for i in range(1, 7)]
    assert parsed[3].timestamp == T0 + 0.5 and parsed[5].device_id == "phone"
    for m in parsed:
        assert m.line() == json.dumps(m._record(), ensure_ascii=False, separators=(",", ":")).encode()
        assert json.loads(m.line()) == m._record()
    # Bad lines get json's verdict, with its line number.
    with pytest.raises(SyncError, match="line 2: unknown role"):
        parse((odd[0] + "\n" + json.dumps(message(1, role="system"))).encode())
    with pytest.raises(SyncError, match="line 1: invalid JSON"):
        parse(b'{"id": "x", "content": NaN')


def test_a_day_files_lines_made_at_once_are_the_lines_made_one_by_one() -> None:
    """A batch's lines for a day file come from one orjson call, cut apart between records: the
    bytes are each message's own line, whatever its text holds (record boundaries written into
    it), and a float timestamp among them is written by json as before."""
    tricky = ['},{"id":"x"}', '"},{"id":', "},{", '\\"},{"id":\\', "é 猫 \U0001f600 \u2028", "tab\t nul\x00", ""]
    messages = parse("\n".join(json.dumps(message(i, content=text, **({"deviceId": "p"} if i % 2 else {})))
                                for i, text in enumerate(tricky)).encode())
    assert joined_lines(messages) == b"\n".join(m.line() for m in messages)
    assert joined_lines(messages).count(b"\n") == len(messages) - 1
    with_float = messages + parse(json.dumps(message(9, ts=T0 + 0.5)).encode())
    assert joined_lines(with_float) == b"\n".join(m.line() for m in with_float)
    assert joined_lines([]) == b""


def test_text_utf8_cannot_hold_is_refused_naming_the_field() -> None:
    # A lone surrogate escape is valid JSON but no text: it could never be written to a day file.
    with pytest.raises(SyncError, match="line 1: field 'content' holds a lone surrogate"):
        parse(json.dumps(message(1, content="half \ud800 of it")).encode())
    with pytest.raises(SyncError, match="field 'chatTitle' holds a lone surrogate"):
        parse(envelope([message(1, chatTitle="\udfff")]))
    assert parse(json.dumps(message(1, content="a pair \U0001f600")).encode())[0].content.endswith("\U0001f600")


def test_a_batch_with_a_day_file_it_cannot_write_writes_none(tmp_path: Path) -> None:
    from zoneinfo import ZoneInfo

    from memfs.sync.store import SyncStore, SyncStoreError
    folder = tmp_path / "clawgpt-memory"
    folder.mkdir()
    (tmp_path / "MEMORY.md").write_text("private\n")
    (folder / "2024-02-07.jsonl").symlink_to("../MEMORY.md")  # the batch's last day
    store = SyncStore(tmp_path, ZoneInfo("UTC"))
    batch = parse("\n".join(json.dumps(message(i, ts=T0 + i * DAY)) for i in range(3)).encode())
    with pytest.raises(SyncStoreError, match="symlink, not a day file"):
        store.ingest(batch)
    # The days before it used to be written already: half a batch, whose ids a retry then skipped.
    assert sorted(p.name for p in folder.iterdir()) == ["2024-02-07.jsonl"]
    assert (tmp_path / "MEMORY.md").read_text() == "private\n"


def test_cli_rejects_a_timestamp_in_seconds(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}
    out = memfs_cli("sync", "-w", str(ws), env=env, input=envelope([message(0, ts=1707123456)]).decode())
    assert out.returncode == 1 and "looks like seconds" in out.stderr and "Traceback" not in out.stderr
    assert not list((ws / "clawgpt-memory").glob("*.jsonl"))


def test_cli_sync_dedups_and_routes(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    env = {"MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_EMBEDDING_PROVIDER": "none"}
    data = envelope([message(0), message(1, T0 + DAY), message(2, T0 + 2 * DAY)]).decode()
    out = memfs_cli("sync", "-w", str(ws), env=env, input=data)
    assert out.returncode == 0 and out.stdout == "NO_REPLY\n"
    files = sorted(p.name for p in (ws / "clawgpt-memory").glob("*.jsonl"))
    assert files == ["2024-02-05.jsonl", "2024-02-06.jsonl", "2024-02-07.jsonl"]
    again = memfs_cli("sync", "--json", "-w", str(ws), env=env, input=data)
    assert json.loads(again.stdout) == {"stored": 0, "duplicates": 3, "files": []}
    # The id index is rebuilt from the files: an id added by hand elsewhere counts too.
    with open(ws / "clawgpt-memory" / "2024-01-01.jsonl", "w") as f:
        f.write(json.dumps(message(7)) + "\n")
    seventh = memfs_cli("sync", "--json", "-w", str(ws), env=env, input=envelope([message(7, T0)]).decode())
    assert json.loads(seventh.stdout)["duplicates"] == 1
    bad = memfs_cli("sync", "-w", str(ws), env=env, input="[CLAWGPT-SYNC]\n{not json")
    assert bad.returncode != 0 and "rejected" in bad.stderr
    assert list((ws / "clawgpt-memory" / ".rejected").glob("*.reason"))
    found = memfs_cli("search", "--json", "Porto trip", "-w", str(ws), env=env)
    assert json.loads(found.stdout)["results"][0]["path"].startswith("clawgpt-memory/")


@pytest.fixture
def smount(workspace: Path, mount_factory):
    (workspace / "clawgpt-memory").mkdir()
    return mount_factory(workspace)


def lines_of(ws: Path) -> list[dict]:
    return [json.loads(line) for p in sorted((ws / "clawgpt-memory").glob("*.jsonl"))
            for line in p.read_text().splitlines() if line.strip()]


@pytest.mark.fuse
def test_sync_through_the_mount(smount) -> None:
    mnt, ws = smount.mnt, smount.workspace
    batch = envelope([message(0), message(1, T0 + DAY), message(2, T0 + 2 * DAY)])
    (mnt / "clawgpt-memory" / "incoming.txt").write_bytes(batch)
    assert sorted(p.name for p in (ws / "clawgpt-memory").glob("*.jsonl")) == [
        "2024-02-05.jsonl", "2024-02-06.jsonl", "2024-02-07.jsonl"]
    assert not (ws / "clawgpt-memory" / "incoming.txt").exists()  # an inbox, emptied into date files
    assert all(r["deviceId"] == "desktop-abc" for r in lines_of(ws))
    (mnt / "clawgpt-memory" / "again.jsonl").write_bytes(batch)  # the same message twice
    assert len(lines_of(ws)) == 3
    first_line = (ws / "clawgpt-memory" / "2024-02-05.jsonl").read_text()
    with open(mnt / "clawgpt-memory" / "2024-02-05.jsonl", "a") as f:  # plain JSONL append, other day
        f.write(json.dumps(message(3, T0 + 3 * DAY)) + "\n")
    assert (ws / "clawgpt-memory" / "2024-02-05.jsonl").read_text() == first_line  # never rewritten
    assert (ws / "clawgpt-memory" / "2024-02-08.jsonl").exists()
    assert (mnt / "clawgpt-memory" / "2024-02-08.jsonl").read_text().count("\n") == 1
    text = (mnt / "search" / "message number 3 Porto.md").read_text()
    assert "clawgpt-memory/2024-02-08.jsonl#L1-L1" in text


@pytest.mark.fuse
def test_a_synced_chat_is_found_by_its_title_and_shows_it(smount) -> None:
    """A sync write through the mount is searchable at once by a word only its chat's title holds,
    every result shows the title, and `memfs get --messages` reads the cited lines as text."""
    mnt, ws = smount.mnt, smount.workspace
    chat = [message(0, chatId="c-okapi", chatTitle="Okapi sanctuary volunteering",
                    content="Which weekends can we help with the feeding rounds?"),
            message(1, T0 + 60_000, chatId="c-okapi", chatTitle="Okapi sanctuary volunteering",
                    content="Saturdays in May; bring boots."),
            message(2, T0 + 120_000, chatId="c-other", chatTitle="Printer drivers",
                    content="The office printer needs the new driver.")]
    (mnt / "clawgpt-memory" / "incoming.txt").write_bytes(envelope(chat))
    page = (mnt / "search" / "okapi.md").read_text()
    assert "clawgpt-memory/2024-02-05.jsonl#L1-L" in page
    assert "\n### Okapi sanctuary volunteering\n" in page and "chat c-okapi" in page
    assert "Printer drivers" not in page
    found = json.loads((mnt / "search" / "okapi.json").read_text())["results"]
    assert found and all((r["chat_id"], r["chat_title"]) == ("c-okapi", "Okapi sanctuary volunteering")
                         for r in found)
    env = {"MEMFS_STATE_DIR": str(smount.state)}
    read = memfs_cli("get", "clawgpt-memory/2024-02-05.jsonl", "--from", "1", "--lines", "2", "--messages",
                     "-w", str(ws), env=env)
    assert read.returncode == 0, read.stderr
    assert read.stdout == ("# Okapi sanctuary volunteering\n\n"
                           "[2024-02-05 08:57 UTC] User: Which weekends can we help with the feeding rounds?\n"
                           "[2024-02-05 08:58 UTC] Assistant: Saturdays in May; bring boots.\n")
    wrong = memfs_cli("get", "clawgpt-memory/.rejected", "--messages", "-w", str(ws), env=env)
    assert wrong.returncode != 0 and "Traceback" not in wrong.stderr


WRITER = r"""
import sys
data = open(sys.argv[1], "rb").read()
for i in range(int(sys.argv[3])):
    with open(sys.argv[2] + f"-{i}", "wb") as f:
        f.write(data)
"""


@pytest.mark.fuse
def test_two_writers_at_once_store_each_id_once(smount, tmp_path: Path) -> None:
    a = envelope([message(i, T0 + (i % 3) * DAY) for i in range(0, 60)])
    b = envelope([message(i, T0 + (i % 3) * DAY) for i in range(30, 90)], device="phone-1")
    (tmp_path / "a").write_bytes(a)
    (tmp_path / "b").write_bytes(b)
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / name), str(smount.mnt / "clawgpt-memory" / name), "5"])
             for name in ("a", "b")]
    assert all(p.wait(timeout=120) == 0 for p in procs)
    ids = [r["id"] for r in lines_of(smount.workspace)]
    assert sorted(ids) == sorted(f"chat1-{i}" for i in range(90))
    # Writers lock the folder itself: nothing but the chats is left for `git add -A` to find.
    left = {p.name for p in (smount.workspace / "clawgpt-memory").iterdir()} - {"a", "b"}
    assert left and all(name.endswith(".jsonl") for name in left), left


@pytest.mark.fuse
@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_input_fails_the_write_and_applies_nothing(smount, kind: str) -> None:
    mnt, ws = smount.mnt, smount.workspace
    (mnt / "clawgpt-memory" / "ok.jsonl").write_bytes(json.dumps(message(0)).encode() + b"\n")
    before = lines_of(ws)
    data = json.dumps(message(5)).encode() + b"\n" + BAD[kind] + b"\n"  # one good line, one bad
    f = open(mnt / "clawgpt-memory" / "2024-02-05.jsonl", "ab")
    f.write(data)
    with pytest.raises(OSError) as raised:
        f.close()
    assert raised.value.errno == errno.EINVAL
    assert lines_of(ws) == before  # nothing of that write applied, not even the good line
    rejected = sorted((ws / "clawgpt-memory" / ".rejected").glob("*.reason"))
    assert rejected and "line 2" in rejected[-1].read_text()
    assert Path(str(rejected[-1])[: -len(".reason")]).read_bytes() == data
    log = next((smount.state / "mounts").glob("*.log")).read_text()
    assert "refused sync write to clawgpt-memory/2024-02-05.jsonl: line 2" in log


@pytest.mark.fuse
def test_existing_day_files_cannot_be_truncated_or_overwritten(smount) -> None:
    mnt, ws = smount.mnt, smount.workspace
    (mnt / "clawgpt-memory" / "in").write_bytes(envelope([message(0)]))
    day = mnt / "clawgpt-memory" / "2024-02-05.jsonl"
    content = (ws / "clawgpt-memory" / "2024-02-05.jsonl").read_bytes()
    for attempt in (lambda: open(day, "wb").close(), lambda: os.truncate(day, 3)):
        with pytest.raises(OSError) as raised:
            attempt()
        assert raised.value.errno == errno.EPERM
    fd = os.open(day, os.O_RDWR)
    try:
        with pytest.raises(OSError) as raised:
            os.pwrite(fd, b"X", 0)
        assert raised.value.errno == errno.EPERM
    finally:
        os.close(fd)
    with pytest.raises(OSError) as raised:
        os.rename(mnt / "MEMORY.md", day)
    assert raised.value.errno == errno.EPERM
    assert (ws / "clawgpt-memory" / "2024-02-05.jsonl").read_bytes() == content


SESSION = [
    {"type": "session", "id": "s1", "timestamp": "2026-01-26T09:59:00Z"},
    {"type": "message", "timestamp": "2026-01-26T10:00:00Z",
     "message": {"role": "user", "content": "Please rotate the staging TLS certificate"}},
    {"type": "message", "timestamp": "2026-01-26T10:00:05Z", "message": {"role": "assistant", "content": [
        {"type": "text", "text": "Rotating the certificate now."},
        {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": "certbot renew --xylophone-flag"}}]}},
    {"type": "message", "timestamp": "2026-01-26T10:00:09Z", "message": {"role": "toolResult", "toolCallId": "t1",
     "content": [{"type": "text", "text": "Congratulations xylophone renewal succeeded"}]}},
    {"type": "compaction", "summary": "odd record"},
]


@pytest.mark.fuse
def test_session_transcripts_index_dialogue_only(smount) -> None:
    mnt = smount.mnt
    (mnt / "sessions").mkdir()
    with open(mnt / "sessions" / "s1.jsonl", "w") as f:
        for record in SESSION[:2]:
            f.write(json.dumps(record) + "\n")
    with open(mnt / "sessions" / "s1.jsonl", "a") as f:  # grows as the session goes on
        for record in SESSION[2:]:
            f.write(json.dumps(record) + "\n")
    write(smount.workspace / "sessions" / "old.jsonl.reset.2026-01-25", json.dumps(
        {"type": "message", "message": {"role": "user", "content": "archived mango discussion"}}) + "\n")
    hit = json.loads((mnt / "search" / "rotate TLS certificate.json").read_text())["results"][0]
    assert hit["path"] == "sessions/s1.jsonl" and (hit["start_line"], hit["end_line"]) == (2, 3)
    assert "[2026-01-26 10:00 UTC] User: Please rotate" in hit["snippet"]
    # The messages appended after the header still carry the session's own title.
    assert (hit["chat_id"], hit["chat_title"]) == ("s1", "Session s1 (started 2026-01-26 09:59 UTC)")
    # Reads do not wait for vectors: what "everything" holds is known once all are embedded.
    memory = smount.memory()
    try:
        assert wait_until(lambda: memory.pending == 0, timeout=120)
    finally:
        memory.close()
    everything = json.loads((mnt / "search" / "n=20,min=0" / "xylophone.json").read_text())["results"]
    assert everything and all("xylophone" not in r["snippet"] for r in everything)  # tool I/O is not indexed
    import time
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not json.loads((mnt / "search" / "mango.json").read_text())["results"]:
        time.sleep(0.2)
    assert json.loads((mnt / "search" / "mango.json").read_text())["results"][0]["path"].startswith("sessions/old.jsonl.reset")


@pytest.mark.fuse
def test_a_bad_line_fails_its_own_write(smount) -> None:
    """Each complete line is validated as write() receives it: echo >> and open().write() see
    EINVAL themselves, and the lines written before it are still stored at close."""
    mnt, ws = smount.mnt, smount.workspace
    day = mnt / "clawgpt-memory" / "2024-02-05.jsonl"
    echo = subprocess.run(["bash", "-c", f"echo 'not json' >> '{day}'; echo status=$?"], capture_output=True, text=True)
    assert "status=1" in echo.stdout and "Invalid argument" in echo.stderr
    target = str(mnt / "clawgpt-memory" / "new.jsonl")
    one_liner = f"open({target!r}, 'w').write('{{\"id\": 1}}\\n')"
    python = subprocess.run([sys.executable, "-X", "dev", "-c", one_liner], capture_output=True, text=True)
    # CPython flushes a file it garbage-collects only at exit and reports what that flush raised
    # in dev mode only (exit status 0 either way): the write failed all the same.
    assert "OSError: [Errno 22] Invalid argument" in python.stderr
    with_block = f"with open({target!r}, 'w') as f: f.write('{{\"id\": 1}}\\n')"
    python = subprocess.run([sys.executable, "-c", with_block], capture_output=True, text=True)
    assert python.returncode == 1 and "Invalid argument" in python.stderr
    seconds = json.dumps(message(7, ts=1707123456)) + "\n"
    fd = os.open(day, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        assert os.write(fd, (json.dumps(message(6)) + "\n").encode()) > 0
        with pytest.raises(OSError) as raised:
            os.write(fd, seconds.encode())
        assert raised.value.errno == errno.EINVAL
        half = json.dumps(message(8))
        assert os.write(fd, half[:20].encode()) == 20  # a partial line waits for the rest
        assert os.write(fd, (half[20:] + "\n").encode()) > 0
    finally:
        os.close(fd)
    assert [r["id"] for r in lines_of(ws)] == ["chat1-6", "chat1-8"]
    reasons = " ".join(p.read_text() for p in (ws / "clawgpt-memory" / ".rejected").glob("*.reason"))
    assert "line 1: invalid JSON" in reasons and "looks like seconds" in reasons
    assert not (ws / "clawgpt-memory" / "new.jsonl").exists()
    log = next((smount.state / "mounts").glob("*.log")).read_text()
    assert "refused sync write to clawgpt-memory/2024-02-05.jsonl: line 1: invalid JSON" in log


@pytest.mark.fuse
def test_a_partial_line_is_still_judged_at_close(smount) -> None:
    mnt, ws = smount.mnt, smount.workspace
    fd = os.open(mnt / "clawgpt-memory" / "2024-02-05.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, (json.dumps(message(1)) + "\n" + '{"id": "cut short').encode())
    with pytest.raises(OSError) as raised:
        os.close(fd)
    assert raised.value.errno == errno.EINVAL
    assert lines_of(ws) == []


@pytest.mark.fuse
def test_a_garbage_line_edited_beside_the_mount_is_logged(smount) -> None:
    mnt, ws = smount.mnt, smount.workspace
    (mnt / "clawgpt-memory" / "in").write_bytes(envelope([message(0), message(2)]))
    with open(ws / "clawgpt-memory" / "2024-02-05.jsonl", "a") as day:
        day.write("garbage typed by hand\n")
    logfile = next((smount.state / "mounts").glob("*.log"))
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and "line 3 is not valid JSON" not in logfile.read_text():
        time.sleep(0.1)
    assert "clawgpt-memory/2024-02-05.jsonl: line 3 is not valid JSON and is not indexed" in logfile.read_text()


@pytest.mark.fuse
def test_a_bad_line_split_across_writes_takes_only_itself(smount) -> None:
    """A line that straddles a buffer boundary and turns out bad: the lines before it are stored."""
    mnt, ws = smount.mnt, smount.workspace
    good = json.dumps(message(1)) + "\n"
    bad = json.dumps(message(2, ts=1707123456)) + "\n"
    fd = os.open(mnt / "clawgpt-memory" / "2024-02-05.jsonl", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (good + bad[:30]).encode())
        with pytest.raises(OSError) as raised:
            os.write(fd, bad[30:].encode())
        assert raised.value.errno == errno.EINVAL
    finally:
        os.close(fd)  # no error left for close(): the bad line is gone whole
    assert [r["id"] for r in lines_of(ws)] == ["chat1-1"]


@pytest.mark.fuse
def test_a_complete_envelope_or_last_line_is_judged_at_write(smount) -> None:
    mnt, ws = smount.mnt, smount.workspace
    seconds = envelope([message(3, ts=1707123456)]).decode()
    shell = subprocess.run(["bash", "-c", f"printf '%s\\n' '{seconds}' > '{mnt}/clawgpt-memory/inbox.txt'; echo status=$?"],
                           capture_output=True, text=True)
    assert "status=1" in shell.stdout and "Invalid argument" in shell.stderr
    line = json.dumps(message(4, ts=1707123456))  # no newline: complete JSON all the same
    shell = subprocess.run(["bash", "-c", f"printf '%s' '{line}' >> '{mnt}/clawgpt-memory/x.jsonl'; echo status=$?"],
                           capture_output=True, text=True)
    assert "status=1" in shell.stdout and "Invalid argument" in shell.stderr
    assert lines_of(ws) == []
