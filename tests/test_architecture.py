"""The house rules of ARCHITECTURE.md, checked on the code itself: no import circle anywhere
(memfs and scripts, imports inside functions and under TYPE_CHECKING included), each layer imports
only the layers below it, front ends reach the index only through ``Memory``, nothing below the
front ends knows FUSE or click, ``fs/`` knows no SQL, and no module outgrows one sitting."""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "memfs"
SCRIPTS = ROOT / "scripts"
MAX_LINES = 800
MEMORY_MAX_LINES = 400

# Each area of memfs and its rank: an area may import only areas of a lower rank (and itself).
# The front ends (rank 90) may also import one another, as long as no circle forms.
RANKS: dict[str, int] = {
    "mounttable": 1,
    **dict.fromkeys(("userdirs", "mountinfo", "lazy", "longpath", "unixsock", "replacing",
                     "leavecwd", "cleantext", "workspaceid"), 0),
    "config": 1,
    "workspace": 2, "state": 2,
    "privacy": 3,
    "index.text": 4, "sync": 4,
    "index.embedding": 5, "history": 5,
    "index.storage": 6, "versions": 6, "notes": 6,
    "index.search": 7,
    "index": 8, "render": 8,
    "indexmove": 9,
    "services": 10,
    "memory": 11,
    **dict.fromkeys(("bursts", "embedder", "watch", "fs", "serve", "mcp", "commands", "invocation", "cli", "quickcli",
                     "pgcli", "capture", "__main__"), 90),
}
FRONT_ENDS = frozenset(area for area, rank in RANKS.items() if rank == 90)
# A front end reaches the index only through Memory.  `memfs pg` administers PostgreSQL itself (the
# schema and logins, which no Memory has); `memfs import` and the hooks read the runtimes' own
# transcripts with the text stage's readers, and mask secrets with its masker, before they write.
INDEX_ALLOWED = {"pgcli": ("index.storage",), "capture": ("index.text",)}
UI_LIBRARIES = ("pyfuse3", "click", "trio")
SQL_LIBRARIES = ("apsw", "psycopg", "sqlite3")


def _modules(base: Path, prefix: str) -> dict[str, Path]:
    found = {}
    for path in base.rglob("*.py"):
        name = path.relative_to(base).with_suffix("").as_posix().replace("/", ".")
        name = f"{prefix}.{name}" if prefix else name
        if name.endswith(".__init__"):
            name = name[: -len(".__init__")]
        found[name] = path
    return found


MODULES = _modules(PACKAGE, "memfs")
SCRIPT_MODULES = _modules(SCRIPTS, "")


def _imports(path: Path) -> list[str]:
    """Every module name an import in ``path`` names, at any depth (functions, TYPE_CHECKING)."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _resolve(name: str, known: dict[str, Path]) -> str | None:
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def _graph(known: dict[str, Path]) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for imported in _imports(path):
            target = _resolve(imported, known)
            if target is not None and target != name and not name.startswith(target + "."):
                graph[name].add(target)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    sys.setrecursionlimit(max(10_000, sys.getrecursionlimit()))
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph[node]:
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in graph:
        if node not in index:
            visit(node)
    return found


def area(module: str) -> str:
    parts = module.split(".")[1:]
    if not parts:
        return "memfs"
    if parts[0] == "index" and len(parts) > 1 and parts[1] in ("text", "embedding", "storage", "search"):
        return f"index.{parts[1]}"
    return parts[0]


def test_every_module_has_an_area() -> None:
    assert sorted({area(m) for m in MODULES} - set(RANKS) - {"memfs"}) == []


def test_no_import_circle_in_memfs() -> None:
    assert _circles(_graph(MODULES)) == []


def test_no_import_circle_in_scripts() -> None:
    assert _circles(_graph(SCRIPT_MODULES)) == []


def test_each_layer_imports_only_what_lies_below_it() -> None:
    wrong = []
    for name, targets in _graph(MODULES).items():
        here = area(name)
        for target in targets:
            there = area(target)
            if here == there or there == "memfs":
                continue
            if here in FRONT_ENDS and there in FRONT_ENDS:
                continue
            if RANKS[there] >= RANKS[here]:
                wrong.append(f"{name} -> {target}")
    assert wrong == []


def test_front_ends_reach_the_index_only_through_memory() -> None:
    wrong = []
    for name, targets in _graph(MODULES).items():
        here = area(name)
        if here not in FRONT_ENDS:
            continue
        for target in targets:
            there = area(target)
            if there.startswith("index") and there not in INDEX_ALLOWED.get(here, ()):
                wrong.append(f"{name} -> {target}")
    assert wrong == []


def test_nothing_below_the_front_ends_knows_fuse_or_click_and_fs_knows_no_sql() -> None:
    wrong = []
    for name, path in MODULES.items():
        here = area(name)
        imported = {i.split(".")[0] for i in _imports(path)}
        if here not in FRONT_ENDS and imported & set(UI_LIBRARIES):
            wrong.append(f"{name} imports {sorted(imported & set(UI_LIBRARIES))}")
        if here == "fs" and (imported & set(SQL_LIBRARIES)
                             or any(i.startswith("memfs.index") for i in _imports(path))):
            wrong.append(f"{name} knows SQL or the index")
    assert wrong == []


@pytest.mark.parametrize("limit_name", ["module", "memory"])
def test_no_module_outgrows_one_sitting(limit_name: str) -> None:
    if limit_name == "memory":
        lines = len((PACKAGE / "memory.py").read_text(encoding="utf-8").splitlines())
        assert lines < MEMORY_MAX_LINES, f"memfs/memory.py has {lines} lines: Memory routes, it does not compute"
        return
    long = {str(path.relative_to(ROOT)): n for path in PACKAGE.rglob("*.py")
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}


def test_the_checks_see_a_circle_and_a_wrong_way_import(tmp_path: Path) -> None:
    """The checks themselves: a planted circle and a planted upward import are found."""
    (tmp_path / "a.py").write_text("import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from a import x\n")
    assert _circles(_graph(_modules(tmp_path, ""))) == [["a", "b"]]
    graph = defaultdict(set, {"memfs.index.text.x": {"memfs.memory"}})
    assert RANKS[area("memfs.memory")] > RANKS[area(next(iter(graph)))]
