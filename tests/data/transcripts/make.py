#!/usr/bin/env python3
"""Writes the session fixtures of this folder: one small session per runtime, in that runtime's
real format (record types, keys and nesting as the runtimes write them), with the awkward parts
the readers must handle.  Every word in them is made up here.

    python tests/data/transcripts/make.py

The awkward parts, by file:
- claude-code.jsonl: a summary title record; a response split into records sharing message.id
  (thinking with its signature, text, two tool_use), one of them written twice; a user prompt
  with a <system-reminder> and a pasted API key; an image block (base64); a skill body (isMeta);
  a slash command and its stdout; a task notification; a sidechain record; a compact summary; an
  interrupted marker; an API error; an unknown record type; a half-written last line.
  (The 5 MB tool output line is added by the tests, not kept in the repository.)
- codex-new.jsonl: session_meta with instructions; AGENTS.md and <environment_context> as user
  messages; every message twice (response_item + event_msg) in both orders; the same prompt
  said twice ("continue"); encrypted reasoning; shell and apply_patch calls with outputs; an
  input_image; token counts; a compacted record; an unknown type; a half-written last line.
- codex-old.jsonl: the mid-2025 layout: a bare session line, bare items, state records.
- codex-snapshot.json: the JSON snapshot {"session", "items"}.
- gemini-chat.json: a saved chat (one indented object), tool calls with results, thoughts,
  info and error messages, a summary.
- gemini-chat.jsonl: the JSONL chat: metadata, a message rewritten as it grew, $set, $rewindTo.
- gemini-checkpoint.json: a /chat save checkpoint.
- aider.chat.history.md: two sessions in one history.
- openclaw.jsonl: an OpenClaw (pi) session with a branch, a tool call and a bash execution.
- chatgpt-conversations.json (+ chatgpt-export.zip holding it): a conversation with an edited
  prompt (two branches), a code interpreter call and output, hidden system and context
  messages, an image pointer; a second conversation without current_node.
- claude-ai-conversations.json: a conversation with thinking, a tool use and an attachment.
"""

from __future__ import annotations

import base64
import json
import zipfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
# Fake, shaped like an OpenAI project key so the secrets rules see it; not a key of anyone.
FAKE_KEY = "sk-proj-FAKE0fake1FAKE2fake3FAKE4fake5FAKE6fake7FAKE8fake9"
PNG = base64.b64encode(bytes(range(256)) * 4).decode()  # stands for an image's bytes
SIGNATURE = base64.b64encode(b"thinking-signature-" * 20).decode()
ENCRYPTED = "gAAAAAB" + base64.urlsafe_b64encode(b"encrypted-reasoning-" * 30).decode()


def jsonl(name: str, records: list, tail: str = "") -> None:
    text = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records) + tail
    (HERE / name).write_text(text, encoding="utf-8")


# --- Claude Code ---------------------------------------------------------------------------------

SID = "5b0c5e2e-8f5e-4d57-9a51-2d7e3f0c1a01"
CWD = "/home/ada/src/kettle"


def cc(kind: str, uuid: str, parent: str | None, ts: str, message: dict, **extra) -> dict:
    rec = {"parentUuid": parent, "isSidechain": False, "userType": "external", "cwd": CWD, "sessionId": SID,
           "version": "2.0.31", "gitBranch": "main", "type": kind, "message": message, "uuid": uuid,
           "timestamp": ts}
    rec.update(extra)
    return rec


