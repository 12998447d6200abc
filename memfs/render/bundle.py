"""The context bundle: the workspace files an agent loads at session start, within a token budget.

Budgets are fair: every present file is first offered an equal share of the total (never more
than the per-file cap), and what short files leave unused is shared out again among the longer
ones ("water filling").  A file cut to fit keeps its head and its tail, with a marker between them
that says how much was cut and how to read the whole file.  The output depends only on the files,
the date and the settings: same inputs, same bytes.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass

from memfs.index import tokens


@dataclass(frozen=True)
class BundleFile:
    path: str
    text: str | None  # None: the file does not exist


@dataclass(frozen=True)
class Section:
    path: str
    included: int
    total: int
    truncated: bool
    body: str
    missing: bool


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


def truncate(path: str, text: str, budget: int) -> tuple[str, int, bool]:
    """(body, tokens included, truncated?) keeping about 2/3 head and 1/3 tail of the budget."""
    total = tokens.count(text)
    if total <= budget:
        return text, total, False
    lines = text.split("\n")
    head, head_used = _head(lines, budget * 2 // 3)
    rest = lines[len(head):]
    tail_rev, tail_used = _head(list(reversed(rest)), budget - head_used)
    tail = list(reversed(tail_rev))
    if tail and len(tail) == len(rest):  # everything fit after all
        return text, total, False
    first_cut = len(head) + 1
    last_cut = len(lines) - len(tail)
    cut = total - head_used - tail_used
    quoted = shlex.quote(path)
    marker = (f"[… memfs: {cut} of {total} tokens cut here (lines {first_cut}-{last_cut}); read them with "
              f"sed -n '{first_cut},{last_cut}p' {quoted} or memfs get {quoted} --from {first_cut} …]")
    return "\n".join(head + [marker] + tail), head_used + tail_used, True


def build(files: list[BundleFile], total_tokens: int, per_file_tokens: int) -> list[Section]:
    present = [f for f in files if f.text is not None]
    sizes = [tokens.count(f.text or "") for f in present]
    shares = dict(zip((f.path for f in present), allocate(sizes, total_tokens, per_file_tokens)))
    sections = []
    for f in files:
        if f.text is None:
            sections.append(Section(f.path, 0, 0, False, "", True))
            continue
        body, included, cut = truncate(f.path, f.text, shares[f.path])
        sections.append(Section(f.path, included, tokens.count(f.text), cut, body, False))
    return sections


def render(mode: str, date: str, sections: list[Section], total_tokens: int) -> str:
    included = sum(s.included for s in sections)
    incomplete = any(s.truncated for s in sections)
    lines = [
        f"# memfs context: {mode} ({date})",
        "",
        f"{included} of {total_tokens} budget tokens used"
        + (" · some files are cut: see the markers and read the rest when you need it" if incomplete else ""),
        "",
        "| file | tokens included / total | truncated |",
        "|---|---|---|",
    ]
    for s in sections:
        state = "missing" if s.missing else ("yes" if s.truncated else "no")
        lines.append(f"| {s.path} | {s.included} / {s.total} | {state} |")
    for s in sections:
        lines += ["", f"## source: {s.path}", ""]
        if s.missing:
            lines.append(f"_(missing: {s.path} does not exist yet)_")
        else:
            lines.append(s.body.rstrip("\n"))
    return "\n".join(lines) + "\n"
