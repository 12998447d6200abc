"""The version store and the history as Memory keeps it: appends stored as their new bytes,
rewrites whole, names unique and ordered, retention that never loses the newest version nor
breaks the chains the survivors stand on, deletions, privacy, restore, forgetting on purpose."""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from pathlib import Path

import apsw
import pytest
from conftest import history_leaks, write
from mounts import memfs_cli

from memfs.history.provenance import BESIDE, CLI, Provenance
from memfs.history.store import MAX_CHAIN, HistoryError, HistoryStore, version_name
from memfs.memory import VersionsError

WHO = Provenance(CLI, 1000, 42, "pytest")
NS = 1_000_000_000


def test_an_append_is_stored_as_its_new_bytes_and_every_version_reads_back_exactly(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    text = b""
    kept = []
    for i in range(300):
        text += f"- {i:04d} the ferry to Hydra leaves at {i % 24:02d}:15, pack the blue bag {os.urandom(8).hex()}\n".encode()
        version = store.add("memory/2026-11-22.md", text, (1_800_000_000 + i) * NS, WHO)
        assert version is not None and version.size == len(text)
        kept.append((version, text))
    for version, content in kept[::37] + kept[-1:]:
        assert store.content(version.blob) == content
        assert version.sha256 == hashlib.sha256(content).hexdigest()
    # 300 versions of a growing log take less than twice the log itself (whole copies would take 150x).
    assert store.size_bytes() < 2 * len(text)
    assert len(store.versions("memory/2026-11-22.md")) == 300


def test_unchanged_content_is_not_a_new_version_and_a_rewrite_is_kept_whole(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    first = store.add("MEMORY.md", b"# Memory\n- a\n", 1_800_000_000 * NS, WHO)
    assert first is not None
    assert store.add("MEMORY.md", b"# Memory\n- a\n", 1_800_000_001 * NS, WHO) is None
    rewritten = store.add("MEMORY.md", b"# Memory\n- b (summarised)\n", 1_800_000_002 * NS, WHO)
    assert rewritten is not None and store.content(rewritten.blob) == b"# Memory\n- b (summarised)\n"
    back = store.add("MEMORY.md", b"# Memory\n- a\n", 1_800_000_003 * NS, WHO)  # the same bytes again: one blob
    assert back is not None and back.blob == first.blob and store.content(back.blob) == b"# Memory\n- a\n"
    empty = store.add("MEMORY.md", b"", 1_800_000_004 * NS, WHO)  # truncated to nothing is a version too
    assert empty is not None and empty.size == 0 and store.content(empty.blob) == b""


def test_version_names_are_unique_within_a_second_and_sort_in_order(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    moment = 1_795_000_000 * NS + 123
    names = [store.add("memory/notes.jsonl", f"{i}\n".encode(), moment, WHO).name for i in range(12)]  # type: ignore[union-attr]
    assert names[0] == time.strftime("%Y-%m-%dT%H-%M-%SZ", time.gmtime(1_795_000_000)) + ".jsonl"
    assert len(set(names)) == 12 and names[1].endswith("_v000002.jsonl") and sorted(names) == names
    assert [v.name for v in store.versions("memory/notes.jsonl")] == names
    # A clock that steps back does not reorder them.
    late = store.add("memory/notes.jsonl", b"late\n", moment - 3600 * NS, WHO)
    assert late is not None and late.time_ns >= moment
    assert version_name("README", moment, None).endswith("Z")
    assert version_name("a.md", moment, names[0].replace(".jsonl", ".md")).endswith("Z_v000002.md")
    # A name freed by pruning is not handed to other bytes: counting goes on from the newest.
    store.prune(moment + 3600 * NS, 1 << 40)
    assert [v.name for v in store.versions("memory/notes.jsonl")] == [late.name]
    assert store.add("memory/notes.jsonl", b"after\n", moment, WHO).name > late.name  # type: ignore[union-attr]


def test_retention_drops_old_and_oldest_versions_but_never_a_files_newest(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    day = 86_400 * NS
    now = 1_800_000_000 * NS
    log = b""
    for i in range(50):  # an append chain over 50 days
        log += f"- day {i}: {os.urandom(200).hex()}\n".encode()
        store.add("memory/log.md", log, now - (50 - i) * day, WHO)
    store.add("MEMORY.md", b"old curated text\n", now - 100 * day, WHO)  # a file's only version, very old
    removed = store.prune(now - 20 * day, 1 << 40)
    assert removed == 29  # those replaced more than 20 days ago (a version ages from its replacement)
    assert store.versions("MEMORY.md")[0].size == len(b"old curated text\n")  # the newest is never pruned
    survivors = store.versions("memory/log.md")
    assert len(survivors) == 21
    # Text that stood for 100 days and was clobbered today is kept as long as any other.
    store.add("MEMORY.md", b"clobbered\n", now, WHO)
    assert store.prune(now - 20 * day, 1 << 40) == 0
    assert [v.size for v in store.versions("MEMORY.md")] == [len(b"old curated text\n"), len(b"clobbered\n")]
    for version in survivors:  # the chain they stood on was cut: each still reads back whole
        content = store.content(version.blob)
        assert hashlib.sha256(content).hexdigest() == version.sha256
    assert store.content(survivors[-1].blob) == log
    # Now by size: the oldest go first until the store fits; the newest of each file stays.
    store.prune(0, 30_000)
    assert store.size_bytes() <= 30_000 or len(store.versions("memory/log.md")) == 1
    assert store.content(store.versions("memory/log.md")[-1].blob) == log
    assert store.versions("MEMORY.md")


def test_long_append_chains_are_cut_so_reading_stays_bounded(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    text = b""
    for i in range(MAX_CHAIN + 5):
        text += b"x\n"
        store.add("memory/a.md", text, (1_800_000_000 + i) * NS, WHO)
    chains = [r[0] for r in store.conn.execute("SELECT chain FROM blobs ORDER BY id")]
    assert max(chains) <= MAX_CHAIN and chains[-1] < 10
    assert store.content(store.versions("memory/a.md")[-1].blob) == text


def test_a_prune_with_nothing_to_drop_reads_no_content_and_rewrites_no_chain(tmp_path: Path) -> None:
    # A mount prunes every 64 versions: with nothing old enough nor over the size limit, that
    # must not cost a pass over every content kept (which grows with the history).
    store = HistoryStore(tmp_path / "h.sqlite")
    text = b""
    for i in range(200):
        text += f"- {i:04d} a line of the day's log {os.urandom(6).hex()}\n".encode()
        store.add(f"memory/2026-01-{i % 20 + 1:02d}.md", text, (1_800_000_000 + i) * NS, WHO)
    statements: list[str] = []
    store.conn.setprofile(lambda sql, _: statements.append(sql))
    assert store.prune(1_700_000_000 * NS, 1 << 40) == 0
    store.conn.setprofile(None)
    assert not [s for s in statements if "blobs" in s], statements
    assert len(store.versions("memory/2026-01-01.md")) == 10


def test_memory_keeps_versions_of_changes_deletions_and_restores(workspace: Path, make_memory) -> None:
    memory = make_memory(workspace, embedding__provider="none")
    memory.index()
    original = (workspace / "MEMORY.md").read_bytes()
    write(workspace / "MEMORY.md", "# Memory\n- summarised away\n")
    memory.before_change("MEMORY.md")  # changed beside: kept before anything else happens
    versions = memory.versions()
    listed = versions.list("MEMORY.md")
    assert [versions.content(v) for v in listed] == [original, b"# Memory\n- summarised away\n"]
    # Taken by the index's scan of a workspace nothing watched (a newcomer read "changed beside
    # the mount" in the history of a workspace never mounted).
    assert listed[0].via == "scan" and listed[0].pid is None
    restored = versions.restore("MEMORY.md", listed[0].name, Provenance.this_process(CLI))
    assert restored is not None and restored.via == "cli" and restored.pid == os.getpid()
    assert (workspace / "MEMORY.md").read_bytes() == original
    assert versions.restore("MEMORY.md", listed[0].name, WHO) is None  # holds it already
    assert memory.search("summarised away", min_score=0).results == [] or all(
        "summarised" not in r.snippet for r in memory.search("summarised away", min_score=0).results)
    # Deleted: the history stays, and says when.
    (workspace / "MEMORY.md").unlink()
    memory.path_removed("MEMORY.md", WHO)
    assert [p for p, _ in versions.deleted()] == ["MEMORY.md"]
    assert versions.content(versions.list("MEMORY.md")[-1]) == original
    with pytest.raises(VersionsError, match="no version"):
        versions.get("MEMORY.md", "2020-01-01T00-00-00Z.md")


def test_a_version_after_a_change_does_not_wait_for_the_disk_one_before_a_change_does(workspace: Path,
                                                                                     make_memory) -> None:
    # What a file held before a change exists nowhere else: its version is on disk before the
    # change goes ahead (synchronous=FULL).  What it holds after one is in the file itself: its
    # version commits without waiting for the disk (NORMAL), a few ms less per close.
    memory = make_memory(workspace, embedding__provider="none")
    memory.index()
    store = memory.history.store
    modes: list[int] = []
    add = store.add

    def watched(*args, **kwargs):
        modes.append(store.conn.execute("PRAGMA synchronous").fetchone()[0])
        return add(*args, **kwargs)

    store.add = watched  # type: ignore[method-assign]
    write(workspace / "MEMORY.md", "# Memory\n- changed beside\n")
    memory.before_change("MEMORY.md")
    write(workspace / "MEMORY.md", "# Memory\n- rewritten through the mount\n")
    memory.file_changed("MEMORY.md", WHO)
    size = (workspace / "MEMORY.md").stat().st_size
    with open(workspace / "MEMORY.md", "a") as out:
        out.write("- and appended\n")
    memory.file_changed("MEMORY.md", WHO, size)
    assert modes == [2, 1, 1]  # FULL, then NORMAL for both after a change
    assert store.conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # and FULL again after them
    listed = memory.versions().list("MEMORY.md")
    assert memory.versions().content(listed[-1]) == b"# Memory\n- rewritten through the mount\n- and appended\n"
    assert len(listed) == 4  # the original, beside, rewritten, appended


def test_a_change_read_while_another_mount_writes_the_file_waits_for_that_mount(workspace: Path, make_memory) -> None:
    # `>` through another mount truncates at open and writes later: a watcher that looked before
    # the open, and reads after it, must not keep the empty file between (a race seen in CI).
    memory = make_memory(workspace, embedding__provider="none")
    history = memory.history
    rel = "memory/2026-11-19.md"
    write(workspace / rel, "- original\n")
    memory.file_changed(rel, WHO)
    open_elsewhere: set[str] = set()
    history.written_elsewhere = lambda path: path in open_elsewhere
    open_elsewhere.add(rel)
    write(workspace / rel, "")  # truncated by the other mount's open, not written yet
    memory.file_changed(rel)  # the watcher beside it
    assert [v.size for v in memory.versions().list(rel)] == [11]
    write(workspace / rel, "- written slowly\n")
    open_elsewhere.clear()  # closed: now a change beside the mount is kept as any other
    memory.file_changed(rel)
    assert [v.size for v in memory.versions().list(rel)] == [11, 17]


def test_a_watcher_in_the_same_process_never_takes_an_append_as_its_own(workspace: Path, make_memory) -> None:
    """memfs serve appends for an MCP server or the CLI, and its own watcher sees the file change:
    the version must name the writer, not "watcher" (a race seen in CI under load)."""
    import threading

    memory = make_memory(workspace, embedding__provider="none")
    memory.index()
    who = Provenance("mcp", 1000, 4242, "python3")
    done = threading.Event()
    rels: list[str] = []

    def watcher() -> None:  # what the daemon's watcher does at every change event, as fast as it can
        while not done.is_set():
            if rels:
                memory.file_changed(rels[0])

    thread = threading.Thread(target=watcher)
    rels.append(memory.append("first entry", who=who))
    thread.start()
    try:
        for i in range(40):
            memory.append(f"entry {i} of the race", who=who)
    finally:
        done.set()
        thread.join()
    listed = memory.versions().list(rels[0])
    assert len(listed) == 41 and all(v.via == "mcp" for v in listed), [(v.via, v.size) for v in listed]


def test_a_shared_reader_sees_no_history_of_private_files(workspace: Path, make_memory) -> None:
    memory = make_memory(workspace, embedding__provider="none")
    write(workspace / "memory" / "2026-11-22.md", "- public note\n")
    memory.index()
    memory.file_changed("MEMORY.md", WHO)
    shared = memory.versions("shared")
    assert "MEMORY.md" not in shared.paths() and "memory/2026-11-22.md" in shared.paths()
    with pytest.raises(VersionsError) as private:
        shared.list("MEMORY.md")
    with pytest.raises(VersionsError) as missing:
        shared.list("memory/never.md")
    assert str(private.value).replace("MEMORY.md", "X") == str(missing.value).replace("memory/never.md", "X")
    with pytest.raises(VersionsError, match="no history"):
        shared.restore("MEMORY.md", memory.versions().list("MEMORY.md")[0].name, WHO)
    public = shared.list("memory/2026-11-22.md")[0].name
    assert shared.restore("memory/2026-11-22.md", public, WHO) is None  # it holds that already
    assert "history_versions" not in memory.status(mode="shared")
    assert memory.status()["history_versions"] >= 2
    # MEMORY.md moved to a public name and straight back: its text stays out of the shared view,
    # under the public name too (whatever content a private file has had is private).
    secret = (workspace / "MEMORY.md").read_bytes()
    os.rename(workspace / "MEMORY.md", workspace / "memory" / "old.md")
    memory.path_moved("MEMORY.md", "memory/old.md", WHO)
    os.rename(workspace / "memory" / "old.md", workspace / "MEMORY.md")
    memory.path_moved("memory/old.md", "MEMORY.md", WHO)
    assert memory.versions().content(memory.versions().list("memory/old.md")[0]) == secret
    assert "memory/old.md" in dict(memory.versions().deleted())
    with pytest.raises(VersionsError, match="no history"):
        shared.list("memory/old.md")
    assert "memory/old.md" not in shared.paths() and "memory/old.md" not in dict(shared.deleted())
    # ... even once MEMORY.md's own copies of that text are pruned.
    write(workspace / "MEMORY.md", "# Memory\n- rewritten since\n")
    memory.file_changed("MEMORY.md", WHO)
    memory.history.store.prune(time.time_ns() + 10**12, 1 << 40)
    assert secret not in [memory.versions().content(v) for v in memory.versions().list("MEMORY.md")]
    with pytest.raises(VersionsError, match="no history"):
        shared.list("memory/old.md")
    # A hard link of MEMORY.md under a public name: what is written through it stays private.
    os.link(workspace / "MEMORY.md", workspace / "memory" / "linked.md")
    with open(workspace / "memory" / "linked.md", "a") as linked:
        linked.write("- written through the link\n")
    memory.file_changed("memory/linked.md", WHO)
    assert memory.versions().list("memory/linked.md")
    with pytest.raises(VersionsError, match="no history"):
        shared.list("memory/linked.md")
    # A public file keeps its public versions.
    write(workspace / "memory" / "2026-11-22.md", "- public note\n- more\n")
    memory.file_changed("memory/2026-11-22.md", WHO)
    assert len(shared.list("memory/2026-11-22.md")) == 2


def test_a_history_made_for_another_workspace_is_set_aside(tmp_path: Path, make_memory) -> None:
    from memfs.history.keeper import History

    class Settings:
        keep_days, max_mb = 90.0, 512.0

    class Cfg:
        workspace = tmp_path
        history = Settings()

        class index:
            extra_paths: list[str] = []

    path = tmp_path / "h.sqlite"
    mine = json.dumps({"path": "/a", "dev": 1, "ino": 2})
    first = History(Cfg(), path, mine)  # type: ignore[arg-type]
    first.store.add("MEMORY.md", b"secret of workspace a\n", 1_800_000_000 * NS, BESIDE)
    first.close()
    other = History(Cfg(), path, json.dumps({"path": "/b", "dev": 1, "ino": 3}))  # type: ignore[arg-type]
    assert other.store.paths() == []
    assert list(tmp_path.glob("h.sqlite.other-workspace-*"))
    other.close()
    moved = History(Cfg(), path, json.dumps({"path": "/c", "dev": 1, "ino": 3}))  # type: ignore[arg-type]
    assert moved.store.get_meta("workspace") is not None  # the same folder moved: kept
    moved.close()


def test_a_version_that_cannot_be_kept_does_not_undo_or_unindex_the_change(
        workspace: Path, make_memory, monkeypatch, caplog) -> None:
    memory = make_memory(workspace, embedding__provider="none")
    memory.index()
    assert memory.history is not None

    def broken(*args, **kwargs):
        raise apsw.FullError("database or disk is full")

    monkeypatch.setattr(memory.history.store, "add", broken)
    write(workspace / "memory" / "2026-11-23.md", "- the heron nests by the north pier\n")
    outcome = memory.file_changed("memory/2026-11-23.md", WHO)
    assert outcome.action == "indexed"
    assert "no version of memory/2026-11-23.md was kept" in caplog.text and "disk is full" in caplog.text
    (workspace / "memory" / "2026-11-23.md").unlink()
    monkeypatch.setattr(memory.history.store, "deleted", broken)
    assert memory.path_removed("memory/2026-11-23.md", WHO) == 1


SECRET = b"the vault code is OSPREY-7731"


def test_forgetting_a_version_inside_an_append_chain_keeps_every_other_version_exact(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    log = "memory/2026-11-22.md"
    texts = [b"- 08:00 coffee\n"]
    texts.append(texts[-1] + b"- 09:00 standup\n")
    texts.append(texts[-1] + b"- " + SECRET + b"\n")  # the mistake, appended
    texts.append(texts[-1] + b"- 10:00 review\n")  # appended on top of it before anyone noticed
    texts.append(texts[1] + b"- 10:00 review\n")  # the mistake cut out
    texts.append(texts[-1] + b"- 11:00 lunch\n")
    made = [store.add(log, t, (1_800_000_000 + i) * NS, WHO) for i, t in enumerate(texts)]
    assert all(v is not None for v in made)
    other = store.add("memory/other.md", b"unrelated\n", 1_800_000_010 * NS, WHO)
    assert other is not None
    chain = store.conn.execute("SELECT base FROM blobs WHERE id = ?", (made[3].blob,)).fetchone()[0]
    assert chain == made[2].blob  # the later version is stored as its new bytes on top of the mistake

    # Forget just the version that made the mistake: the one standing on it reads back the same.
    gone, emptied = store.forget([made[2].id], 1_800_000_100 * NS, WHO)
    assert emptied and [(f.path, f.name, f.via, f.pid) for f in gone] == [(log, made[2].name, "cli", 42)]
    assert [v.name for v in store.versions(log)] == [made[i].name for i in (0, 1, 3, 4, 5)]
    for i in (0, 1, 3, 4, 5):
        assert store.content(store.version(log, made[i].name).blob) == texts[i]  # type: ignore[union-attr]
    assert store.version(log, made[2].name) is None
    assert [f.name for f in store.forgotten(log)] == [made[2].name]

    # Every version that holds the text, whatever its name, then no trace of it in the file.
    holding = store.containing(SECRET)
    assert [(v.path, v.name) for v in holding] == [(log, made[3].name)]
    gone, emptied = store.forget([v.id for v in holding], 1_800_000_101 * NS, WHO)
    assert emptied and len(gone) == 1 and store.containing(SECRET) == []
    assert all(SECRET not in store.content(b) for (b,) in store.conn.execute("SELECT id FROM blobs").fetchall())
    assert history_leaks(tmp_path / "h.sqlite", SECRET) == []
    for i in (0, 1, 4, 5):
        assert store.content(store.version(log, made[i].name).blob) == texts[i]  # type: ignore[union-attr]
    assert store.content(store.version("memory/other.md", other.name).blob) == b"unrelated\n"  # type: ignore[union-attr]
    assert [f.name for f in store.forgotten(log)] == [made[2].name, made[3].name]
    # A forgotten name is never given to other bytes (the kernel may still cache it).
    store.forget([store.latest(log).id], 1_800_000_102 * NS, WHO)  # type: ignore[union-attr]
    again = store.add(log, b"rewritten\n", (1_800_000_005) * NS, WHO)
    assert again is not None and again.name > made[5].name


def test_a_text_is_found_across_the_seam_of_an_append_and_under_any_name(tmp_path: Path) -> None:
    store = HistoryStore(tmp_path / "h.sqlite")
    half = len(SECRET) // 2
    first = store.add("memory/a.md", b"- part " + SECRET[:half], 1_800_000_000 * NS, WHO)
    second = store.add("memory/a.md", b"- part " + SECRET + b"\n", 1_800_000_001 * NS, WHO)  # stored as its tail
    copied = store.add("MEMORY.md", b"- part " + SECRET + b"\n", 1_800_000_002 * NS, WHO)  # the same bytes: one blob
    gone = store.add("memory/gone.md", SECRET, 1_800_000_003 * NS, WHO)
    assert first and second and copied and gone and copied.blob == second.blob
    store.deleted("memory/gone.md", 1_800_000_004 * NS, WHO)
    # A version pruned earlier left its bytes in a free corner of a page: forgetting finds those too.
    for i in range(20):  # neighbours on the same page, so pruning frees a cell, not the page
        store.add(f"memory/f{i}.md", os.urandom(100).hex().encode(), 1_700_000_000 * NS, WHO)
        if i == 10:
            store.add("memory/pruned.md", b"- old " + SECRET + b" " + os.urandom(300).hex().encode(),
                      1_700_000_000 * NS, WHO)
    store.add("memory/pruned.md", b"- rewritten\n", 1_700_000_001 * NS, WHO)
    assert store.prune(1_750_000_000 * NS, 1 << 40) == 1
    assert history_leaks(tmp_path / "h.sqlite", SECRET)  # pruned, yet still in the file's bytes
    found = store.containing(SECRET)
    assert [(v.path, v.name) for v in found] == [("MEMORY.md", copied.name), ("memory/a.md", second.name),
                                                 ("memory/gone.md", gone.name)]
    assert store.containing(SECRET[:half]) != found and len(store.containing(SECRET[:half])) == 4
    with pytest.raises(HistoryError):
        store.containing(b"")
    store.forget([v.id for v in found], 1_800_000_010 * NS, WHO)
    assert "memory/gone.md" not in store.paths() and store.deleted_paths() == []
    assert history_leaks(tmp_path / "h.sqlite", SECRET) == []


def test_forgetting_through_memory_is_for_the_main_mode_and_says_what_it_leaves(workspace: Path, make_memory) -> None:
    memory = make_memory(workspace, embedding__provider="none")
    write(workspace / "MEMORY.md", "# Memory\n- " + SECRET.decode() + "\n")
    write(workspace / "memory" / "2026-11-22.md", "- public note\n")
    memory.index()
    write(workspace / "memory" / "2026-11-22.md", "- public note\n- " + SECRET.decode() + "\n")
    memory.file_changed("memory/2026-11-22.md", WHO)
    write(workspace / "memory" / "2026-11-22.md", "- public note\n")
    memory.file_changed("memory/2026-11-22.md", WHO)
    shared, main = memory.versions("shared"), memory.versions()
    assert any(SECRET in shared.content(v) for v in shared.list("memory/2026-11-22.md"))  # what this fixes
    # A shared reader may neither forget nor probe (would MEMORY.md's versions hold a text?).
    for attempt in (lambda: shared.to_forget(None, [], SECRET.decode()),
                    lambda: shared.to_forget("memory/2026-11-22.md", [shared.list("memory/2026-11-22.md")[0].name], None),
                    lambda: shared.forget(main.list("MEMORY.md"), WHO)):
        with pytest.raises(VersionsError, match="shared mode may not forget"):
            attempt()
    chosen = main.to_forget(None, [], SECRET.decode())
    assert sorted({v.path for v in chosen}) == ["MEMORY.md", "memory/2026-11-22.md"]
    done = main.forget(chosen, WHO, SECRET.decode())
    assert len(done.forgotten) == 2 and done.emptied and done.held_now == ["MEMORY.md"] and done.still_held == []
    assert all(SECRET not in shared.content(v) for v in shared.list("memory/2026-11-22.md"))
    assert [f.name for f in main.forgotten("memory/2026-11-22.md")] == [chosen[1].name]
    assert shared.forgotten("memory/2026-11-22.md") == [] and shared.forgotten("MEMORY.md") == []
    with pytest.raises(VersionsError, match="no history"):
        main.list("MEMORY.md")  # its only version held the text; the file itself is untouched
    assert SECRET in (workspace / "MEMORY.md").read_bytes()
    assert history_leaks(memory.paths.history, SECRET) == []
    # One version by name, whose bytes another version holds too: that one is named, not touched.
    write(workspace / "memory" / "2026-11-23.md", "- copied\n")
    memory.file_changed("memory/2026-11-23.md", WHO)
    write(workspace / "memory" / "2026-11-24.md", "- copied\n")
    memory.file_changed("memory/2026-11-24.md", WHO)
    one = main.to_forget("memory/2026-11-23.md", [main.list("memory/2026-11-23.md")[0].name], None)
    done = main.forget(one, WHO)
    assert [v.path for v in done.still_held] == ["memory/2026-11-24.md"]
    assert done.held_now == ["memory/2026-11-23.md"]


def test_the_cli_lists_what_it_forgets_asks_first_and_records_it(workspace: Path, state_dir: Path) -> None:
    env = {"MEMFS_STATE_DIR": str(state_dir), "MEMFS_NO_DAEMON": "1"}
    ws = ["-w", str(workspace), "--set", "embedding.provider=none"]
    write(workspace / "memory" / "2026-11-22.md", "- note\n- " + SECRET.decode() + "\n")
    assert memfs_cli("index", *ws, env=env).returncode == 0
    write(workspace / "memory" / "2026-11-22.md", "- note\n")
    assert memfs_cli("index", *ws, env=env).returncode == 0
    listed = json.loads(memfs_cli("history", "memory/2026-11-22.md", "--json", *ws, env=env).stdout)["versions"]
    assert len(listed) == 2
    # Not a terminal and no --yes: what would go is listed (names, never content), nothing goes.
    asked = memfs_cli("history", "forget", "--containing", SECRET.decode(), *ws, env=env, input="y\n")
    assert asked.returncode == 1 and "pass --yes" in asked.stderr and "Traceback" not in asked.stderr
    assert f"memory/2026-11-22.md  {listed[0]['version']}" in asked.stdout
    assert SECRET.decode() not in asked.stdout + asked.stderr
    assert len(json.loads(memfs_cli("history", "memory/2026-11-22.md", "--json", *ws, env=env).stdout)["versions"]) == 2
    for bad in (["forget"], ["forget", "memory/2026-11-22.md"], ["forget", "memory/2026-11-22.md", "x", "--containing", "a"],
                ["forget", "--containing", ""], ["memory/2026-11-22.md", "--containing", "a"]):
        out = memfs_cli("history", *bad, *ws, env=env)
        assert out.returncode == 2 and "Error:" in out.stderr and "Traceback" not in out.stderr, bad
    refused = memfs_cli("--mode", "shared", "history", "forget", "--containing", "note", "--yes", *ws, env=env)
    assert refused.returncode == 1 and "may not forget" in refused.stderr and "MEMORY.md" not in refused.stdout
    done = memfs_cli("history", "forget", "memory/2026-11-22.md", listed[0]["version"], "--yes", *ws, env=env)
    assert done.returncode == 0 and f"memory/2026-11-22.md  {listed[0]['version']}" in done.stdout
    assert "memfs index --rebuild" in done.stderr  # the index is not the history: it says so
    after = memfs_cli("history", "memory/2026-11-22.md", *ws, env=env).stdout
    assert "1 version, oldest first; 1 forgotten" in after
    # (columns are as wide as the longest name: a second version in the same second is _v000002)
    assert re.search(rf"^{re.escape(listed[0]['version'])} +forgotten ", after, re.M) and "via cli" in after
    record = json.loads(memfs_cli("history", "memory/2026-11-22.md", "--json", *ws, env=env).stdout)["forgotten"]
    assert [(r["version"], r["uid"], r["via"]) for r in record] == [(listed[0]["version"], os.getuid(), "cli")]
    again = memfs_cli("history", "forget", "--containing", SECRET.decode(), *ws, env=env)
    assert again.returncode == 0 and again.stdout.startswith("nothing to forget")


def test_a_diff_cuts_at_newlines_only_and_shows_stray_bytes_as_marks(workspace: Path, make_memory) -> None:
    """str.splitlines also cuts at form feeds and vertical tabs: the hunk headers then counted
    lines the file does not have, and raw control bytes reached the terminal."""
    memory = make_memory(workspace, embedding__provider="none")
    log = workspace / "memory" / "2026-11-20.md"
    write(log, "- first\n- second\n")
    memory.file_changed("memory/2026-11-20.md")
    with open(log, "ab") as f:
        f.write(b"ff\x0cpage\nvt\x0bsplit \x1b[31mred\n")
    memory.file_changed("memory/2026-11-20.md")
    versions = memory.versions()
    diff = versions.diff("memory/2026-11-20.md", None, versions.list("memory/2026-11-20.md")[-1].name)
    assert "@@ -1,2 +1,4 @@" in diff, diff
    assert "+ff\ufffdpage\n" in diff and "+vt\ufffdsplit red\n" in diff
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f]", diff) and "No newline" not in diff