def assistant(mid: str, blocks: list) -> dict:
    return {"model": "claude-sonnet-4-5-20250929", "id": mid, "type": "message", "role": "assistant",
            "content": blocks, "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 10, "output_tokens": 5}}


def claude_code() -> None:
    recs: list = [
        {"type": "summary", "summary": "Kettle firmware: fix the boil-dry cutoff", "leafUuid": "u-09"},
        {"type": "file-history-snapshot", "messageId": "u-01", "snapshot": {"messageId": "u-01",
                                                                             "trackedFileBackups": {}}},
        cc("user", "u-01", None, "2025-11-03T09:00:00.000Z",
           {"role": "user", "content": "The kettle keeps heating after it boils dry. The cutoff lives in "
                                       "firmware/thermal.c, can you find why? My key is " + FAKE_KEY +
                                       "\n<system-reminder>The user has 3 open files.</system-reminder>"}),
        cc("assistant", "u-02", "u-01", "2025-11-03T09:00:03.000Z",
           assistant("msg_A1", [{"type": "thinking", "thinking": "The user wants the cutoff logic.",
                                 "signature": SIGNATURE}]), requestId="req_1"),
        cc("assistant", "u-03", "u-02", "2025-11-03T09:00:04.000Z",
           assistant("msg_A1", [{"type": "text", "text": "I'll read the thermal module first."}]),
           requestId="req_1"),
        cc("assistant", "u-04", "u-03", "2025-11-03T09:00:05.000Z",
           assistant("msg_A1", [{"type": "tool_use", "id": "toolu_R1", "name": "Read",
                                 "input": {"file_path": f"{CWD}/firmware/thermal.c"}}]), requestId="req_1"),
        cc("assistant", "u-05", "u-04", "2025-11-03T09:00:05.500Z",
           assistant("msg_A1", [{"type": "tool_use", "id": "toolu_G1", "name": "Grep",
                                 "input": {"pattern": "DRY_LIMIT_C", "path": "firmware", "output_mode": "content"}}]),
           requestId="req_1"),
        # The same record written again (a resumed session copies its history).
        cc("assistant", "u-05", "u-04", "2025-11-03T09:00:05.500Z",
           assistant("msg_A1", [{"type": "tool_use", "id": "toolu_G1", "name": "Grep",
                                 "input": {"pattern": "DRY_LIMIT_C", "path": "firmware", "output_mode": "content"}}]),
           requestId="req_1"),
        cc("user", "u-06", "u-05", "2025-11-03T09:00:06.000Z",
           {"role": "user", "content": [{"tool_use_id": "toolu_R1", "type": "tool_result",
                                         "content": "\n".join(f"{i}\tline {i} of thermal.c" for i in range(1, 40))}]},
           toolUseResult={"type": "text", "file": {"filePath": f"{CWD}/firmware/thermal.c", "numLines": 39}}),
        cc("user", "u-07", "u-06", "2025-11-03T09:00:06.100Z",
           {"role": "user", "content": [{"tool_use_id": "toolu_G1", "type": "tool_result",
                                         "content": "firmware/thermal.c:12:#define DRY_LIMIT_C 140"}]}),
        cc("assistant", "u-08", "u-07", "2025-11-03T09:00:09.000Z",
           assistant("msg_A2", [{"type": "text", "text": "Found it: DRY_LIMIT_C is 140 but the sensor saturates "
                                                         "at 125, so the cutoff never trips."}])),
        cc("assistant", "u-08b", "u-08", "2025-11-03T09:00:09.200Z",
           assistant("msg_A2", [{"type": "text", "text": "Lowering it to 118 gives a margin below saturation."}])),
        cc("assistant", "u-08c", "u-08b", "2025-11-03T09:00:09.300Z",
           assistant("msg_A2", [{"type": "tool_use", "id": "toolu_E1", "name": "Edit",
                                 "input": {"file_path": f"{CWD}/firmware/thermal.c", "old_string": "140",
                                           "new_string": "118", "replace_all": False}}])),
        {"type": "some-future-record", "sessionId": SID, "payload": {"x": 1}},
        cc("user", "u-09", "u-08c", "2025-11-03T09:01:00.000Z",
           {"role": "user", "content": [{"type": "text", "text": "Here is the scope trace"},
                                        {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                     "data": PNG}}]}),
        cc("user", "u-10", "u-09", "2025-11-03T09:01:00.100Z",
           {"role": "user", "content": [{"type": "text", "text": "Base directory for this skill: /home/ada/.claude/"
                                                                 "skills/firmware\n\nAlways run the HIL tests."}]},
           isMeta=True),
        cc("user", "u-11", "u-10", "2025-11-03T09:02:00.000Z",
           {"role": "user", "content": "<command-name>/review</command-name>\n            <command-message>review"
                                       "</command-message>\n            <command-args>thermal.c</command-args>"}),
        cc("user", "u-12", "u-11", "2025-11-03T09:02:01.000Z",
           {"role": "user", "content": "<local-command-stdout>Review queued for thermal.c</local-command-stdout>"}),
        cc("user", "u-13", "u-12", "2025-11-03T09:03:00.000Z",
           {"role": "user", "content": "<task-notification>\n<task-id>a1</task-id>\n<status>completed</status>\n"
                                       "<summary>Agent \"Run HIL bench\" completed</summary>\n<result>HIL bench: "
                                       "12 passed, 0 failed.\nCutoff tripped at 117.6 C.</result>\n"
                                       "</task-notification>"}),
        cc("user", "u-14", "u-13", "2025-11-03T09:03:30.000Z",
           {"role": "user", "content": "Check every sensor table for the same saturation issue"},
           isSidechain=True),
        cc("user", "u-15", "u-14", "2025-11-03T09:04:00.000Z",
           {"role": "user", "content": [{"type": "text", "text": "[Request interrupted by user]"}]}),
        cc("user", "u-16", "u-15", "2025-11-03T09:05:00.000Z",
           {"role": "user", "content": "This session is being continued from a previous conversation that ran "
                                       "out of context. The summary below covers the earlier portion."},
           isCompactSummary=True, isVisibleInTranscriptOnly=True),
        cc("assistant", "u-17", "u-16", "2025-11-03T09:05:01.000Z",
           assistant("msg_ERR", [{"type": "text", "text": "API Error: 529 overloaded"}]), isApiErrorMessage=True),
        {"type": "system", "subtype": "turn_duration", "durationMs": 1200, "sessionId": SID, "uuid": "s-1",
         "timestamp": "2025-11-03T09:05:02.000Z"},
        cc("user", "u-18", "u-17", "2025-11-03T09:06:00.000Z",
           {"role": "user", "content": "Ship it and note the new limit in CHANGELOG.md"}),
    ]
    half = json.dumps(cc("assistant", "u-19", "u-18", "2025-11-03T09:06:02.000Z",
                         assistant("msg_A3", [{"type": "text", "text": "Done"}])))[:90]
    jsonl("claude-code.jsonl", recs, tail=half)


