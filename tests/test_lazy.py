"""Modules loaded on first use: whole for every thread that reads them at once."""

from __future__ import annotations

import subprocess
import sys

RACE = """
import sys, threading
from memfs.lazy import lazy_module
np = lazy_module("numpy")
assert not any(m.startswith("numpy.") for m in sys.modules), "numpy ran before its first use"
errors = []
start = threading.Barrier(8)
def use():
    start.wait()
    try:
        np.frombuffer(bytes(8), dtype=np.float32).astype(np.float16)
    except Exception as exc:
        errors.append(repr(exc))
threads = [threading.Thread(target=use) for _ in range(8)]
for t in threads: t.start()
for t in threads: t.join()
print(errors)
"""


def test_threads_reading_a_lazy_module_at_once_all_see_it_whole() -> None:
    for _ in range(3):  # a race: a few fresh processes
        out = subprocess.run([sys.executable, "-c", RACE], capture_output=True, text=True, timeout=120)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "[]", out.stdout
