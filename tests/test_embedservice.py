"""The per-user embedding service: one model for every process of a user, started on first use,
started again when it dies, gone when idle, and only its user's."""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from mounts import clean_env, wait_until

from memfs.config import EmbeddingConfig
from memfs.index.embedding.choice import make_provider
from memfs.index.embedding.providers import LocalProvider
from memfs.mounttable import alive

TEXTS = ["The ferry to Hydra leaves at nine.", "Caroline went to the LGBTQ support group on Tuesday.",
         "penicillin allergy " * 40]

# A process that embeds through the service and says what it got: the service's pid, a digest of
# the vectors, and whether it loaded the model's runtime itself.
CLIENT = """
import hashlib, json, sys
from memfs.config import EmbeddingConfig
from memfs.index.embedding.choice import make_provider
from memfs.index.embedding.client import service_record
cfg = EmbeddingConfig()
rows = make_provider(cfg).embed(json.loads(sys.argv[1]))
print(json.dumps({"pid": service_record(cfg)["pid"], "vectors": rows.tobytes().hex(),
                  "onnxruntime": "onnxruntime" in sys.modules}))
"""


def service_pids(folder: Path) -> list[int]:
    pids = []
    for record in folder.glob("embed-*.json"):
        try:
            pid = int(json.loads(record.read_text())["pid"])
            os.kill(pid, 0)
        except (OSError, ValueError, KeyError):
            continue
        pids.append(pid)
    return pids


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A runtime folder of this test's own (XDG_RUNTIME_DIR), its services stopped afterwards."""
    base = tmp_path / "run"
    base.mkdir(mode=0o700)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    yield base / "memfs"
    for pid in service_pids(base / "memfs"):
        os.kill(pid, signal.SIGKILL)


def run_client(texts: list[str]) -> dict:
    out = subprocess.run([sys.executable, "-c", CLIENT, json.dumps(texts)], capture_output=True, text=True,
                         env=clean_env(), timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def in_process(texts: list[str]) -> np.ndarray:
    return make_provider(EmbeddingConfig(service=False)).embed(texts)


def test_processes_share_one_service_that_gives_the_models_own_vectors(runtime: Path) -> None:
    # Four processes at once: one service starts (the lock decides), all four use it.
    procs = [subprocess.Popen([sys.executable, "-c", CLIENT, json.dumps(TEXTS)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=clean_env()) for _ in range(4)]
    answers = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        answers.append(json.loads(out))
    assert len({a["pid"] for a in answers}) == 1
    assert service_pids(runtime) == [answers[0]["pid"]]
    assert not any(a["onnxruntime"] for a in answers), "a client loaded the model itself"
    expected = in_process(TEXTS)
    for answer in answers:
        got = np.frombuffer(bytes.fromhex(answer["vectors"]), dtype=np.float32).reshape(expected.shape)
        np.testing.assert_allclose(got, expected, atol=1e-6)
    assert (runtime.stat().st_mode & 0o777) == 0o700
    sock = next(runtime.glob("embed-*.sock"))
    assert (sock.stat().st_mode & 0o777) == 0o600


def test_a_killed_service_is_started_again_and_nothing_is_lost(runtime: Path) -> None:
    provider = make_provider(EmbeddingConfig())
    first = provider.embed(TEXTS[:2])
    [pid] = service_pids(runtime)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not alive(pid), timeout=10)
    # The same provider (its pooled connection now dead) embeds again through a new service.
    again = provider.embed(TEXTS[:2])
    np.testing.assert_allclose(again, first, atol=1e-6)
    [new_pid] = service_pids(runtime)
    assert new_pid != pid


def test_the_service_exits_when_idle_and_the_next_request_starts_it(runtime: Path) -> None:
    provider = make_provider(EmbeddingConfig(service_idle_s=1))
    provider.embed(["first"])
    [pid] = service_pids(runtime)
    assert wait_until(lambda: not service_pids(runtime), timeout=20)
    assert not list(runtime.glob("embed-*.sock"))  # withdrawn, not left for a client to hang on
    provider.embed(["second"])
    [new_pid] = service_pids(runtime)
    assert new_pid != pid


def test_a_runtime_folder_others_can_enter_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    base = tmp_path / "run"
    (base / "memfs").mkdir(parents=True)
    os.chmod(base / "memfs", 0o755)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    with caplog.at_level(logging.WARNING):
        provider = make_provider(EmbeddingConfig())
    assert isinstance(provider, LocalProvider)  # the model in this process, not a planted socket
    assert "is not a private folder" in caplog.text
    assert not list((base / "memfs").iterdir())
    from memfs.index.embedding.client import service_record
    from memfs.render.status import render_status

    info = {"workspace": "w", "agent": "main", "files": 0, "skipped": 0, "chunks": 0, "pending": 0,
            "provider": "local", "embedding_service": service_record(EmbeddingConfig())}
    assert "model in:   each process that embeds (no embedding service:" in render_status(info)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to act as another user")
def test_another_user_gets_nothing_from_the_service(monkeypatch: pytest.MonkeyPatch) -> None:
    # Under /tmp itself: pytest's own folders are closed to other users all the way up.
    base = Path(tempfile.mkdtemp(prefix="memfs-rt-"))
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(base))
    runtime = base / "memfs"
    try:
        make_provider(EmbeddingConfig()).embed(["warm"])
        assert refused_to_nobody(runtime)
    finally:
        for pid in service_pids(runtime):
            os.kill(pid, signal.SIGKILL)
        shutil.rmtree(base, ignore_errors=True)