# --- Codex ---------------------------------------------------------------------------------------

CODEX_ID = "0199aa00-1111-7222-8333-944455556666"
AGENTS = "# AGENTS.md instructions for /home/ada/src/loom\n\n<INSTRUCTIONS>\nUse uv, never pip.\n</INSTRUCTIONS>"
ENV = ("<environment_context>\n  <cwd>/home/ada/src/loom</cwd>\n  <approval_policy>on-request</approval_policy>\n"
       "  <sandbox_mode>workspace-write</sandbox_mode>\n</environment_context>")


def cx(ts: str, kind: str, payload: dict) -> dict:
    return {"timestamp": ts, "type": kind, "payload": payload}


def msg(role: str, *texts: str, image: bool = False) -> dict:
    content = [{"type": "input_text" if role == "user" else "output_text", "text": t} for t in texts]
    if image:
        content.append({"type": "input_image", "image_url": "data:image/png;base64," + PNG})
    return {"type": "message", "role": role, "content": content}


def codex_new() -> None:
    prompt = "The loom scheduler drops jobs when two share a deadline; fix the tie-break in sched/queue.py"
    answer = "Fixed: ties now break on job id, so equal deadlines keep submission order (sched/queue.py:88)."
    recs = [
        cx("2025-10-20T08:00:00.000Z", "session_meta",
           {"id": CODEX_ID, "timestamp": "2025-10-20T08:00:00.000Z", "cwd": "/home/ada/src/loom",
            "originator": "codex_cli_rs", "cli_version": "0.47.0", "instructions": "Use uv, never pip.",
            "source": "cli", "git": {"branch": "main"}}),
        cx("2025-10-20T08:00:00.010Z", "response_item", msg("user", AGENTS)),
        cx("2025-10-20T08:00:00.020Z", "response_item", msg("user", ENV)),
        cx("2025-10-20T08:00:05.000Z", "response_item", msg("user", prompt, image=True)),
        cx("2025-10-20T08:00:05.001Z", "event_msg", {"type": "user_message", "message": prompt, "kind": "plain",
                                                     "images": ["data:image/png;base64," + PNG]}),
        cx("2025-10-20T08:00:05.002Z", "turn_context", {"cwd": "/home/ada/src/loom", "approval_policy": "on-request",
                                                        "model": "gpt-5-codex", "summary": "auto"}),
        cx("2025-10-20T08:00:06.000Z", "event_msg", {"type": "agent_reasoning", "text": "**Reading the queue**"}),
        cx("2025-10-20T08:00:06.100Z", "response_item",
           {"type": "reasoning", "summary": [{"type": "summary_text", "text": "**Reading the queue**"}],
            "content": None, "encrypted_content": ENCRYPTED}),
        cx("2025-10-20T08:00:07.000Z", "response_item",
           {"type": "function_call", "name": "shell", "call_id": "call_1",
            "arguments": json.dumps({"command": ["bash", "-lc", "rg -n deadline sched/queue.py"],
                                     "workdir": "/home/ada/src/loom"})}),
        cx("2025-10-20T08:00:07.200Z", "response_item",
           {"type": "function_call_output", "call_id": "call_1",
            "output": json.dumps({"output": "\n".join(f"{80 + i}:    deadline check {i}" for i in range(12)),
                                  "metadata": {"exit_code": 0, "duration_seconds": 0.1}})}),
        cx("2025-10-20T08:00:08.000Z", "event_msg", {"type": "token_count", "info": None, "rate_limits": None}),
        cx("2025-10-20T08:00:09.000Z", "response_item",
           {"type": "custom_tool_call", "status": "completed", "call_id": "call_2", "name": "apply_patch",
            "input": "*** Begin Patch\n*** Update File: sched/queue.py\n@@\n-    return a.deadline < b.deadline\n"
                     "+    return (a.deadline, a.id) < (b.deadline, b.id)\n*** End Patch\n"}),
        cx("2025-10-20T08:00:09.100Z", "response_item",
           {"type": "custom_tool_call_output", "call_id": "call_2",
            "output": json.dumps({"output": "Success. Updated the following files:\nM sched/queue.py\n",
                                  "metadata": {"exit_code": 0}})}),
        cx("2025-10-20T08:00:10.000Z", "event_msg", {"type": "agent_message", "message": answer}),
        cx("2025-10-20T08:00:10.001Z", "event_msg", {"type": "token_count", "info": None, "rate_limits": None}),
        cx("2025-10-20T08:00:10.002Z", "response_item", msg("assistant", answer)),
        cx("2025-10-20T08:01:00.000Z", "response_item", msg("user", "continue")),
        cx("2025-10-20T08:01:00.001Z", "event_msg", {"type": "user_message", "message": "continue", "kind": "plain"}),
        cx("2025-10-20T08:01:05.000Z", "event_msg", {"type": "agent_message", "message": "Tests pass: 41 passed."}),
        cx("2025-10-20T08:01:05.001Z", "response_item", msg("assistant", "Tests pass: 41 passed.")),
        cx("2025-10-20T08:02:00.000Z", "response_item", msg("user", "continue")),
        cx("2025-10-20T08:02:00.001Z", "event_msg", {"type": "user_message", "message": "continue", "kind": "plain"}),
        cx("2025-10-20T08:02:01.000Z", "compacted", {"message": "Summary of the work so far: the tie-break fix."}),
        cx("2025-10-20T08:02:02.000Z", "future_record", {"anything": True}),
        cx("2025-10-20T08:02:03.000Z", "event_msg", {"type": "agent_message", "message": "Nothing left to do."}),
        cx("2025-10-20T08:02:03.001Z", "response_item", msg("assistant", "Nothing left to do.")),
    ]
    jsonl("codex-new.jsonl", recs, tail='{"timestamp":"2025-10-20T08:02:04.000Z","type":"response_item","payl')


