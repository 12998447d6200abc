"""The parts of memfs.capture one at a time: session file names and lines, the writer's appends
(a response that grew), the span-keeping JSON editor, marked text blocks, the hook's input."""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from pathlib import Path

import pytest

from memfs.capture import hooks, jsonedit, layout, textblock
from memfs.capture.writer import SessionWriter
from memfs.index.text.transcripts import Message, Session


@pytest.mark.parametrize("cwd,slug", [("/home/ada/src/kettle", "src-kettle"), ("/Users/Kim/My Projects/RPS 3/", "my-projects-rps-3"),
                                      ("C:\\work\\api", "work-api"), ("", "no-project"), ("/", "no-project"),
                                      ("/home/kooksun/가위바위보", "kooksun-가위바위보")])
def test_project_slugs(cwd: str, slug: str) -> None:
    assert layout.project_slug(cwd) == slug


def test_id_slugs_are_names_that_never_meet() -> None:
    assert layout.id_slug("5b0c5e2e-8f5e-4d57-9a51-2d7e3f0c1a01") == "5b0c5e2e-8f5e-4d57-9a51-2d7e3f0c1a01"
    a, b = layout.id_slug("a/b"), layout.id_slug("a-b")
    assert a != b and "/" not in a and layout.slug_of_name(f"2025-01-02-{a}.jsonl") == a
    assert len(layout.id_slug("x" * 500)) <= layout.ID_CHARS


def _session(*texts: str) -> Session:
    when = dt.datetime(2025, 11, 3, 9, tzinfo=dt.UTC)
    messages = [Message("assistant" if i % 2 else "user", "answer" if i % 2 else "prompt", t, i + 1, i + 1, when, f"m{i}")
                for i, t in enumerate(texts)]
    return Session("claude-code", "s-1", title="Kettle", project="/home/ada/src/kettle", started=when, messages=messages)


