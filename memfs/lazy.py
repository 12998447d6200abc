"""Modules imported on first use.  numpy costs ~40 ms to import, and the commands that only read
files or counts (status, get, context) never touch it; the modules that compute with it still
write ``np.`` as usual.

Not importlib's LazyLoader: before Python 3.12 it is not thread-safe (a second thread reading an
attribute while the first still runs the module's code sees a half-made module: "module 'numpy'
has no attribute 'frombuffer'", seen in a mount indexing a write while a search embedded).  The
stand-in here imports the real module with ``importlib.import_module``, which holds the import
lock until the module is whole, then takes its attributes as its own."""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType
from typing import Any


class _OnFirstUse(ModuleType):
    def __getattr__(self, attr: str) -> Any:  # only called for names not copied in yet
        real = importlib.import_module(self.__name__)
        self.__dict__.update(real.__dict__)
        return getattr(real, attr)


def lazy_module(name: str) -> ModuleType:
    """``name``, loaded when one of its attributes is first read."""
    if name in sys.modules:
        return sys.modules[name]
    if importlib.util.find_spec(name) is None:
        raise ModuleNotFoundError(f"No module named {name!r}", name=name)
    return _OnFirstUse(name)