def codex_old_items() -> list:
    return [
        msg("user", "<user_instructions>\n\nUse uv, never pip.\n\n</user_instructions>"),
        msg("user", "<environment_context>\nCurrent working directory: /home/ada/src/loom\n</environment_context>"),
        msg("user", "Why does `loom run` hang on an empty queue?"),
        {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": ENCRYPTED},
        {"type": "function_call", "id": "fc_1", "name": "shell", "call_id": "call_a",
         "arguments": json.dumps({"command": ["bash", "-lc", "sed -n '1,60p' loom/run.py"]})},
        {"type": "function_call_output", "call_id": "call_a",
         "output": json.dumps({"output": "while not queue.empty():\n    step()\nqueue.wait()\n",
                               "metadata": {"exit_code": 0}})},
        {"type": "local_shell_call", "id": "lsh_1", "call_id": "call_b", "status": "completed",
         "action": {"type": "exec", "command": ["pytest", "-q", "tests/test_run.py"], "timeout_ms": 10000}},
        {"type": "function_call_output", "call_id": "call_b", "output": "3 passed in 0.12s"},
        msg("assistant", "It hangs because queue.wait() blocks when nothing was ever enqueued; "
                         "return early when the queue starts empty."),
    ]


def codex_old() -> None:
    items = codex_old_items()
    recs = [{"id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e", "timestamp": "2025-06-02T10:15:00.000Z",
             "instructions": "Use uv, never pip.", "git": {"commit_hash": "a" * 40, "branch": "main"}},
            {"record_type": "state"}, *items[:3], {"record_type": "state"}, *items[3:]]
    jsonl("codex-old.jsonl", recs)
    snapshot = {"session": {"timestamp": "2025-05-07T17:24:21.000Z", "id": "5973b6c0-94b8-487b-a530-2aeb6098ae0f",
                            "instructions": "Why does `loom run` hang on an empty queue?"}, "items": items}
    (HERE / "codex-snapshot.json").write_text(json.dumps(snapshot, indent=2) + "\n", encoding="utf-8")


# --- Gemini CLI ----------------------------------------------------------------------------------

def gemini_messages() -> list:
    call = {"id": "run_shell_command-1-abc", "name": "run_shell_command",
            "args": {"command": "npm run build", "description": "Build the dashboard"},
            "result": [{"functionResponse": {"id": "run_shell_command-1-abc", "name": "run_shell_command",
                                             "response": {"output": "Command: npm run build\nDirectory: (root)\n"
                                                                    "Output: built in 4.2s\n" + "chunk\n" * 30}}}],
            "status": "success", "timestamp": "2025-12-01T10:00:12.000Z", "displayName": "Shell",
            "description": "Runs a shell command.", "resultDisplay": "built in 4.2s", "renderOutputAsMarkdown": False}
    return [
        {"id": "m1", "timestamp": "2025-12-01T10:00:00.000Z", "type": "user",
         "content": "Show the build time in the footer of the dashboard"},
        {"id": "m2", "timestamp": "2025-12-01T10:00:10.000Z", "type": "gemini",
         "content": "I'll build first to see the current output.", "toolCalls": [call],
         "thoughts": [{"subject": "Planning", "description": "Check the build.", "timestamp":
                       "2025-12-01T10:00:05.000Z"}],
         "tokens": {"input": 10, "output": 5, "cached": 0, "thoughts": 3, "tool": 0, "total": 18},
         "model": "gemini-2.5-pro"},
        {"id": "m3", "timestamp": "2025-12-01T10:00:20.000Z", "type": "info", "content": "Request cancelled."},
        {"id": "m4", "timestamp": "2025-12-01T10:00:30.000Z", "type": "user",
         "content": [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}]},
        {"id": "m5", "timestamp": "2025-12-01T10:00:40.000Z", "type": "gemini",
         "content": "Added src/versionInfo.js exporting BUILD_TIME, injected by Vite's define at build time."},
        {"id": "m6", "timestamp": "2025-12-01T10:00:50.000Z", "type": "error", "content": "Quota exceeded."},
    ]


