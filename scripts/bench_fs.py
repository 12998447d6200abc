#!/usr/bin/env python3
"""The filesystem workload on a native directory and on a memfs mount, in one run, as ratios.

    python scripts/bench_fs.py [--files 2000] [--appends 5000] [--repeat 3] [--no-baselines]

Workload (each step timed, median of --repeat runs): create 2,000 files of 2 KiB; 5,000
open/append/close; stat of all; read of all; grep -r; ls -lR; rm -rf; a large sequential read of 256 MiB
(right after writing it, when only the backing file is cached; from the mount's page cache; and,
as root, from the disk with every cache dropped).  The mount runs with indexing on (local provider); the
workload files are plain files, and a second part measures memory files: 2 KiB appends to daily
logs, and the time from close() to the text being found by a search from another connection
(keyword side; then the vector side once embedded).

``--load N`` runs N busy loops beside all of it (agents run on busy machines); ``--poll-off``
adds a memfs mount without busy polling, to show what polling buys or costs.

The same workload also runs, in the same run, on reference passthroughs the mount issues
name: libfuse's passthrough_hp (the fastest C one, default options, built by the conformance
kit's ``passthrough_hp.sh``), pyfuse3's own example (examples/passthroughfs.py from the installed version's sdist,
fetched from PyPI, sha256-checked, with its 0 s entry/attr timeouts set to 1 s -- "tuned") and
libfuse's C low-level passthrough (passthrough_ll.c as shipped by libfuse3-dev, built with gcc,
``-o timeout=1``).  A baseline that cannot be fetched or built is skipped with a note.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import pyfuse3

from memfs.config import load_config
from memfs.memory import Memory


def timed(fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return time.perf_counter() - started


def workload(root: Path, files: int, appends: int) -> dict[str, float]:
    data = os.urandom(1024).hex().encode()[:2048]
    base = root / "bench"
    if base.exists():
        shutil.rmtree(base)
    (base / "sub").mkdir(parents=True)
    paths = [base / ("sub" if i % 2 else "") / f"f{i:05d}.txt" for i in range(files)]
    out: dict[str, float] = {}

    def create() -> None:
        for p in paths:
            with open(p, "wb") as handle:
                handle.write(data)

    def append() -> None:
        for i in range(appends):
            fd = os.open(paths[i % files], os.O_WRONLY | os.O_APPEND)
            os.write(fd, b"appended line of text\n")
            os.close(fd)

    def stat_all() -> None:
        for p in paths:
            os.lstat(p)

    def read_all() -> None:
        for p in paths:
            with open(p, "rb") as handle:
                handle.read()

    out["create"] = timed(create)
    out["append"] = timed(append)
    out["stat-all"] = timed(stat_all)
    out["read-all"] = timed(read_all)
    out["grep -r"] = timed(lambda: subprocess.run(["grep", "-r", "-c", "zzz-not-there", str(base)],
                                                  capture_output=True))
    out["ls -lR"] = timed(lambda: subprocess.run(["ls", "-lR", str(base)], capture_output=True))
    out["rm -rf"] = timed(lambda: subprocess.run(["rm", "-rf", str(base)], check=True))
    return out


def drop_caches() -> bool:
    """Empty the kernel's page cache (root only), so the next read comes from the disk."""
    os.sync()
    try:
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
    except OSError:
        return False
    return True


def big_read(root: Path, size_mb: int, repeat: int) -> dict[str, float]:
    """MB/s reading one large file sequentially in 1 MiB reads."""
    big = root / "big.bin"
    block = os.urandom(1 << 20)
    with open(big, "wb") as handle:
        for _ in range(size_mb):
            handle.write(block)

    def read() -> float:
        started = time.perf_counter()
        with open(big, "rb", buffering=0) as handle:
            while handle.read(1 << 20):
                pass
        return size_mb / (time.perf_counter() - started)

    # Just written: the backing file is in the page cache, the mount's own cache is not.
    out = {"big read, just written": read()}
    read()  # settles the mount's page cache
    out["big read, cached"] = statistics.median(read() for _ in range(repeat))
    if drop_caches():
        cold = []
        for _ in range(repeat):
            drop_caches()
            cold.append(read())
        out["big read, from disk"] = statistics.median(cold)
    big.unlink()
    return out


