"""The context bundle: the workspace files an agent loads at session start, within a token budget.

Budgets are fair: every present file is first offered an equal share of the total (never more
than the per-file cap), and what short files leave unused is shared out again among the longer
ones ("water filling").  A file cut to fit keeps its head and its tail, with a marker between them
that says how much was cut and how to read the whole file.  The output depends only on the files,
the date and the settings: same inputs, same bytes.

Everything sent counts against ``total_tokens``: the manifest and the section headers are
measured first and only what they leave is shared among the files, and a cut file's marker is
paid out of that file's share.  So the whole rendering stays within the budget (checked, and
tightened if token merges across joins push it over).
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from memfs.cleantext import describe
from memfs.index.text import tokens


@dataclass(frozen=True)
class BundleFile:
    path: str
    text: str | None  # None: the file does not exist
    dropped: int = 0  # bytes that were not text (memfs.cleantext): shown as one mark per run
    messages: bool = False  # a sync file or transcript, shown as its messages under chat titles


@dataclass(frozen=True)
class Section:
    path: str
    included: int
    total: int
    truncated: bool
    body: str
    missing: bool
    dropped: int = 0


def allocate(sizes: list[int], total: int, per_file: int) -> list[int]:
    """Token allowance per file: the largest common level L with sum(min(size, cap, L)) <= total."""
    caps = [min(size, per_file) for size in sizes]
    if sum(caps) <= total:
        return caps
    low, high = 0, max(caps)
    while low < high:
        mid = (low + high + 1) // 2
        if sum(min(c, mid) for c in caps) <= total:
            low = mid
        else:
            high = mid - 1
    shares = [min(c, low) for c in caps]
    # Hand out the few tokens integer levels leave over, first file first (deterministic).
    spare = total - sum(shares)
    for i, cap in enumerate(caps):
        if spare <= 0:
            break
        if shares[i] < cap:
            shares[i] += 1
            spare -= 1
    return shares


def _head(lines: list[str], budget: int) -> tuple[list[str], int]:
    taken: list[str] = []
    used = 0
    for line in lines:
        n = tokens.count(line) + 1
        if used + n > budget:
            if not taken and budget > 8:  # a single huge first line: keep a piece of it
                taken.append(tokens.split_by_tokens(line, budget - 1)[0])
                used = budget
            break
        taken.append(line)
        used += n
    return taken, used


def _marker(path: str, cut: int, total: int, first: int, last: int, messages: bool = False) -> str:
    quoted = shlex.quote(path)
    if messages:  # lines of the rendering, not of the file: point at the messages instead
        return f"[… memfs: {cut} of {total} tokens cut here; read them with memfs get {quoted} --messages …]"
    return (f"[… memfs: {cut} of {total} tokens cut here (lines {first}-{last}); read them with "
            f"sed -n '{first},{last}p' {quoted} or memfs get {quoted} --from {first} …]")


def truncate(path: str, text: str, budget: int, messages: bool = False) -> tuple[str, int, bool]:
    """(body, tokens of the file included, truncated?) within ``budget`` tokens, the marker
    included: about 2/3 of what the marker leaves goes to the head, the rest to the tail."""
    total = tokens.count(text)
    if total <= budget:
        return text, total, False
    lines = text.split("\n")
    widest = len(str(len(lines)))
    room = budget - tokens.count(_marker(path, total, total, 10 ** widest - 1, 10 ** widest - 1, messages)) - 1
    if room < 8:
        return "", 0, True  # no room for any of it: the manifest says so, no section is sent
    head, head_used = _head(lines, room * 2 // 3)
    rest = lines[len(head):]
    tail_rev, tail_used = _head(list(reversed(rest)), room - head_used)
    tail = list(reversed(tail_rev))
    if tail and len(tail) == len(rest):  # everything fit after all
        return text, total, False
    first_cut = len(head) + 1
    last_cut = len(lines) - len(tail)
    marker = _marker(path, total - head_used - tail_used, total, first_cut, last_cut, messages)
    return "\n".join(head + [marker] + tail), head_used + tail_used, True


def build(files: list[BundleFile], total_tokens: int, per_file_tokens: int) -> list[Section]:
    """Each file's section within a fair share of ``total_tokens`` (its marker included)."""
    present = [f for f in files if f.text is not None]
    sizes = [tokens.count(f.text or "") for f in present]
    shares = dict(zip((f.path for f in present), allocate(sizes, max(0, total_tokens), per_file_tokens)))
    sections = []
    for f in files:
        if f.text is None:
            sections.append(Section(f.path, 0, 0, False, "", True))
            continue
        body, included, cut = truncate(f.path, f.text, shares[f.path], f.messages)
        sections.append(Section(f.path, included, tokens.count(f.text), cut, body, False, f.dropped))
    return sections