def gemini() -> None:
    chat = {"sessionId": "2dd3dd1f-0000-4000-8000-000000000001", "projectHash": "f" * 64,
            "startTime": "2025-12-01T10:00:00.000Z", "lastUpdated": "2025-12-01T10:00:50.000Z",
            "messages": gemini_messages(), "summary": "Show the dashboard's build time"}
    (HERE / "gemini-chat.json").write_text(json.dumps(chat, indent=2) + "\n", encoding="utf-8")
    msgs = gemini_messages()
    first = dict(msgs[1], toolCalls=[], tokens=None)  # the message as first written, before its tool call
    recs = [{"sessionId": "2dd3dd1f-0000-4000-8000-000000000002", "projectHash": "f" * 64,
             "startTime": "2025-12-01T10:00:00.000Z", "lastUpdated": "2025-12-01T10:00:00.000Z", "kind": "main"},
            msgs[0], first, {"$set": {"lastUpdated": "2025-12-01T10:00:10.000Z"}}, msgs[1], msgs[2],
            {"id": "m7", "timestamp": "2025-12-01T10:00:45.000Z", "type": "user", "content": "Try a different idea"},
            {"id": "m8", "timestamp": "2025-12-01T10:00:46.000Z", "type": "gemini", "content": "Abandoned answer."},
            {"$rewindTo": "m7"}, msgs[4], {"$set": {"summary": "Build time in the dashboard footer"}}]
    jsonl("gemini-chat.jsonl", recs)
    checkpoint = {"history": [
        {"role": "user", "parts": [{"text": "<session_context>\nThis is the Gemini CLI.\n</session_context>"}]},
        {"role": "user", "parts": [{"text": "Rename the footer component to AppFooter"}]},
        {"role": "model", "parts": [{"text": "Thinking about it", "thought": True},
                                    {"functionCall": {"name": "replace", "args": {"file_path": "src/Footer.jsx",
                                                                                  "old_string": "a", "new_string": "b"}}}]},
        {"role": "user", "parts": [{"functionResponse": {"name": "replace",
                                                         "response": {"output": "Replaced 1 occurrence."}}}]},
        {"role": "model", "parts": [{"text": "Renamed Footer to AppFooter in src/Footer.jsx."}]}],
        "authType": "oauth-personal"}
    (HERE / "gemini-checkpoint.json").write_text(json.dumps(checkpoint, indent=2) + "\n", encoding="utf-8")


