"""memfs.index.text.transcripts: every runtime's real format read into the same messages, by content.

The fixtures (tests/data/transcripts/, written by make.py there) hold each format's awkward
parts; these tests check each is handled: what must be kept is kept once, in order, with its
line; what must not be (thinking, encrypted reasoning, images, injected context, twins) is not,
and is counted.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from memfs.index.text.transcripts import (
    ANSWER,
    OUTPUT_CHARS,
    OUTPUT_LINES,
    PROMPT,
    TOOL_CALL,
    TOOL_OUTPUT,
    UnknownFormat,
    detect,
    detect_path,
    iter_export,
    jsonscan,
    read_session,
    read_sessions,
)
from memfs.index.text.transcripts.model import cut_output

DATA = Path(__file__).parent / "data" / "transcripts"
FAKE_KEY = "sk-proj-FAKE0fake1FAKE2fake3FAKE4fake5FAKE6fake7FAKE8fake9"


def texts(session, kind=None):
    return [m.text for m in session.messages if kind is None or m.kind == kind]


def everything(session) -> str:
    return session.title + "\n" + session.text()


# --- detection ---------------------------------------------------------------------------------

@pytest.mark.parametrize("name, runtime", [
    ("claude-code.jsonl", "claude-code"), ("codex-new.jsonl", "codex"), ("codex-old.jsonl", "codex"),
    ("codex-snapshot.json", "codex"), ("gemini-chat.json", "gemini"), ("gemini-chat.jsonl", "gemini"),
    ("gemini-checkpoint.json", "gemini"), ("aider.chat.history.md", "aider"), ("openclaw.jsonl", "openclaw"),
    ("chatgpt-conversations.json", "chatgpt"), ("chatgpt-export.zip", "chatgpt"),
    ("claude-ai-conversations.json", "claude-ai"),
])
def test_each_format_is_told_from_its_content(name, runtime, tmp_path):
    assert detect_path(DATA / name) == runtime
    # Not from the name: the same bytes under a misleading name are told the same.
    disguised = tmp_path / ("rollout-2025-01-01.jsonl" if runtime != "codex" else "session.md")
    shutil.copyfile(DATA / name, disguised)
    assert detect_path(disguised) == runtime
    if not name.endswith(".zip"):
        assert detect((DATA / name).read_bytes()[:1024]) == runtime


def test_detect_reads_a_first_record_cut_by_the_kilobyte():
    meta = {"timestamp": "2025-10-20T08:00:00Z", "type": "session_meta",
            "payload": {"id": "x", "instructions": "# AGENTS.md\n" + "rule\n" * 2000}}
    head = (json.dumps(meta) + "\n").encode()[:1024]
    assert detect(head) == "codex"
    big_prompt = {"parentUuid": None, "isSidechain": False, "type": "user",
                  "message": {"role": "user", "content": "x" * 5000}}
    assert detect(json.dumps(big_prompt).encode()[:1024]) == "claude-code"


@pytest.mark.parametrize("head", [
    b"", b"# My notes\n\nBought milk.\n", b'{"a": 1}\n{"b": 2}\n', b"[1, 2, 3]",
    b'{"id":"m1","role":"user","content":"hello","chatId":"c1","timestamp":1700000000000}\n',
    b"\x89PNG\r\n\x1a\n\x00\x00", b"not json at all {",
])
def test_what_is_not_a_session_is_not_detected(head, tmp_path):
    assert detect(head) is None
    path = tmp_path / "x.jsonl"
    path.write_bytes(head)
    with pytest.raises(UnknownFormat):
        read_session(path)


def test_openclaw_headers_of_the_existing_tests_are_openclaw():
    assert detect(b'{"type":"session","id":"s1","timestamp":"2026-01-26T09:59:00Z"}\n') == "openclaw"


# --- Claude Code -------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def claude():
    return read_session(DATA / "claude-code.jsonl")


def test_claude_code_session_metadata(claude):
    assert claude.runtime == "claude-code"
    assert claude.id == "5b0c5e2e-8f5e-4d57-9a51-2d7e3f0c1a01"
    assert claude.title == "Kettle firmware: fix the boil-dry cutoff"  # the summary record
    assert claude.project == "/home/ada/src/kettle"
    assert claude.started == dt.datetime(2025, 11, 3, 9, 0, tzinfo=dt.UTC)


def test_claude_code_split_response_is_one_answer(claude):
    answers = [m for m in claude.messages if m.kind == ANSWER]
    merged = next(m for m in answers if m.id == "msg_A2")
    assert merged.text == ("Found it: DRY_LIMIT_C is 140 but the sensor saturates at 125, so the cutoff never "
                           "trips.\n\nLowering it to 118 gives a margin below saturation.")
    assert (merged.line, merged.end_line) == (11, 12)
    assert [m.id for m in answers] == ["msg_A1", "msg_A2"]


def test_claude_code_a_record_written_twice_is_kept_once(claude):
    assert texts(claude, TOOL_CALL).count("Grep: DRY_LIMIT_C in firmware") == 1
    assert claude.stats.skipped["duplicate-record"] == 1


def test_claude_code_tool_calls_are_one_line_each(claude):
    assert texts(claude, TOOL_CALL) == ["Read: /home/ada/src/kettle/firmware/thermal.c",
                                        "Grep: DRY_LIMIT_C in firmware",
                                        "Edit: /home/ada/src/kettle/firmware/thermal.c"]


def test_claude_code_tool_output_is_its_head(claude):
    read_output = next(m for m in claude.messages if m.id == "toolu_R1:out")
    assert read_output.text.splitlines() == [f"{i}\tline {i} of thermal.c" for i in range(1, 6)] + ["…"]
    assert read_output.kind == TOOL_OUTPUT and read_output.role == "tool"


def test_claude_code_leaves_out_what_the_user_did_not_say(claude):
    text = everything(claude)
    for absent in ("thinking-signature", "The user wants the cutoff logic", "system-reminder", "3 open files",
                   "Base directory for this skill", "HIL tests", "continued from a previous conversation",
                   "Request interrupted", "API Error", "AAECAwQF"):
        assert absent not in text, absent
    for kind in ("block:thinking", "block:image", "meta", "compact-summary", "injected", "api-error"):
        assert claude.stats.skipped[kind] >= 1, kind


def test_claude_code_commands_and_notifications(claude):
    assert "/review thermal.c" in texts(claude, PROMPT)
    outputs = texts(claude, TOOL_OUTPUT)
    assert "Review queued for thermal.c" in outputs
    assert 'Agent "Run HIL bench" completed\nHIL bench: 12 passed, 0 failed.\nCutoff tripped at 117.6 C.' in outputs


def test_claude_code_sidechain_is_marked(claude):
    side = [m for m in claude.messages if m.sidechain]
    assert [m.text for m in side] == ["Check every sensor table for the same saturation issue"]


def test_claude_code_unknown_records_and_half_line_are_counted(claude):
    assert claude.stats.skipped["some-future-record"] == 1
    assert claude.stats.partial_tail is True
    assert claude.stats.bad_lines == 0
    assert texts(claude, PROMPT)[-1] == "Ship it and note the new limit in CHANGELOG.md"


def test_claude_code_pasted_key_is_masked_unless_asked(claude):
    assert FAKE_KEY not in everything(claude)
    assert "My key is sk-proj-…[masked]" in texts(claude, PROMPT)[0]
    assert claude.stats.skipped["masked-secret"] == 1
    raw = read_session(DATA / "claude-code.jsonl", mask=False)
    assert FAKE_KEY in texts(raw, PROMPT)[0]


def test_claude_code_ids_are_stable(claude):
    again = read_session(DATA / "claude-code.jsonl")
    assert [m.id for m in again.messages] == [m.id for m in claude.messages]
    assert len({m.id for m in claude.messages}) == len(claude.messages)


def test_claude_code_title_falls_back_to_the_first_prompt(tmp_path):
    lines = (DATA / "claude-code.jsonl").read_text().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_text("".join(line for line in lines if '"type": "summary"' not in line))
    session = read_session(path)
    assert session.title.startswith("The kettle keeps heating after it boils dry.")
    assert len(session.title) <= 120


def test_a_5_mb_tool_output_line_costs_its_head(tmp_path):
    big = "\n".join(f"log line {i} " + "x" * 90 for i in range(50_000))  # ~5 MB
    assert len(big) > 5_000_000
    call = {"parentUuid": None, "isSidechain": False, "type": "assistant", "uuid": "b1", "sessionId": "s",
            "timestamp": "2025-11-03T09:00:00Z", "message": {"id": "m1", "role": "assistant", "content": [
                {"type": "tool_use", "id": "toolu_big", "name": "Bash", "input": {"command": "cat build.log"}}]}}
    result = {"parentUuid": "b1", "isSidechain": False, "type": "user", "uuid": "b2", "sessionId": "s",
              "timestamp": "2025-11-03T09:00:01Z", "message": {"role": "user", "content": [
                  {"type": "tool_result", "tool_use_id": "toolu_big", "content": big}]}, "toolUseResult": {"stdout": big}}
    path = tmp_path / "big.jsonl"
    path.write_text(json.dumps(call) + "\n" + json.dumps(result) + "\n")
    assert path.stat().st_size > 10_000_000
    session = read_session(path)
    assert texts(session, TOOL_CALL) == ["Bash: cat build.log"]
    [out] = texts(session, TOOL_OUTPUT)
    assert out.startswith("log line 0 ") and len(out) <= OUTPUT_CHARS + 2
    assert len(out.splitlines()) <= OUTPUT_LINES + 1


def test_bad_lines_in_the_middle_are_counted_not_fatal(tmp_path):
    lines = (DATA / "claude-code.jsonl").read_text().splitlines(keepends=True)
    path = tmp_path / "s.jsonl"
    path.write_text(lines[0] + "{not json\n" + "[1, 2]\n" + "".join(lines[1:]))
    session = read_session(path)
    assert session.stats.bad_lines == 1
    assert session.stats.skipped["not-an-object"] == 1
    assert len(session.messages) == len(read_session(DATA / "claude-code.jsonl").messages)
    # Lines after the inserted ones keep their true numbers.
    assert session.messages[0].line == 5


# --- Codex -------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def codex_new():
    return read_session(DATA / "codex-new.jsonl")


def test_codex_every_message_once_though_written_twice(codex_new):
    assert texts(codex_new, PROMPT) == [
        "The loom scheduler drops jobs when two share a deadline; fix the tie-break in sched/queue.py",
        "continue", "continue"]  # the same prompt said twice is kept twice; its twins are not
    assert texts(codex_new, ANSWER) == [
        "Fixed: ties now break on job id, so equal deadlines keep submission order (sched/queue.py:88).",
        "Tests pass: 41 passed.", "Nothing left to do."]
    assert codex_new.stats.skipped["event:user-twin"] == 3
    assert codex_new.stats.skipped["response:assistant-twin"] == 3


def test_codex_injected_context_reasoning_and_images_are_left_out(codex_new):
    text = everything(codex_new)
    for absent in ("AGENTS.md", "Use uv, never pip", "environment_context", "approval_policy", "gAAAAAB",
                   "Reading the queue", "base64", "Summary of the work so far"):
        assert absent not in text, absent
    assert codex_new.stats.skipped["injected"] == 2
    assert codex_new.stats.skipped["reasoning"] == 1
    assert codex_new.stats.skipped["content:input_image"] == 1


def test_codex_tool_calls_and_outputs(codex_new):
    assert texts(codex_new, TOOL_CALL) == ["shell: rg -n deadline sched/queue.py", "apply_patch: sched/queue.py"]
    outputs = texts(codex_new, TOOL_OUTPUT)
    assert outputs[0].splitlines()[0] == "80:    deadline check 0" and outputs[0].endswith("…")
    assert outputs[1] == "Success. Updated the following files:\nM sched/queue.py"


def test_codex_metadata_and_damage(codex_new):
    assert codex_new.id == "0199aa00-1111-7222-8333-944455556666"
    assert codex_new.project == "/home/ada/src/loom"
    assert codex_new.started == dt.datetime(2025, 10, 20, 8, 0, tzinfo=dt.UTC)
    assert codex_new.title.startswith("The loom scheduler drops jobs")
    assert codex_new.stats.skipped["future_record"] == 1
    assert codex_new.stats.skipped["compacted"] == 1
    assert codex_new.stats.partial_tail


def test_codex_twins_in_either_order_and_events_alone(tmp_path):
    def line(kind, payload):
        return json.dumps({"timestamp": "2025-10-20T08:00:00Z", "type": kind, "payload": payload}) + "\n"

    def item(role, text):
        return line("response_item", {"type": "message", "role": role,
                                      "content": [{"type": "input_text", "text": text}]})

    path = tmp_path / "r.jsonl"
    path.write_text(line("session_meta", {"id": "x", "cwd": "/w"})
                    + line("event_msg", {"type": "user_message", "message": "fix it"}) + item("user", "fix it")
                    + item("assistant", "done") + line("event_msg", {"type": "agent_message", "message": "done"})
                    # A build that wrote only events: each is kept.
                    + line("event_msg", {"type": "user_message", "message": "thanks"})
                    + line("event_msg", {"type": "agent_message", "message": "welcome"})
                    # Old builds marked injected events with a kind.
                    + line("event_msg", {"type": "user_message", "message": "<user_instructions>x",
                                         "kind": "user_instructions"}))
    session = read_session(path)
    assert [(m.kind, m.text) for m in session.messages] == [
        (PROMPT, "fix it"), (ANSWER, "done"), (PROMPT, "thanks"), (ANSWER, "welcome")]


def test_codex_old_layout(tmp_path):
    session = read_session(DATA / "codex-old.jsonl")
    assert session.id == "5973b6c0-94b8-487b-a530-2aeb6098ae0e"
    assert session.started == dt.datetime(2025, 6, 2, 10, 15, tzinfo=dt.UTC)
    assert [(m.kind, m.text) for m in session.messages] == [
        (PROMPT, "Why does `loom run` hang on an empty queue?"),
        (TOOL_CALL, "shell: sed -n '1,60p' loom/run.py"),
        (TOOL_OUTPUT, "while not queue.empty():\n    step()\nqueue.wait()"),
        (TOOL_CALL, "local_shell: pytest -q tests/test_run.py"),
        (TOOL_OUTPUT, "3 passed in 0.12s"),
        (ANSWER, ("It hangs because queue.wait() blocks when nothing was ever enqueued; return early when the queue "
                  "starts empty.")),
    ]
    assert session.stats.skipped["state"] == 2
    assert "user_instructions" not in everything(session) and "Use uv" not in everything(session)
    assert session.messages[0].line == 5
    snapshot = read_session(DATA / "codex-snapshot.json")
    assert [(m.kind, m.text) for m in snapshot.messages] == [(m.kind, m.text) for m in session.messages]
    lines = (DATA / "codex-snapshot.json").read_text().splitlines()
    assert lines[snapshot.messages[0].line - 1].strip() == "{"  # the line the item's object opens on
    assert snapshot.started == dt.datetime(2025, 5, 7, 17, 24, 21, tzinfo=dt.UTC)


# --- Gemini CLI --------------------------------------------------------------------------------

GEMINI_KINDS = [(PROMPT, "Show the build time in the footer of the dashboard"),
                (ANSWER, "I'll build first to see the current output."),
                (TOOL_CALL, "run_shell_command: npm run build"),
                (TOOL_OUTPUT, "Command: npm run build\nDirectory: (root)\nOutput: built in 4.2s\nchunk\nchunk\n…"),
                (ANSWER, "Added src/versionInfo.js exporting BUILD_TIME, injected by Vite's define at build time.")]


def test_gemini_saved_chat():
    session = read_session(DATA / "gemini-chat.json")
    assert [(m.kind, m.text) for m in session.messages] == GEMINI_KINDS
    assert session.id == "2dd3dd1f-0000-4000-8000-000000000001"
    assert session.title == "Show the dashboard's build time"
    assert session.started == dt.datetime(2025, 12, 1, 10, 0, tzinfo=dt.UTC)
    lines = (DATA / "gemini-chat.json").read_text().splitlines()
    for m in session.messages:  # the line the message's object opens on, its id on the next
        assert lines[m.line - 1].strip() == "{"
        assert lines[m.line].strip().startswith('"id": "m')
    assert session.stats.skipped["message:info"] == 1 and session.stats.skipped["message:error"] == 1
    assert session.stats.skipped["thoughts"] == 1 and session.stats.skipped["injected"] == 1
    assert "session_context" not in everything(session) and "Quota" not in everything(session)


def test_gemini_jsonl_chat_rewrites_and_rewinds():
    session = read_session(DATA / "gemini-chat.jsonl")
    # m2 was written before and after it grew a tool call: the last version, in the first place.
    assert [(m.kind, m.text) for m in session.messages] == GEMINI_KINDS
    assert "Abandoned answer" not in everything(session) and "different idea" not in everything(session)
    assert session.stats.skipped["rewound"] == 2
    assert session.title == "Build time in the dashboard footer"  # the $set
    assert [m.line for m in session.messages] == [2, 5, 5, 5, 10]


def test_gemini_checkpoint():
    session = read_session(DATA / "gemini-checkpoint.json")
    assert [(m.kind, m.text) for m in session.messages] == [
        (PROMPT, "Rename the footer component to AppFooter"), (TOOL_CALL, "replace: src/Footer.jsx"),
        (TOOL_OUTPUT, "Replaced 1 occurrence."), (ANSWER, "Renamed Footer to AppFooter in src/Footer.jsx.")]
    assert "Thinking about it" not in everything(session)


def test_gemini_chat_cut_short_keeps_what_came_before(tmp_path):
    data = (DATA / "gemini-chat.json").read_bytes()
    path = tmp_path / "cut.json"
    path.write_bytes(data[: data.index(b'"id": "m5"')])
    session = read_session(path, runtime="gemini")
    assert [m.text for m in session.messages] == [t for _, t in GEMINI_KINDS[:4]]
    assert session.stats.partial_tail


# --- aider and OpenClaw ------------------------------------------------------------------------

def test_aider_history_holds_two_sessions():
    first, second = read_sessions(DATA / "aider.chat.history.md")
    assert first.started == dt.datetime(2025, 3, 1, 14, 2, 11, tzinfo=dt.UTC)
    assert first.title == "add a --dry-run flag to the sync command it should print what would be copied"
    assert [(m.kind, m.line, m.end_line) for m in first.messages] == [
        (TOOL_OUTPUT, 4, 6), (PROMPT, 8, 9), (ANSWER, 10, 21), (TOOL_OUTPUT, 22, 23), (PROMPT, 25, 25),
        (TOOL_OUTPUT, 27, 27)]
    assert first.messages[1].text == "add a --dry-run flag to the sync command\nit should print what would be copied"
    assert "def sync(src, dst, dry_run=False):" in first.messages[2].text
    assert first.messages[4].text == "/run pytest -q"
    assert [m.text for m in second.messages] == [
        "why is the sync slow on network drives?", "It stats every file twice; caching the stat result halves the calls."]
    assert first.id != second.id


def test_openclaw_session():
    session = read_session(DATA / "openclaw.jsonl")
    assert session.title == "Staging TLS rotation"
    assert session.project == "/home/ada/ops"
    assert [(m.role, m.kind, m.text) for m in session.messages] == [
        ("user", PROMPT, "Rotate the staging TLS certificate"),
        ("assistant", ANSWER, "Rotating it with certbot now."),
        ("assistant", TOOL_CALL, "bash: certbot renew --cert-name staging"),
        ("tool", TOOL_OUTPUT, "Congratulations, all renewals succeeded"),
        ("user", TOOL_CALL, "bash: openssl x509 -enddate -noout -in staging.pem"),
        ("tool", TOOL_OUTPUT, "notAfter=Apr 26 10:00:00 2026 GMT")]
    assert "certbot it is" not in everything(session)


# --- exports -----------------------------------------------------------------------------------

def test_chatgpt_export_follows_the_visible_branch():
    conv1, conv2 = iter_export(DATA / "chatgpt-conversations.json")
    assert conv1.runtime == "chatgpt" and conv1.id == "conv-1" and conv1.title == "Sourdough proofing time"
    assert [(m.kind, m.text) for m in conv1.messages] == [
        (PROMPT, "how long to proof sourdough at 18 C? the dough in the photo"),
        (ANSWER, "Let me compute it."),
        (TOOL_CALL, "python: hours = 5 * 2 ** ((24 - 18) / 10) print(hours)"),
        (TOOL_OUTPUT, "7.57858283255199"),
        (ANSWER, "At 18 C bulk fermentation takes about 7.5 hours (a Q10 of 2 from 5 hours at 24 C).")]
    text = everything(conv1)
    for absent in ("Usually 4 to 6 hours", "I bake bread", "Be brief", "file-service", "Q10 of 2\"", "scaling"):
        assert absent not in text, absent
    assert conv1.stats.skipped["other-branch"] == 2
    assert conv1.started == dt.datetime.fromtimestamp(1730000000, dt.UTC)
    assert [m.text for m in conv2.messages] == ["best flour for baguettes?", "French T65 flour."]


def test_chatgpt_zip_is_the_same_as_its_json():
    a = [(s.id, [(m.kind, m.text) for m in s.messages]) for s in iter_export(DATA / "chatgpt-conversations.json")]
    b = [(s.id, [(m.kind, m.text) for m in s.messages]) for s in iter_export(DATA / "chatgpt-export.zip")]
    assert a == b and len(a) == 2
    assert [s.id for s in read_sessions(DATA / "chatgpt-export.zip")] == ["conv-1", "conv-2"]


def test_claude_ai_export():
    [conv] = iter_export(DATA / "claude-ai-conversations.json")
    assert conv.runtime == "claude-ai" and conv.title == "Pricing page copy"
    assert [(m.kind, m.text) for m in conv.messages] == [
        (PROMPT, "Rewrite the pricing page intro, shorter\n\n[attachment: pricing.md]"),
        (ANSWER, "Simple plans that grow with you: start free, upgrade when your team does."),
        (TOOL_CALL, "web_search: pricing page intro examples"),
        (TOOL_OUTPUT, "10 great pricing pages")]
    assert "Keep the three tiers" not in everything(conv) and "Our plans start at" not in everything(conv)


def test_export_cut_short_yields_the_conversations_before_the_cut(tmp_path):
    data = (DATA / "chatgpt-conversations.json").read_bytes()
    path = tmp_path / "conversations.json"
    path.write_bytes(data[: data.index(b'"Baguette flour"')])
    from memfs.index.text.transcripts import Stats
    stats = Stats()
    assert [s.id for s in iter_export(path, stats)] == ["conv-1"]
    assert stats.partial_tail and stats.records == 1


def test_a_zip_without_conversations_is_refused(tmp_path):
    path = tmp_path / "x.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("user.json", "{}")
    assert detect_path(path) is None
    with pytest.raises(FileNotFoundError):
        list(iter_export(path))


# --- bounded memory ----------------------------------------------------------------------------

_RSS = """
import json, resource, sys
from memfs.index.text.transcripts import read_sessions
n = sum(len(s.messages) for s in read_sessions(sys.argv[1]))
print(json.dumps({"messages": n, "maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _peak(path: Path) -> dict:
    out = subprocess.run([sys.executable, "-c", _RSS, str(path)], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_a_big_jsonl_session_is_read_in_bounded_memory(tmp_path):
    baseline = _peak(DATA / "claude-code.jsonl")["maxrss_kb"]
    path = tmp_path / "big.jsonl"
    chunk = "y" * 4_000_000
    with open(path, "w") as fh:
        for i in range(30):  # 120 MB of tool output in 30 lines
            record = {"parentUuid": None, "isSidechain": False, "type": "user", "uuid": f"u{i}", "sessionId": "s",
                      "message": {"role": "user", "content": [
                          {"type": "tool_result", "tool_use_id": f"t{i}", "content": chunk}]}}
            fh.write(json.dumps(record) + "\n")  # one 4 MB line at a time, not all at once
    peak = _peak(path)
    assert peak["messages"] == 30
    assert peak["maxrss_kb"] - baseline < 60_000, peak  # a few lines' worth, not the 120 MB file


def test_a_big_export_is_read_in_bounded_memory(tmp_path):
    baseline = _peak(DATA / "chatgpt-conversations.json")["maxrss_kb"]
    path = tmp_path / "conversations.json"
    with open(path, "w") as fh:
        fh.write("[")
        for i in range(120):  # 120 conversations of ~1 MB
            mapping = {"r": {"id": "r", "message": None, "parent": None, "children": ["a"]},
                       "a": {"id": "a", "parent": "r", "children": [], "message": {
                           "id": f"m{i}", "author": {"role": "user"}, "create_time": 1.0,
                           "content": {"content_type": "text", "parts": ["z" * 1_000_000]}}}}
            fh.write(("," if i else "") + json.dumps({"id": f"c{i}", "title": "t", "mapping": mapping,
                                                       "current_node": "a"}))
        fh.write("]")
    peak = _peak(path)
    assert peak["messages"] == 120
    assert peak["maxrss_kb"] - baseline < 60_000, peak  # not the 120 MB export


# --- the pieces --------------------------------------------------------------------------------

def test_cut_output_keeps_the_head():
    assert cut_output("a\n\n\nb\n") == "a\nb"
    assert cut_output("\n".join(str(i) for i in range(10))) == "0\n1\n2\n3\n4\n…"
    long = cut_output("x" * 5_000_000)
    assert len(long) == OUTPUT_CHARS + 2 and long.endswith("\n…")


def test_jsonscan_items_lines_and_chunk_boundaries(monkeypatch):
    monkeypatch.setattr(jsonscan, "CHUNK", 7)  # every value crosses a chunk boundary
    doc = '[\n {"a": "x]y,\\"z"},\n 12345678901234,\n\n ["[", {"b": []}],\n "é",\n null\n]'
    assert list(jsonscan.iter_array(io.BytesIO(doc.encode()))) == [
        (2, {"a": 'x]y,"z'}), (3, 12345678901234), (5, ["[", {"b": []}]), (6, "é"), (7, None)]
    obj = '{"sessionId": "s",\n "messages": [\n  {"id": 1},\n  {"id": 2}\n ],\n "summary": "t"}'
    assert list(jsonscan.iter_object(io.BytesIO(obj.encode()), frozenset({"messages"}))) == [
        ("sessionId", 1, "s"), ("messages", 3, {"id": 1}), ("messages", 4, {"id": 2}), ("summary", 6, "t")]


def test_jsonscan_cut_short_raises_after_the_items_before():
    items = jsonscan.iter_array(io.BytesIO(b'[{"a": 1}, {"b": 2}, {"c": '))
    assert next(items) == (1, {"a": 1})
    assert next(items) == (1, {"b": 2})
    with pytest.raises(jsonscan.ScanError):
        next(items)
    with pytest.raises(jsonscan.ScanError):
        list(jsonscan.iter_array(io.BytesIO(b'{"not": "an array"}')))


def test_a_title_is_the_first_prompt_that_says_something():
    from memfs.index.text.transcripts import Message, Session

    def prompt(text):
        return Message("user", PROMPT, text, 1, 1, None, text)

    session = Session("codex", "x", messages=[prompt("hey"), prompt("/init"), prompt("## Fix the flaky build\nplease")])
    assert session.finish().title == "Fix the flaky build please"
    assert Session("codex", "y", messages=[prompt("hey")]).finish().title == "hey"
    assert Session("codex", "z").finish().title == ""