def refused_to_nobody(runtime: Path) -> bool:
    sock_path = str(next(runtime.glob("embed-*.sock")))
    # Even with the folder and the socket opened to everyone, the service checks who connects.
    os.chmod(runtime.parent, 0o755)
    os.chmod(runtime, 0o755)
    os.chmod(sock_path, 0o666)
    read, write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover (runs in the child)
        os.close(read)
        try:
            os.setgid(65534)
            os.setuid(65534)
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(10)
            sock.connect(sock_path)
            sock.sendall(json.dumps({"v": 1, "op": "embed", "texts": ["secret"]}).encode() + b"\n")
            os.write(write, sock.recv(100) or b"closed")
        except (ConnectionResetError, BrokenPipeError):  # closed before or with our request unread: refused
            os.write(write, b"closed")
        except OSError as exc:
            os.write(write, f"error {exc}".encode())
        os._exit(0)
    os.close(write)
    os.waitpid(child, 0)
    answer = os.read(read, 200)
    os.close(read)
    return answer == b"closed"


def test_the_service_keeps_no_text(runtime: Path) -> None:
    make_provider(EmbeddingConfig()).embed(["the vault code is 7731-zebra"])
    for path in runtime.iterdir():
        if path.is_file():
            assert b"zebra" not in path.read_bytes(), path


def test_with_the_service_off_the_model_is_loaded_here(runtime: Path) -> None:
    provider = make_provider(EmbeddingConfig(service=False))
    assert isinstance(provider, LocalProvider)
    provider.embed(["nothing asked of a service"])
    assert not service_pids(runtime)


def test_many_texts_come_back_in_their_order(runtime: Path) -> None:
    # More texts than one request carries: split, answered, put back in order.
    texts = [f"note {i}: the parcel for locker {i * 7} arrived" for i in range(150)]
    np.testing.assert_allclose(make_provider(EmbeddingConfig()).embed(texts), in_process(texts), atol=1e-6)


def maps_model_runtime(pid: int) -> bool:
    return "onnxruntime" in Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.fuse