# --- aider ---------------------------------------------------------------------------------------

AIDER = """
# aider chat started at 2025-03-01 14:02:11

> /usr/local/bin/aider --model sonnet
> Aider v0.74.0
> Git repo: .git with 42 files

#### add a --dry-run flag to the sync command  
#### it should print what would be copied  

I'll add the flag to `cli.py`.

cli.py
```python
<<<<<<< SEARCH
def sync(src, dst):
=======
def sync(src, dst, dry_run=False):
>>>>>>> REPLACE
```

> Applied edit to cli.py  
> Commit 3f2a1bc feat: add --dry-run to sync  

#### /run pytest -q

> 5 passed in 0.31s  

# aider chat started at 2025-03-02 09:30:00

#### why is the sync slow on network drives?

It stats every file twice; caching the stat result halves the calls.
"""


def aider() -> None:
    (HERE / "aider.chat.history.md").write_text(AIDER, encoding="utf-8")


# --- OpenClaw ------------------------------------------------------------------------------------

def openclaw() -> None:
    recs = [
        {"type": "session", "version": 3, "id": "c0ffee00-0000-4000-8000-00000000beef",
         "timestamp": "2026-01-26T09:59:00.000Z", "cwd": "/home/ada/ops"},
        {"type": "model_change", "id": "e1", "parentId": None, "timestamp": "2026-01-26T09:59:01.000Z",
         "provider": "anthropic", "modelId": "claude-sonnet-4-5"},
        {"type": "message", "id": "e2", "parentId": "e1", "timestamp": "2026-01-26T10:00:00.000Z",
         "message": {"role": "user", "content": "Rotate the staging TLS certificate", "timestamp": 1769421600000}},
        {"type": "message", "id": "e3", "parentId": "e2", "timestamp": "2026-01-26T10:00:05.000Z",
         "message": {"role": "assistant", "content": [
             {"type": "thinking", "thinking": "certbot it is", "thinkingSignature": SIGNATURE},
             {"type": "text", "text": "Rotating it with certbot now."},
             {"type": "toolCall", "id": "t1", "name": "bash", "arguments": {"command": "certbot renew --cert-name staging"}}],
                     "provider": "anthropic", "model": "claude-sonnet-4-5", "stopReason": "toolUse"}},
        {"type": "message", "id": "e4", "parentId": "e3", "timestamp": "2026-01-26T10:00:09.000Z",
         "message": {"role": "toolResult", "toolCallId": "t1", "toolName": "bash",
                     "content": [{"type": "text", "text": "Congratulations, all renewals succeeded"}], "isError": False}},
        {"type": "message", "id": "e5", "parentId": "e2", "timestamp": "2026-01-26T10:01:00.000Z",
         "message": {"role": "bashExecution", "command": "openssl x509 -enddate -noout -in staging.pem",
                     "output": "notAfter=Apr 26 10:00:00 2026 GMT", "exitCode": 0, "cancelled": False,
                     "truncated": False}},
        {"type": "session_info", "id": "e6", "parentId": "e5", "timestamp": "2026-01-26T10:02:00.000Z",
         "name": "Staging TLS rotation"},
        {"type": "compaction", "id": "e7", "parentId": "e6", "timestamp": "2026-01-26T10:03:00.000Z",
         "summary": "Rotated the cert.", "firstKeptEntryId": "e4", "tokensBefore": 5000},
    ]
    jsonl("openclaw.jsonl", recs)