def memory_part(mnt: Path, ws: Path, state: Path, appends: int) -> dict[str, list[float]]:
    memory = Memory(load_config(workspace=ws, agent="main", env={}, overrides=[("state_dir", str(state))]))
    keyword, vector, append_s = [], [], []
    try:
        log = mnt / "memory" / "2026-11-22.md"
        for i in range(appends):
            token = f"marker{i:05d}zq"
            text = f"\n## 10:{i % 60:02d} - Entry {i}\n{token} " + ("lorem ipsum dolor sit amet " * 70)[:1900] + "\n"
            started = time.perf_counter()
            with open(log, "a") as handle:
                handle.write(text)
            closed = time.perf_counter()
            append_s.append(closed - started)
            while not memory.search(token, wait_ms=0).results:
                pass
            keyword.append(time.perf_counter() - closed)
            while memory.pending:
                time.sleep(0.002)
            vector.append(time.perf_counter() - closed)
    finally:
        memory.close()
    return {"append": append_s, "keyword": keyword, "vector": vector}


CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "memfs-bench"
LIBFUSE_EXAMPLES = Path("/usr/share/doc/libfuse3-dev/examples")


def pyfuse3_example() -> Path:
    """pyfuse3's passthroughfs.py for the installed version, with 1 s entry/attr timeouts."""
    version = pyfuse3.__version__
    tuned = CACHE / f"pyfuse3-{version}-passthroughfs-tuned.py"
    if tuned.exists():
        return tuned
    index = urllib.request.urlopen("https://pypi.org/simple/pyfuse3/", timeout=30).read().decode()
    match = re.search(rf'href="(https://[^"#]+/pyfuse3-{re.escape(version)}\.tar\.gz)#sha256=([0-9a-f]+)"', index)
    if not match:
        raise RuntimeError(f"no sdist of pyfuse3 {version} on PyPI")
    data = urllib.request.urlopen(match.group(1), timeout=60).read()
    if hashlib.sha256(data).hexdigest() != match.group(2):
        raise RuntimeError("pyfuse3 sdist sha256 mismatch")
    import io
    import tarfile
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        member = tar.extractfile(f"pyfuse3-{version}/examples/passthroughfs.py")
        assert member is not None
        source = member.read().decode()
    patched = source.replace("entry.entry_timeout = 0", "entry.entry_timeout = 1")
    patched = patched.replace("entry.attr_timeout = 0", "entry.attr_timeout = 1")
    if patched.count("_timeout = 1") != 2:
        raise RuntimeError("pyfuse3 example changed shape; cannot tune its timeouts")
    CACHE.mkdir(parents=True, exist_ok=True)
    tuned.write_text(patched)
    return tuned


def c_passthrough() -> Path:
    """libfuse's passthrough_ll built from the example source libfuse3-dev ships."""
    binary = CACHE / "passthrough_ll"
    if binary.exists():
        return binary
    source = LIBFUSE_EXAMPLES / "passthrough_ll.c"
    if not source.exists():
        raise RuntimeError(f"{source} missing (apt install libfuse3-dev)")
    flags = subprocess.run(["pkg-config", "fuse3", "--cflags", "--libs"], capture_output=True, text=True,
                           check=True).stdout.split()
    CACHE.mkdir(parents=True, exist_ok=True)
    subprocess.run(["gcc", "-O2", f"-I{LIBFUSE_EXAMPLES}", str(source), *flags, "-o", str(binary)], check=True,
                   capture_output=True)
    return binary


