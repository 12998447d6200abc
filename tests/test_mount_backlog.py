"""A large embedding backlog on a real mount with the real model (issue #20): reads answer from
what is indexed now and say what is pending, a note written behind the backlog is found by meaning
long before the backlog is done, and status tells the progress, the rate and the time left."""

from __future__ import annotations

import datetime as dt
import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from mounts import clean_env, memfs_cli, wait_until

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import bigwrites  # noqa: E402

pytestmark = pytest.mark.fuse

DAY = Path(__file__).resolve().parent / "data" / "locomo-2023-05-08.md"
# Passages: half a minute or more of work for the local model on two cores (Markdown read once).
# A tenth of it must outlast a note's way to a search file: the call in progress, the note's own,
# and the rendering a first look cached (up to a second while only vectors arrive).  The embedder
# works at full speed when the note comes (the copies' exact chunks were made in the pause after
# them; before bursts it was still waiting for that pause): 4000 left about a second.
BACKLOG = 8000
NOTE = "The plumber comes on Thursday morning to fix the leaking kitchen sink.\n"
MEANING = "appointment to repair a dripping faucet"  # not one word in common with NOTE


def make_backlog(mounted, passages: int = BACKLOG, tag: str = "") -> int:
    """Old history copied in through the mount: a real LoCoMo day, as many times as it takes,
    each copy told apart (numbered turns, and ``tag``) so the embedding cache cannot answer for it."""
    text = DAY.read_text()
    memory = mounted.memory()
    try:
        copy = 0
        # Copies closed one right after another are a burst (memfs.bursts): their exact chunks,
        # and so their passages, come once the closes pause.  Written until what they will make is
        # enough, then chunked (and more written if embedding took its share meanwhile): the
        # backlog is real, and being embedded, when this returns.
        goal = passages
        while True:
            if memory.pending + int(memory.status()["pending_estimated"]) >= goal:
                assert wait_until(lambda: not memory.provisional_paths(), timeout=120)
                if memory.pending >= passages:
                    break
                goal += passages - memory.pending
            copy += 1
            numbered = re.sub(r"^## (\d\d:\d\d) - ", lambda m, n=copy: f"## {m.group(1)} - (copy {tag}{n}) ", text,
                              flags=re.MULTILINE)
            target = mounted.mnt / "memory" / "archive" / f"2023-05-08-copy-{tag}{copy}.md"
            target.parent.mkdir(exist_ok=True)
            target.write_text(numbered)
            assert copy < 1000, "the copies made no backlog"
        return memory.pending
    finally:
        memory.close()


def searches(mounted) -> tuple[int, float]:
    """(search files rendered so far, the longest wait for vectors), as .memfs/status says."""
    text = (mounted.mnt / ".memfs" / "status").read_text()
    found = re.search(r"^searches:\s+(\d+) search file rendering\(s\), the longest waited ([\d.]+) ms", text, re.MULTILINE)
    assert found, text
    return int(found.group(1)), float(found.group(2))


def test_a_read_during_a_backlog_renders_once_waits_for_no_vector_and_says_what_is_pending(mounted) -> None:
    (mounted.mnt / "memory" / "2026-11-20.md").write_text("- Warm-up: the model is loaded.\n")
    memory = mounted.memory()
    try:  # a first rate measured (a fresh index has none: the line then says so)
        assert wait_until(lambda: memory.backlog().rate > 0, timeout=60)
    finally:
        memory.close()
    backlog = make_backlog(mounted)
    before, _ = searches(mounted)
    out = subprocess.run(["cat", str(mounted.mnt / "search" / "what is new with Caroline.md")],
                         capture_output=True, text=True, check=True).stdout
    after, longest = searches(mounted)
    assert after - before == 1, "one cat rendered the search more than once"
    assert longest <= 50
    assert "copy" in out and "Caroline" in out  # keyword matches at once
    note = [line for line in out.splitlines() if line.startswith("> pending:")]
    assert len(note) == 1, out
    waiting = int(re.search(r"(\d+) passages still wait", note[0]).group(1))
    assert 0 < waiting <= backlog + 50
    assert re.search(r"at [\d.]+/s they should be done in about \d+", note[0]), note[0]
    (mounted.mnt / "search" / "a plain stat.md").stat()
    (mounted.mnt / "search" / "a plain stat.md").stat()  # within a second: the same rendering
    assert searches(mounted)[0] - after == 1
    answer = json.loads((mounted.mnt / "search" / "what is new with Caroline.json").read_text())
    assert answer["pending"] > 0 and "should be done" in answer["pending_note"]
    assert searches(mounted)[1] <= 50