# --- ChatGPT and Claude.ai exports -------------------------------------------------------------

def gpt_node(nid: str, parent: str | None, children: list, message: dict | None) -> dict:
    return {"id": nid, "message": message, "parent": parent, "children": children}


def gpt_msg(mid: str, role: str, t: float, content: dict, recipient: str = "all", hidden: bool = False,
            name: str | None = None) -> dict:
    meta = {"is_visually_hidden_from_conversation": True} if hidden else {}
    return {"id": mid, "author": {"role": role, "name": name, "metadata": {}}, "create_time": t, "update_time": None,
            "content": content, "status": "finished_successfully", "end_turn": None, "weight": 1.0,
            "metadata": meta, "recipient": recipient, "channel": None}


def text(*parts) -> dict:
    return {"content_type": "text", "parts": list(parts)}


def chatgpt() -> list:
    t = 1730000000.0
    mapping = {
        "root": gpt_node("root", None, ["sys"], None),
        "sys": gpt_node("sys", "root", ["ctx"], gpt_msg("sys", "system", t, text(""), hidden=True)),
        "ctx": gpt_node("ctx", "sys", ["u1", "u1b"], gpt_msg(
            "ctx", "user", t, {"content_type": "user_editable_context", "user_profile": "I bake bread.",
                               "user_instructions": "Be brief."}, hidden=True)),
        # The first version of the prompt, edited later: a branch the person no longer sees.
        "u1": gpt_node("u1", "ctx", ["a1"], gpt_msg("u1", "user", t + 1, text("how long to proof sourdough?"))),
        "a1": gpt_node("a1", "u1", [], gpt_msg("a1", "assistant", t + 2, text("Usually 4 to 6 hours."))),
        "u1b": gpt_node("u1b", "ctx", ["a1b"], gpt_msg("u1b", "user", t + 10, {
            "content_type": "multimodal_text",
            "parts": [{"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-AbC123",
                       "size_bytes": 1000, "width": 10, "height": 10},
                      "how long to proof sourdough at 18 C? the dough in the photo"]})),
        "a1b": gpt_node("a1b", "u1b", ["c1"], gpt_msg("a1b", "assistant", t + 11, text("Let me compute it."))),
        "c1": gpt_node("c1", "a1b", ["o1"], gpt_msg("c1", "assistant", t + 12, {
            "content_type": "code", "language": "unknown", "text": "hours = 5 * 2 ** ((24 - 18) / 10)\nprint(hours)"},
                                                   recipient="python")),
        "o1": gpt_node("o1", "c1", ["th"], gpt_msg("o1", "tool", t + 13, {
            "content_type": "execution_output", "text": "7.57858283255199"}, name="python")),
        "th": gpt_node("th", "o1", ["a2"], gpt_msg("th", "assistant", t + 14, {
            "content_type": "thoughts", "thoughts": [{"summary": "scaling", "content": "Q10 of 2"}]})),
        "a2": gpt_node("a2", "th", [], gpt_msg("a2", "assistant", t + 15, text(
            "At 18 C bulk fermentation takes about 7.5 hours (a Q10 of 2 from 5 hours at 24 C)."))),
    }
    conv1 = {"title": "Sourdough proofing time", "create_time": t, "update_time": t + 15, "mapping": mapping,
             "moderation_results": [], "current_node": "a2", "plugin_ids": None, "conversation_id": "conv-1",
             "conversation_template_id": None, "gizmo_id": None, "is_archived": False, "id": "conv-1"}
    mapping2 = {
        "r": gpt_node("r", None, ["q"], None),
        "q": gpt_node("q", "r", ["x"], gpt_msg("q", "user", t + 100, text("best flour for baguettes?"))),
        "x": gpt_node("x", "q", [], gpt_msg("x", "assistant", t + 101, text("French T65 flour."))),
    }
    conv2 = {"title": "Baguette flour", "create_time": t + 100, "update_time": t + 101, "mapping": mapping2,
             "id": "conv-2"}
    return [conv1, conv2]


