"""A tool call as the one line a person remembers it by, and a tool's output as its head.

"Bash: pytest -q tests/test_x.py", "Edit: src/app.py", "Grep: TODO in src/" -- the tool and the
argument that says what it did (the command, the file, the pattern), never the file contents
an Edit or Write carried.  Runtimes name their tools differently (Claude Code's Bash, Codex's
shell, Gemini's run_shell_command), so the main argument is looked up by the argument's name,
which they mostly share.
"""

from __future__ import annotations

import json
import re
from typing import Any

from .model import CALL_CHARS, cut_output, one_line

# The argument that says what a call did, best first.  Content-like arguments (new_string,
# content, old_string) are never shown: they are the edit, not its name.
_MAIN_ARGS = (
    "command", "cmd", "pattern", "query", "url", "file_path", "filePath", "notebook_path", "absolute_path", "path",
    "dir_path", "skill", "description", "subject", "prompt", "questions", "plan", "explanation", "input", "task_id",
    "taskId", "name",
)
# The arguments shown beside the main one when present: where a search looked.
_WHERE_ARGS = ("path", "dir_path", "glob", "include")
_SHELL_WRAPPERS = {"bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh", "/usr/bin/bash", "powershell.exe",
                   "powershell", "pwsh", "cmd", "cmd.exe"}
_PATCH_FILE = re.compile(r"^\*\*\* (?:Add|Update|Delete) File: (.+)$", re.MULTILINE)


def shell_words(command: Any) -> str:
    """A command as the line a person typed: ["bash", "-lc", "ls -la"] is "ls -la"."""
    if isinstance(command, list):
        words = [str(w) for w in command]
        if len(words) >= 3 and words[0] in _SHELL_WRAPPERS and words[1] in ("-lc", "-c", "-Command", "/c", "-NoProfile"):
            return words[-1]
        return " ".join(words)
    return str(command) if command is not None else ""


def patch_files(patch: str) -> str:
    """The files an apply_patch envelope touches, comma-separated."""
    return ", ".join(dict.fromkeys(m.strip() for m in _PATCH_FILE.findall(patch[:100_000])))


def _value(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str) for v in value):
        return shell_words(value)
    if isinstance(value, list) and value and isinstance(value[0], dict):
        # A plan or a questions list: its first item's words.
        # A plan shows the step under way, else its first.
        first = next((v for v in value if isinstance(v, dict) and v.get("status") == "in_progress"), value[0])
        for key in ("step", "question", "content", "text", "subject"):
            if isinstance(first.get(key), str):
                return first[key] + (f" (+{len(value) - 1} more)" if len(value) > 1 else "")
    return json.dumps(value, ensure_ascii=False)[:CALL_CHARS] if value not in (None, "", [], {}) else ""


def call_line(name: str, args: Any) -> str:
    """``name: main argument`` on one line; arguments given as a JSON string are decoded."""
    name = name or "tool"
    if isinstance(args, str):
        text = args.strip()
        if text.startswith("{"):
            try:
                args = json.loads(text)
            except ValueError:
                pass
        if isinstance(args, str):
            if "*** Begin Patch" in args[:200]:
                return one_line(f"{name}: {patch_files(args)}")
            return one_line(f"{name}: {args}" if args else name)
    if not isinstance(args, dict):
        return one_line(f"{name}: {_value(args)}" if args not in (None, "", [], {}) else name)
    main = ""
    used = ""
    for key in _MAIN_ARGS:
        if key in args and args[key] not in (None, "", [], {}):
            main = _value(args[key])
            if key == "input" and "*** Begin Patch" in main[:200]:
                main = patch_files(main)
            used = key
            break
    if not main and args:
        main = json.dumps(args, ensure_ascii=False)[:CALL_CHARS]
    where = next((str(args[k]) for k in _WHERE_ARGS if k != used and isinstance(args.get(k), str) and args[k]), "")
    if where and used in ("pattern", "query"):
        main = f"{main} in {where}"
    return one_line(f"{name}: {main}" if main else name)


def output_text(value: Any) -> str:
    """A tool result of any of the shapes runtimes use as plain text: a string (a JSON string
    holding {"output": ...} too), a list of text/image blocks, or a dict with output/content."""
    if isinstance(value, str):
        text = value
        if text.startswith('{"output"'):
            try:
                decoded = json.loads(text)
            except ValueError:
                return text
            if isinstance(decoded, dict) and isinstance(decoded.get("output"), str):
                return decoded["output"]
        return text
    if isinstance(value, list):
        parts = []
        for block in value:
            if isinstance(block, str):
                parts.append(block)
            elif isinstance(block, dict):
                kind = block.get("type")
                if kind in ("image", "input_image", "image_url") or "image_url" in block or "inlineData" in block:
                    parts.append("[image]")
                elif isinstance(block.get("text"), str):
                    parts.append(block["text"])
                elif isinstance(block.get("functionResponse"), dict):
                    parts.append(output_text(block["functionResponse"].get("response")))
                elif kind == "tool_reference" and isinstance(block.get("tool_name"), str):
                    parts.append(block["tool_name"])
        return "\n".join(p for p in parts if p)
    if isinstance(value, dict):
        for key in ("output", "content", "text", "result", "error", "stdout"):
            if key in value and value[key] not in (None, ""):
                return output_text(value[key])
        return ""
    return "" if value is None else str(value)


def output_head(value: Any) -> str:
    """:func:`output_text` cut to its head (:func:`memfs.index.text.transcripts.model.cut_output`)."""
    return cut_output(output_text(value))