def test_a_note_written_behind_a_backlog_is_found_by_meaning_long_before_it_is_done(mounted) -> None:
    backlog = make_backlog(mounted)
    day = dt.date.today().isoformat()
    with open(mounted.mnt / "memory" / f"{day}.md", "a") as handle:
        handle.write(NOTE)
    query = mounted.mnt / "search" / "min=0,n=3" / f"{MEANING}.json"
    memory = mounted.memory()
    try:
        def by_meaning() -> bool:
            answer = json.loads(query.read_text())
            return any(r["path"] == f"memory/{day}.md" and r["vector_score"] > 0 for r in answer["results"])

        assert wait_until(by_meaning, timeout=60, step=0.1), "the note was not found by meaning within a minute"
        left = memory.pending
    finally:
        memory.close()
    # Found while nine tenths still wait: a fixed share, not a time (the brief: no timed tests).
    # At 5% a quiet machine embedding Markdown once (~200 passages a second) failed on a note
    # found about a second after its write, the time the issue allows.
    assert left > backlog * 0.9, f"found only once the backlog was nearly done ({left} of {backlog} left)"


def test_status_shows_the_backlog_progress_rate_and_time_left(mounted) -> None:
    make_backlog(mounted)
    memory = mounted.memory()
    try:  # the mount's embedder has measured its rate
        assert wait_until(lambda: memory.backlog().active, timeout=30)
    finally:
        memory.close()
    out = memfs_cli("status", "-w", str(mounted.workspace), env={"MEMFS_STATE_DIR": str(mounted.state)})
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if line.startswith("pending:"))
    assert re.search(r"pending:\s+\d+ passage\(s\) waiting for an embedding \(\d+% of \d+ embedded; "
                     r"[\d.]+/s, about \d+(\.\d)? (s|min|h) left\)", line), line
    shown = (mounted.mnt / ".memfs" / "status").read_text()
    assert re.search(r"^pending: .*/s, about .* left\)$", shown, re.MULTILINE), shown
    info = json.loads(memfs_cli("status", "--json", "-w", str(mounted.workspace),
                                env={"MEMFS_STATE_DIR": str(mounted.state)}).stdout)
    assert info["pending"] > 0 and info["embed_rate"] > 0 and info["seconds_left"] > 0 and info["embedding_now"]


def test_the_share_embedded_does_not_fall_back_when_a_big_writes_exact_chunks_arrive(mounted, tmp_path: Path) -> None:
    """A big write is found by keyword first and chunked exactly after (memfs.index.bigwrites):
    the passages it will make are counted as waiting from the start (estimated), so the share
    of the backlog embedded does not drop when they arrive (a newcomer saw 65%, then 2%)."""
    env = {"MEMFS_STATE_DIR": str(mounted.state)}

    def status() -> dict:
        return json.loads(memfs_cli("status", "--json", "-w", str(mounted.workspace), env=env).stdout)

    assert wait_until(lambda: status()["pending"] == 0, timeout=120, step=0.5)  # the template's files
    embedded = status()["passages"]
    source = tmp_path / "import.jsonl"
    source.write_bytes(bigwrites.transcript(16 << 20))
    (mounted.mnt / "sessions").mkdir(exist_ok=True)
    subprocess.run(["cp", str(source), str(mounted.mnt / "sessions" / "import.jsonl")], check=True)
    shown = memfs_cli("status", "-w", str(mounted.workspace), env=env).stdout
    assert "chunking:   1 file found by keyword, being chunked: sessions/import.jsonl" in shown, shown
    line = next(line for line in shown.splitlines() if line.startswith("pending:"))
    found = re.match(r"pending:\s+(\d+) passage\(s\) waiting for an embedding \(about (\d+) of them to come from "
                     r"the 1 file being chunked; (\d+)% of (\d+) embedded; ", line)
    assert found, line
    waiting, coming, _, total = (int(n) for n in found.groups())
    assert total - waiting == embedded  # the keyword rows are not counted as embedded, nor at all
    assert coming > 100_000  # 16 MB of chat: some 6,300 messages, two passages each and more
    assert wait_until(lambda: not status()["provisional"], timeout=600, step=0.5)
    after = status()
    assert after["pending_estimated"] == 0 and after["passages"] == after["chunks"] + after["units"]
    done = after["passages"] - after["pending"]
    assert done >= embedded and done / after["passages"] >= embedded / total, (after, embedded, total)
    print(f"estimated {coming} passages to come; {after['passages'] - embedded} came")