def claude_ai() -> list:
    return [{
        "uuid": "7f0e0c1a-0000-4000-8000-0000000000c1", "name": "Pricing page copy", "summary": "",
        "created_at": "2025-09-01T12:00:00.000000Z", "updated_at": "2025-09-01T12:05:00.000000Z",
        "account": {"uuid": "acc-1"},
        "chat_messages": [
            {"uuid": "cm-1", "text": "Rewrite the pricing page intro, shorter", "sender": "human",
             "created_at": "2025-09-01T12:00:00.000000Z", "updated_at": "2025-09-01T12:00:00.000000Z",
             "content": [{"type": "text", "text": "Rewrite the pricing page intro, shorter",
                          "start_timestamp": None, "stop_timestamp": None, "citations": []}],
             "attachments": [{"file_name": "pricing.md", "file_size": 2000, "file_type": "text/markdown",
                              "extracted_content": "# Pricing\nOur plans start at..."}], "files": []},
            {"uuid": "cm-2", "text": "", "sender": "assistant", "created_at": "2025-09-01T12:00:10.000000Z",
             "updated_at": "2025-09-01T12:00:10.000000Z",
             "content": [{"type": "thinking", "thinking": "Keep the three tiers.", "summaries": []},
                         {"type": "tool_use", "name": "web_search", "input": {"query": "pricing page intro examples"}},
                         {"type": "tool_result", "name": "web_search", "content": [{"type": "text", "text":
                                                                                       "10 great pricing pages"}]},
                         {"type": "text", "text": "Simple plans that grow with you: start free, upgrade when "
                                                  "your team does."}],
             "attachments": [], "files": []},
        ]}]


def exports() -> None:
    conversations = json.dumps(chatgpt(), indent=1)
    (HERE / "chatgpt-conversations.json").write_text(conversations + "\n", encoding="utf-8")
    with zipfile.ZipFile(HERE / "chatgpt-export.zip", "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr(zipfile.ZipInfo("chat.html", (2025, 1, 1, 0, 0, 0)), "<html></html>")
        z.writestr(zipfile.ZipInfo("conversations.json", (2025, 1, 1, 0, 0, 0)), conversations + "\n")
        z.writestr(zipfile.ZipInfo("user.json", (2025, 1, 1, 0, 0, 0)), '{"id": "user-1"}')
    (HERE / "claude-ai-conversations.json").write_text(json.dumps(claude_ai()) + "\n", encoding="utf-8")


if __name__ == "__main__":
    claude_code()
    codex_new()
    codex_old()
    gemini()
    aider()
    openclaw()
    exports()
