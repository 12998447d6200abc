"""Sync message ids on PostgreSQL: the hosts of one tenant (here two copies of one workspace,
each host with its own disk and state directory, one login) store a ClawGPT message once,
whichever host it comes through, one after the other or at the same moment; ids the files held
before count too; a shared-mode writer learns nothing of private day files' ids."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from mounts import clean_env, memfs_cli

psycopg = pytest.importorskip("psycopg")

from memfs.workspace import init_workspace  # noqa: E402

DAY = 86_400_000
T0 = 1707123456789  # 2024-02-05 08:57:36 UTC


def message(i: int, ts: int = T0) -> dict:
    return {"id": f"chat1-{i}", "chatId": "chat1", "chatTitle": "Trip", "role": "user" if i % 2 == 0 else "assistant",
            "content": f"message number {i} about the Porto trip", "timestamp": ts}


def envelope(messages: list[dict]) -> str:
    return "[CLAWGPT-SYNC]\n" + json.dumps({"messages": messages, "deviceId": "phone", "syncedAt": T0})


def _hosts(tmp_path: Path, pg_index, **extra: str) -> tuple[dict, dict, str]:
    """Host A's workspace and host B's copy of it (same .memfs-id), one login."""
    a = tmp_path / "hostA" / "ws"
    init_workspace(a)
    dsn = pg_index(a, "main")
    b = tmp_path / "hostB" / "ws"
    shutil.copytree(a, b)
    settings = ["--set", "index.backend=postgres", "--set", f"index.dsn={dsn}",
                *[x for k, v in extra.items() for x in ("--set", f"{k}={v}")]]
    return ({"ws": a, "args": ["-w", str(a), *settings], "env": {"MEMFS_STATE_DIR": str(tmp_path / "stateA")}},
            {"ws": b, "args": ["-w", str(b), *settings], "env": {"MEMFS_STATE_DIR": str(tmp_path / "stateB")}}, dsn)


def _sync(host: dict, messages: list[dict], *more: str) -> dict:
    out = memfs_cli("sync", "--json", *host["args"], *more, env=host["env"], input=envelope(messages))
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def _ids(ws: Path) -> list[str]:
    return sorted(json.loads(line)["id"] for f in (ws / "clawgpt-memory").glob("*.jsonl")
                  for line in f.read_text().splitlines() if line.strip())


def _rows(dsn: str) -> list[tuple[str, str, bool]]:
    with psycopg.connect(dsn) as conn:
        return conn.execute("SELECT message_id, path, private FROM memfs.sync_messages ORDER BY message_id").fetchall()


def test_a_message_synced_through_two_hosts_is_stored_once(tmp_path: Path, pg_index) -> None:
    a, b, dsn = _hosts(tmp_path, pg_index)
    assert _sync(a, [message(0), message(1)])["stored"] == 2
    again = _sync(b, [message(1), message(2)])
    assert (again["stored"], again["duplicates"]) == (1, 1), again
    assert _ids(a["ws"]) == ["chat1-0", "chat1-1"] and _ids(b["ws"]) == ["chat1-2"]
    assert [r[0] for r in _rows(dsn)] == ["chat1-0", "chat1-1", "chat1-2"]
    assert {r[1] for r in _rows(dsn)} == {"clawgpt-memory/2024-02-05.jsonl"}
    # A batch refused (a day file that cannot be written) claims nothing: it can come again.
    (b["ws"] / "clawgpt-memory" / "2024-02-06.jsonl").mkdir()
    refused = memfs_cli("sync", *b["args"], env=b["env"], input=envelope([message(3, T0 + DAY)]))
    assert refused.returncode == 1 and "not a regular file" in refused.stderr, refused.stderr
    assert "chat1-3" not in [r[0] for r in _rows(dsn)]
    assert _sync(a, [message(3, T0 + DAY)])["stored"] == 1


def test_two_hosts_syncing_one_batch_at_once_store_it_once(tmp_path: Path, pg_index) -> None:
    a, b, dsn = _hosts(tmp_path, pg_index)
    batch = [message(i, T0 + (i % 3) * DAY) for i in range(30)]
    running = [subprocess.Popen([sys.executable, "-m", "memfs", "sync", "--json", *host["args"]],
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**clean_env(), **host["env"]}) for host in (a, b)]
    answers = []
    for proc in running:
        out, err = proc.communicate(envelope(batch), timeout=120)
        assert proc.returncode == 0, err
        answers.append(json.loads(out))
    assert sum(x["stored"] for x in answers) == 30 and sum(x["duplicates"] for x in answers) == 30, answers
    stored = _ids(a["ws"]) + _ids(b["ws"])
    assert sorted(stored) == sorted(m["id"] for m in batch)  # each once, on one host or the other
    assert len(_rows(dsn)) == 30


def test_ids_the_files_held_before_postgres_count(tmp_path: Path, pg_index) -> None:
    a, b, dsn = _hosts(tmp_path, pg_index)
    # Stored on host A while its index was SQLite: only its files know the id.
    before = memfs_cli("sync", "-w", str(a["ws"]), env=a["env"], input=envelope([message(5)]))
    assert before.returncode == 0, before.stderr
    assert _sync(a, [message(6)])["stored"] == 1  # A's next sync on postgres records what its files hold
    assert [r[0] for r in _rows(dsn)] == ["chat1-5", "chat1-6"]
    assert _sync(b, [message(5)])["duplicates"] == 1
    assert _ids(b["ws"]) == []


def test_a_shared_writer_learns_nothing_of_private_day_files(tmp_path: Path, pg_index) -> None:
    a, b, dsn = _hosts(tmp_path, pg_index, **{"privacy.private_paths": "clawgpt-memory/2024-02-05.jsonl"})
    assert _sync(a, [message(0)])["stored"] == 1
    assert _rows(dsn) == [("chat1-0", "clawgpt-memory/2024-02-05.jsonl", True)]
    # The same id on a public day, through B in shared mode: as its files say, not a duplicate.
    shared = _sync(b, [message(0, T0 + DAY), message(1, T0 + DAY)], "--mode", "shared")
    assert (shared["stored"], shared["duplicates"]) == (2, 0), shared
    # And a public id stored through A is a duplicate for the shared writer.
    assert _sync(a, [message(2, T0 + 2 * DAY)])["stored"] == 1
    assert _sync(b, [message(2, T0 + 2 * DAY)], "--mode", "shared")["duplicates"] == 1