def test_unmounting_one_of_two_mounts_says_the_other_embeds_what_is_left(workspace: Path, mount_factory) -> None:
    first = mount_factory(workspace)
    second = mount_factory(workspace)  # the same workspace and agent: one index, both embed it
    make_backlog(first, 1500)
    out = memfs_cli("umount", str(first.mnt), env={"MEMFS_STATE_DIR": str(first.state)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert re.search(rf"^unmounted: {re.escape(str(first.mnt))} \(\d+ passages wait for an embedding: the mount on "
                     rf"{re.escape(str(second.mnt))} \(pid {second.pid}\), still running, embeds them\)$",
                     out.stdout.strip()), out.stdout
    memory = second.memory()
    try:  # and it does
        left = memory.pending
        assert left and wait_until(lambda: memory.pending < left, timeout=60)
    finally:
        memory.close()
    out = memfs_cli("umount", str(second.mnt), env={"MEMFS_STATE_DIR": str(second.state)}, timeout=60)
    assert out.returncode == 0 and "the next mount or `memfs index` embeds them" in out.stdout, out.stdout


def test_a_memfs_serve_stopped_beside_a_mount_says_the_mount_embeds_what_is_left(mounted, tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    with open(log, "w") as err:
        serve = subprocess.Popen([sys.executable, "-m", "memfs", "serve", str(mounted.workspace)], stderr=err,
                                 stdout=subprocess.DEVNULL, env={**clean_env(), "MEMFS_STATE_DIR": str(mounted.state)})
    try:
        assert wait_until(lambda: "reconciled" in log.read_text(), timeout=60), log.read_text()
        make_backlog(mounted, 1500)
        serve.send_signal(signal.SIGTERM)
        serve.wait(timeout=60)
    finally:
        if serve.poll() is None:
            serve.kill()
            serve.wait()
    said = log.read_text().splitlines()[-1]
    assert re.fullmatch(rf"stopped; \d+ passages wait for an embedding: the mount on {re.escape(str(mounted.mnt))} "
                        rf"\(pid {mounted.pid}\), still running, embeds them", said), said


def test_memfs_index_says_the_mount_is_already_embedding_the_backlog(mounted) -> None:
    env = {"MEMFS_STATE_DIR": str(mounted.state)}
    said = (rf"^the mount on {re.escape(str(mounted.mnt))} \(pid {mounted.pid}\) is already embedding the \d+ passages "
            r"waiting: this waits until they are done \(stopping it leaves them to it; `memfs status` shows how far")
    for tag, verbose in (("a", ()), ("b", ("-v",))):  # the fast path, then click's
        make_backlog(mounted, 300, tag)
        out = memfs_cli(*verbose, "index", "-w", str(mounted.workspace), env=env, timeout=300)
        assert out.returncode == 0, out.stderr
        assert re.search(said, out.stderr, re.MULTILINE), out.stderr
        assert out.stdout.endswith(" 0 pending\n"), out.stdout
    out = memfs_cli("index", "-w", str(mounted.workspace), env=env)  # nothing waits: nothing to say
    assert out.returncode == 0 and "already embedding" not in out.stderr, out.stderr