def render(mode: str, date: str, sections: list[Section], total_tokens: int, used: int) -> str:
    incomplete = any(s.truncated for s in sections)
    lines = [
        f"# memfs context: {mode} ({date})",
        "",
        f"{used} of {total_tokens} budget tokens used (this whole text)"
        + (" · some files are cut: see the markers and read the rest when you need it" if incomplete else ""),
        "",
        "| file | tokens included / total | truncated |",
        "|---|---|---|",
    ]
    for s in sections:
        state = "missing" if s.missing else ("all cut: memfs get " + shlex.quote(s.path) if s.truncated and not s.body
                                             else "yes" if s.truncated else "no")
        lines.append(f"| {s.path} | {s.included} / {s.total} | {state} |")
    for s in sections:
        if s.truncated and not s.body:
            continue
        lines += ["", f"## source: {s.path}", ""]
        if s.missing:
            lines.append(f"_(missing: {s.path} does not exist yet)_")
        else:
            if s.dropped:
                lines += [f"[… memfs: {describe(s.dropped)}; left out of this text …]", ""]
            lines.append(s.body.rstrip("\n"))
    return "\n".join(lines) + "\n"


def _counted(mode: str, date: str, sections: list[Section], total_tokens: int) -> tuple[str, int]:
    """The rendering whose "N of M tokens used" line states its own size."""
    used = total_tokens
    for _ in range(4):
        text = render(mode, date, sections, total_tokens, used)
        size = tokens.count(text)
        if size == used:
            break
        used = size
    return text, tokens.count(text)


def _compact(mode: str, date: str, files: list[BundleFile], total_tokens: int) -> str:
    """The bundle when even its manifest is over the budget: which files to read, no bodies."""
    present = [f.path for f in files if f.text is not None]
    head = f"# memfs context: {mode} ({date})\n\n"
    note = (f"bundle.total_tokens ({total_tokens}) is too small for the manifest of {len(files)} files: "
            "read them directly with memfs get PATH")
    for count in range(len(present), -1, -1):
        listed = ", ".join(shlex.quote(p) for p in present[:count]) + (" …" if count < len(present) else "")
        text = head + note + (f": {listed}" if count else "") + "\n"
        if tokens.count(text) <= total_tokens:
            return text
    return head


def bundle(mode: str, date: str, files: list[BundleFile], total_tokens: int, per_file_tokens: int) -> str:
    """The whole bundle within ``total_tokens``, everything counted: the manifest first, then
    fair shares of what it leaves; what the first try leaves unused (a file with no room for
    even its marker sends no section) is shared out again."""
    frame = [Section(f.path, 0 if f.text is None else 10 ** 6, 0 if f.text is None else 10 ** 6,
                     f.text is not None, "", f.text is None) for f in files]
    budget = total_tokens - _counted(mode, date, frame, total_tokens)[1]
    best: str | None = None
    for _ in range(12):
        sections = build(files, budget, per_file_tokens)
        text, size = _counted(mode, date, sections, total_tokens)
        if size <= total_tokens:
            best = text
            if total_tokens - size < 16 or not any(s.truncated for s in sections):
                break
            budget += total_tokens - size
        else:
            budget -= size - total_tokens
            if best is not None:
                break
    return best if best is not None else _compact(mode, date, files, total_tokens)
