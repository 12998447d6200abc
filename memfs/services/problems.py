"""Files the index did not take whole (not indexed, or not all text) as a mode may know of them,
and the warnings a search's reader must read about the files it cites.
"""

from __future__ import annotations

from memfs import longpath
from memfs.privacy import Privacy
from memfs.services.lifecycle import Engine


def problems(engine: Engine, privacy: Privacy) -> dict[str, tuple[str, str]]:
    """Files not indexed (why) or not all text (what), that ``privacy`` may know of: for a
    shared view, only files it would list (not a symlink to a private file or out of the
    workspace, nor a file with several names), judged as its mount judges them."""
    found = {path: problem for path, problem in engine.store.problem_files().items() if not privacy.hides(path)}
    if privacy.shared:
        found = {path: problem for path, problem in found.items() if _listed(engine, privacy, path)}
    return found


def _listed(engine: Engine, privacy: Privacy, rel: str) -> bool:
    try:
        st = longpath.lstat(engine.cfg.workspace / rel)
    except OSError:
        return False
    return not privacy.hides_entry(engine.cfg.workspace, rel, st)


def file_warnings(engine: Engine, results: list, privacy: Privacy) -> list[str]:
    """What a reader of these results must know: a cited file holds bytes that are not text;
    memory files are not searched at all (too large)."""
    found = problems(engine, privacy)
    notes = [f"{path}: {found[path][1]}" for path in dict.fromkeys(r.path for r in results)
             if path in found and found[path][1]]
    skipped = sorted(p for p, (error, _) in found.items() if "index.max_file_mb" in error)
    if skipped:
        named = ", ".join(skipped[:3]) + (f" and {len(skipped) - 3} more" if len(skipped) > 3 else "")
        notes.append(f"{len(skipped)} memory file{'s are' if len(skipped) > 1 else ' is'} not searched, larger "
                     f"than index.max_file_mb ({engine.cfg.index.max_file_mb:g} MB): {named}")
    return notes