def test_two_mounts_share_one_service_and_survive_it_being_killed(runtime: Path, tmp_path: Path,
                                                                  mount_factory) -> None:
    mounts = []
    for name in ("alpha", "beta"):
        ws = tmp_path / name
        shutil.copytree(Path(__file__).resolve().parent.parent / "workspace_template", ws)
        mounts.append(mount_factory(ws, mnt=tmp_path / f"mnt-{name}"))

    def found_by_meaning(m, query: str, path: str) -> bool:
        hits = m.search_json(query)["results"]
        return any(h["path"] == path and h["vector_score"] > 0.3 for h in hits)

    for i, m in enumerate(mounts):
        (m.mnt / "memory" / "2026-11-20.md").write_text(f"# Nov 20\n\n- Booked the dentist for the {i}th, crown repair.\n")
    for m in mounts:
        assert wait_until(lambda m=m: found_by_meaning(m, "tooth doctor appointment", "memory/2026-11-20.md"),
                          timeout=120)
    [pid] = service_pids(runtime)
    for m in mounts:
        assert not maps_model_runtime(m.pid), "a mount loaded the model itself"
    assert maps_model_runtime(pid)

    os.kill(pid, signal.SIGKILL)
    for i, m in enumerate(mounts):
        (m.mnt / "memory" / "2026-11-21.md").write_text(f"# Nov 21\n\n- Cat {i} needs a rabies shot at the vet.\n")
    for m in mounts:
        assert wait_until(lambda m=m: found_by_meaning(m, "vaccination for a cat", "memory/2026-11-21.md"), timeout=120)
    [new_pid] = service_pids(runtime)
    assert new_pid != pid
    for m in mounts:
        assert not maps_model_runtime(m.pid)


def test_status_says_where_the_model_is_without_loading_it(runtime: Path, workspace: Path, tmp_path: Path) -> None:
    env = {**clean_env(), "MEMFS_STATE_DIR": str(tmp_path / "state"), "MEMFS_NO_DAEMON": "1"}
    argv = [sys.executable, "-X", "importtime", "-m", "memfs", "-w", str(workspace), "status"]
    before = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert before.returncode == 0, before.stderr
    assert "the embedding service, not running" in before.stdout
    make_provider(EmbeddingConfig()).embed(["start it"])
    [pid] = service_pids(runtime)
    after = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=120)
    assert f"the embedding service, pid {pid}" in after.stdout
    imported = {line.split("|")[-1].strip() for line in after.stderr.splitlines() if "|" in line}
    assert not {"numpy", "onnxruntime", "tokenizers"} & imported


def test_a_stopped_service_is_given_up_on_in_seconds_and_used_again_when_it_resumes(
        runtime: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memfs.index.embedding import client as embedclient
    from memfs.index.embedding.providers import EmbeddingError

    monkeypatch.setattr(embedclient, "COOL_DOWN_S", 2.0)
    provider = make_provider(EmbeddingConfig())
    provider.embed(["warm"])
    [pid] = service_pids(runtime)
    os.kill(pid, signal.SIGSTOP)
    try:
        started = time.monotonic()
        with pytest.raises(EmbeddingError, match=f"kill -CONT {pid}"):
            provider.embed(["asked of a stopped service"])
        assert time.monotonic() - started < 60, "waited far past the heartbeat's silence"
        # Not asked again at once: a search meanwhile answers by keyword without waiting.
        started = time.monotonic()
        with pytest.raises(EmbeddingError, match="not asked again"):
            provider.embed(["again"])
        assert time.monotonic() - started < embedclient.STALL_S
    finally:
        os.kill(pid, signal.SIGCONT)
    time.sleep(2.5)
    np.testing.assert_allclose(provider.embed(["again"]), in_process(["again"]), atol=1e-6)
    assert service_pids(runtime) == [pid]  # the same service, resumed


def test_a_service_stopped_with_sigterm_withdraws_its_socket(runtime: Path) -> None:
    make_provider(EmbeddingConfig()).embed(["warm"])
    [pid] = service_pids(runtime)
    os.kill(pid, signal.SIGTERM)
    assert wait_until(lambda: not list(runtime.glob("embed-*.sock")) and not list(runtime.glob("embed-*.json")),
                      timeout=20)
    log = next(runtime.glob("embed-*.log")).read_text()
    assert "SIGTERM: stopping" in log and "terminate called" not in log