@contextmanager
def memfs_mount(base: Path, extra: list[str], python: str = sys.executable) -> Iterator[Path]:
    """A second memfs mount with other settings (or another checkout's memfs: ``python``), on a
    workspace of its own."""
    ws, mnt = base / "ws", base / "mnt"
    for d in (ws / "memory", mnt):
        d.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "MEMFS_STATE_DIR": str(base / "state")}
    out = subprocess.run([python, "-m", "memfs", "mount", str(ws), str(mnt), *extra], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(out.stderr)
    try:
        yield mnt
    finally:
        subprocess.run([python, "-m", "memfs", "umount", str(mnt)], env=env, capture_output=True)


@contextmanager
def process_mount(argv: list[str], mnt: Path) -> Iterator[Path]:
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not os.path.ismount(mnt):
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{argv[0]} did not mount: {proc.stderr.read().decode() if proc.stderr else ''}")
            time.sleep(0.05)
        yield mnt
    finally:
        subprocess.run(["fusermount3", "-u", "-z", str(mnt)], capture_output=True)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()


def passthrough_hp() -> Path:
    """libfuse's passthrough_hp (the fastest C passthrough), built by the conformance kit's script."""
    script = Path(os.environ.get("MEMFS_CONFORMANCE", Path(__file__).resolve().parents[2] / "shared" / "conformance"))
    script = script / "passthrough_hp.sh"
    if not script.exists():
        raise RuntimeError(f"{script} missing (set MEMFS_CONFORMANCE)")
    return script


def busy() -> None:
    while True:
        pass


def baselines(tmp: Path, wanted: list[str]) -> dict[str, Callable[[], AbstractContextManager[Path]]]:
    found: dict[str, Callable[[], AbstractContextManager[Path]]] = {}
    makers = (("pyfuse3 tuned", pyfuse3_example), ("C passthrough_ll", c_passthrough),
              ("C passthrough_hp", passthrough_hp))
    for name, make in [(n, m) for n, m in makers if n.split()[-1] in wanted]:
        try:
            program = make()
        except Exception as exc:  # a missing baseline must not stop the benchmark
            print(f"skipping baseline {name}: {exc}", file=sys.stderr)
            continue
        src, mnt = tmp / f"{name.split()[0]}-src", tmp / f"{name.split()[0]}-mnt"
        src.mkdir()
        mnt.mkdir()
        if program.suffix == ".py":
            argv = [sys.executable, str(program), str(src), str(mnt)]
        elif program.suffix == ".sh":  # default options, as the issue measures it
            argv = ["bash", str(program), str(src), str(mnt), "--foreground"]
        else:
            argv = [str(program), "-f", "-o", f"source={src},timeout=1", str(mnt)]
        found[name] = lambda argv=argv, mnt=mnt: process_mount(argv, mnt)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=2000)
    parser.add_argument("--appends", type=int, default=5000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--big-mb", type=int, default=256)
    parser.add_argument("--memory-appends", type=int, default=40)
    parser.add_argument("--no-baselines", action="store_true", help="only native and memfs")
    parser.add_argument("--baseline", action="append", choices=["tuned", "passthrough_ll", "passthrough_hp"],
                        help="only these reference passthroughs (default: all three)")
    parser.add_argument("--load", type=int, default=0, help="busy loops running beside the whole run")
    parser.add_argument("--poll-off", action="store_true",
                        help="also a second memfs mount with mount.busy_poll_us=0, to see what polling buys")
    parser.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE[,KEY=VALUE]",
                        help="also a memfs mount with these settings, e.g. --variant mount.quick_wait=false; "
                             "python=PATH runs another checkout's memfs (same run: before and after)")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="mount setting, e.g. --set mount.watch=false")
    args = parser.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="memfs-bench-"))
    native, ws, mnt, state = tmp / "native", tmp / "ws", tmp / "mnt", tmp / "state"
    for d in (native, ws / "memory", mnt):
        d.mkdir(parents=True)
    env = {**os.environ, "MEMFS_STATE_DIR": str(state)}
    extra = [arg for o in args.overrides for arg in ("--set", o)]
    out = subprocess.run([sys.executable, "-m", "memfs", "mount", str(ws), str(mnt), *extra], env=env,
                         capture_output=True, text=True)
    if out.returncode != 0:
        print(out.stderr, file=sys.stderr)
        return 1
    wanted = args.baseline or ["tuned", "passthrough_ll", "passthrough_hp"]
    references = {} if args.no_baselines else baselines(tmp, wanted)
    if args.poll_off:
        references["memfs poll off"] = lambda: memfs_mount(tmp / "poll-off", [*extra, "--set", "mount.busy_poll_us=0"])
    for number, variant in enumerate(args.variant):
        # python=PATH: that interpreter's memfs (another checkout, e.g. the last release) in the same run
        python = next((o.split("=", 1)[1] for o in variant.split(",") if o.startswith("python=")), sys.executable)
        settings = [arg for o in variant.split(",") if not o.startswith("python=") for arg in ("--set", o)]
        references[f"memfs {variant}"] = (lambda folder=tmp / f"variant-{number}", settings=settings, python=python:
                                          memfs_mount(folder, [*extra, *settings], python))
    import multiprocessing

    loops = [multiprocessing.Process(target=busy, daemon=True) for _ in range(args.load)]
    for loop in loops:
        loop.start()
    try:
        runs: dict[str, dict[str, list[float]]] = {name: {} for name in ("native", "memfs", *references)}
        big: dict[str, dict[str, float]] = {}
        for _ in range(args.repeat):
            for name, root in (("native", native), ("memfs", mnt)):
                for metric, seconds in workload(root, args.files, args.appends).items():
                    runs[name].setdefault(metric, []).append(seconds)
            for name, mounted in references.items():
                with mounted() as root:
                    for metric, seconds in workload(root, args.files, args.appends).items():
                        runs[name].setdefault(metric, []).append(seconds)
        big = {"native": big_read(native, args.big_mb, args.repeat),
               "memfs": big_read(mnt, args.big_mb, args.repeat)}
        for name, mounted in references.items():
            with mounted() as root:
                big[name] = big_read(root, args.big_mb, args.repeat)
        mem = memory_part(mnt, ws, state, args.memory_appends)
    finally:
        for loop in loops:
            loop.terminate()
        subprocess.run([sys.executable, "-m", "memfs", "umount", str(mnt)], env=env, capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{args.files} files of 2 KiB, {args.appends} appends, median of {args.repeat} runs, "
          f"{args.load} busy loops beside on {os.cpu_count()} cores")
    others = [name for name in runs if name != "native"]
    print(f"{'metric':<12} {'native':>10} " + " ".join(f"{name:>18}" for name in others) + "   (time, ratio to native)")
    for metric in runs["native"]:
        n = statistics.median(runs["native"][metric])
        cells = []
        for name in others:
            m = statistics.median(runs[name][metric])
            cells.append(f"{m * 1000:>9.1f}ms {m / n:>6.1f}x")
        hp = runs.get("C passthrough_hp", {}).get(metric)
        vs_hp = f"   memfs/hp {statistics.median(runs['memfs'][metric]) / statistics.median(hp):.2f}x" if hp else ""
        print(f"{metric:<12} {n * 1000:>8.1f}ms " + " ".join(f"{c:>18}" for c in cells) + vs_hp)
    for metric in big["native"]:
        n = big["native"][metric]
        cells = [f"{name} {big[name][metric]:.0f} MB/s ({big[name][metric] / n:.2f})" for name in others]
        print(f"{metric:<23} native {n:.0f} MB/s; " + "; ".join(cells))
    ms = {k: sorted(v) for k, v in mem.items()}

    def p(values: list[float], q: float) -> float:
        return values[min(len(values) - 1, int(q * len(values)))] * 1000

    print(f"memory-file 2 KiB append (open+write+close, indexed at close): p50 {p(ms['append'], .5):.1f} ms, "
          f"p95 {p(ms['append'], .95):.1f} ms")
    print(f"close() -> searchable by keyword: p50 {p(ms['keyword'], .5):.1f} ms, p95 {p(ms['keyword'], .95):.1f} ms")
    print(f"close() -> vector side embedded: p50 {p(ms['vector'], .5):.1f} ms, p95 {p(ms['vector'], .95):.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