def test_a_response_that_grew_gets_what_it_grew_by_once(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    writer = SessionWriter(ws, ws, tmp_path / "locks")
    source = tmp_path / "t.jsonl"
    first = writer.write("claude-code", _session("Why does it heat dry?", "Reading thermal.c"), source)
    assert (first.created, first.new) == (True, 2)
    grown = _session("Why does it heat dry?", "Reading thermal.c\n\nFound it: the limit is 140.")
    second = writer.write("claude-code", grown, source)
    assert (second.new, second.already) == (1, 1)
    again = SessionWriter(ws, ws, tmp_path / "locks").write("claude-code", grown, source)
    assert (again.new, again.already) == (0, 2)
    lines = [json.loads(x) for x in (ws / first.rel).read_text().splitlines()]
    assert [r["id"] for r in lines[1:]] == ["m0", "m1", f"m1{layout.GREW}17"]
    assert lines[-1]["message"]["content"] == "\n\nFound it: the limit is 140."
    retitled = dataclasses.replace(grown, title="Kettle: boil-dry fix")
    SessionWriter(ws, ws, tmp_path / "locks").write("claude-code", retitled, source)
    assert json.loads((ws / first.rel).read_text().splitlines()[-1]) == {"type": "session_info",
                                                                        "name": "Kettle: boil-dry fix"}


def test_a_write_of_ours_that_broke_off_is_left_apart(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    writer = SessionWriter(ws, ws, tmp_path / "locks")
    done = writer.write("claude-code", _session("one two three"), tmp_path / "t.jsonl")
    with open(ws / done.rel, "a") as out:
        out.write('{"type":"message","id":"m1","kind":"ans')  # a crash mid-append
    again = SessionWriter(ws, ws, tmp_path / "locks").write("claude-code", _session("one two three", "four"),
                                                            tmp_path / "t.jsonl")
    assert again.new == 1
    assert (ws / done.rel).read_text().splitlines()[-1] == json.dumps(
        {"type": "message", "id": "m1", "timestamp": "2025-11-03T09:00:00.000Z", "kind": "answer",
         "message": {"role": "assistant", "content": "four"}}, separators=(",", ":"))


JSONS = [
    '{}', '{}\n', '{\n}', '{"a": 1}', '{\n  "a": 1\n}\n', '{\n\t"a": {"b": [1, 2]},\n\t"c": true\n}',
    '{\n    "x": null, // a comment\n    "y": [],\n}\n', '{"hooks": {"Stop": [{"hooks": []}]}, "z": "é\\u00e9"}',
]


@pytest.mark.parametrize("text", JSONS)
def test_json_members_and_items_come_out_as_they_went_in(text: str) -> None:
    root = jsonedit.parse(text)
    added = jsonedit.add_member(text, root, "memfs", {"command": "memfs", "args": ["mcp"]})
    assert jsonedit.plain(added) == {**jsonedit.plain(text), "memfs": {"command": "memfs", "args": ["mcp"]}}
    back = jsonedit.remove_member(added, jsonedit.parse(added), "memfs")
    assert back == text or (text.strip() in ("{}", "{\n}") and back.strip() == "{}")
    if isinstance(jsonedit.at(root, "hooks", "Stop"), jsonedit.Array):
        arr = jsonedit.at(root, "hooks", "Stop")
        more = jsonedit.add_item(text, arr, {"hooks": [{"type": "command"}]})  # type: ignore[arg-type]
        assert len(jsonedit.plain(more)["hooks"]["Stop"]) == 2
        assert jsonedit.remove_item(more, jsonedit.at(jsonedit.parse(more), "hooks", "Stop"), 1) == text  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", ['{"a": }', '{"a": 1', '[1, 2', '{"a": 1} x', '{"a": /* never closed'])
def test_json_that_is_not_is_refused(bad: str) -> None:
    with pytest.raises(jsonedit.JsonError):
        jsonedit.parse(bad)


@pytest.mark.parametrize("text", ["", "abc", "abc\n", "abc\n\n", "# Title\n\nBody\n", "x\r\ny\r\n"])
def test_a_marked_block_goes_and_comes_back_out_exactly(text: str) -> None:
    md = textblock.Markers("<!-- memfs:begin", "<!-- memfs:end")
    block = md.block("<!-- memfs:begin -->", "## Memory\n- search it", "<!-- memfs:end -->")
    put = md.put(text, block)
    assert block in put and put.startswith(text)
    assert md.put(put, block) == put  # again: nothing changes
    other = md.block("<!-- memfs:begin -->", "## Memory\n- another workspace", "<!-- memfs:end -->")
    assert md.take(md.put(put, other)) == text and md.take(put) == text


def test_a_marked_line_goes_first_and_comes_back_out() -> None:
    text = "# settings\nmodel = \"x\"\n"
    put = textblock.put_line(text, 'notify = ["memfs"]  # memfs:notify', "# memfs:notify")
    assert put.startswith("notify = ") and textblock.take_line(put, "# memfs:notify") == text


def test_hook_input_of_each_runtime() -> None:
    r = hooks.parse("claude-code", "precompact", b'{"transcript_path": "/t.jsonl", "trigger": "auto"}')
    assert (r.event, r.action, r.transcript, r.source, r.waited) == ("PreCompact", hooks.CAPTURE, "/t.jsonl", "auto", True)
    assert not hooks.parse("claude-code", "Stop", b"{}").waited
    n = hooks.parse("codex", "notify", b'{"type": "agent-turn-complete", "thread-id": "t-1"}')
    assert (n.thread_id, n.ignored) == ("t-1", "")
    assert hooks.parse("codex", "notify", b'{"type": "approval-requested"}').ignored
    assert hooks.parse("gemini", "BeforeAgent", b'{"prompt": "hi there you"}').prompt == "hi there you"
    with pytest.raises(hooks.UnknownEvent):
        hooks.parse("gemini", "UserPromptSubmit", b"{}")
    assert hooks.output("SessionStart", "  ") == b""
    assert len(hooks.cut("line\n" * 5000, 1000)) <= 1000
