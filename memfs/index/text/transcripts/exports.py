"""Data exports of chat services, one conversation at a time: ChatGPT's and Claude.ai's
``conversations.json``, or the zip either service mails, which holds it.

Both are one JSON array of every conversation, hundreds of MB for a heavy user; it is read with
:mod:`.jsonscan`, so memory holds one conversation, never the export.
- ChatGPT: ``{id | conversation_id, title, create_time, update_time, current_node,
  mapping: {node id: {message, parent, children}}}``.  The mapping is a tree: every
  regenerated answer and edited prompt is a branch.  The conversation a person saw is the path
  from ``current_node`` up to the root, read top-down.  A message is ``{id, author: {role,
  name}, create_time, content: {content_type, parts | text}, recipient, metadata}``: text and
  multimodal_text are prompts and answers (image pointers left out); an assistant message to a
  recipient other than "all" is a tool call (code, a browser query); a ``tool`` author's
  message its output; system messages, hidden ones, thoughts and the user's custom
  instructions (``user_editable_context``) are skipped and counted.
- Claude.ai: ``{uuid, name, summary, created_at, updated_at, chat_messages: [{uuid, sender:
  human|assistant, text, content: [text | thinking | tool_use | tool_result blocks],
  created_at, attachments, files}]}``.  Attachments are named, their extracted text is not kept.
Messages have no line (0): an export is not a file a person edits.
"""

from __future__ import annotations

import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from .jsonscan import ScanError, iter_array
from .model import (
    ANSWER,
    ASSISTANT,
    PROMPT,
    TOOL,
    TOOL_CALL,
    TOOL_OUTPUT,
    USER,
    Message,
    Session,
    Stats,
    cut_output,
    one_line,
    title_of,
    utc,
)
from .tools import call_line, output_head

CHATGPT, CLAUDE_AI = "chatgpt", "claude-ai"
MEMBER = "conversations.json"


@contextmanager
def open_export(path: str | Path) -> Iterator[IO[bytes]]:
    """The conversations.json of an export: the file itself, or the member of that name in a
    zip (the shallowest, if several)."""
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.rsplit("/", 1)[-1] == MEMBER]
            if not names:
                raise FileNotFoundError(f"{path}: no {MEMBER} in this zip")
            with archive.open(min(names, key=lambda n: (n.count("/"), n))) as fp:
                yield fp
    else:
        with open(path, "rb") as fp:
            yield fp


def iter_export(path: str | Path, stats: Stats | None = None) -> Iterator[Session]:
    """Each conversation of a ChatGPT or Claude.ai export (file or zip), one at a time; which
    service wrote it is told by each conversation's keys.  ``stats`` counts conversations read
    and any that were not one of the two shapes, and ``bad_lines`` if the JSON broke off."""
    stats = stats if stats is not None else Stats()
    with open_export(path) as fp:
        try:
            for _, item in iter_array(fp):
                stats.records += 1
                if isinstance(item, dict) and isinstance(item.get("mapping"), dict):
                    yield chatgpt_conversation(item)
                elif isinstance(item, dict) and isinstance(item.get("chat_messages"), list):
                    yield claude_conversation(item)
                else:
                    stats.skip("not-a-conversation")
        except ScanError:
            stats.bad_lines += 1
            stats.partial_tail = True


# --- ChatGPT ---------------------------------------------------------------------------------

def visible_path(mapping: dict, current: Any) -> list[dict]:
    """The nodes from the root down to ``current``: the branch the person last saw.  Without a
    current node (old exports), the newest leaf's branch."""
    if not isinstance(current, str) or current not in mapping:
        leaves = [k for k, n in mapping.items() if isinstance(n, dict) and not n.get("children")]
        if not leaves:
            return []

        def made(key: str) -> float:
            msg = (mapping[key] or {}).get("message") or {}
            return float(msg.get("create_time") or 0)
        current = max(leaves, key=made)
    path: list[dict] = []
    seen: set[str] = set()
    node_id: Any = current
    while isinstance(node_id, str) and node_id in mapping and node_id not in seen:
        seen.add(node_id)
        node = mapping[node_id]
        if not isinstance(node, dict):
            break
        path.append(node)
        node_id = node.get("parent")
    path.reverse()
    return path


def _chatgpt_parts(content: dict) -> str:
    parts = []
    for part in content.get("parts") or []:
        if isinstance(part, str):
            parts.append(part)
        elif isinstance(part, dict) and isinstance(part.get("text"), str):
            parts.append(part["text"])  # audio transcriptions and the like; image pointers have none
    if isinstance(content.get("text"), str):
        parts.append(content["text"])
    if isinstance(content.get("result"), str):
        parts.append(content["result"])
    return "\n".join(p for p in parts if p).strip()


def chatgpt_conversation(conv: dict) -> Session:
    ident = str(conv.get("conversation_id") or conv.get("id") or "")
    session = Session(CHATGPT, ident, title=title_of(conv.get("title") or ""), started=utc(conv.get("create_time")),
                      updated=utc(conv.get("update_time")))
    stats = session.stats
    path = visible_path(conv["mapping"], conv.get("current_node"))
    stats.records = len(conv["mapping"])
    if len(conv["mapping"]) > len(path):
        stats.skip("other-branch", len(conv["mapping"]) - len(path))
    for node in path:
        msg = node.get("message")
        if not isinstance(msg, dict):
            continue  # the root
        author = msg.get("author") or {}
        role = author.get("role")
        content = msg.get("content") if isinstance(msg.get("content"), dict) else {}
        ctype = content.get("content_type")
        meta = msg.get("metadata") if isinstance(msg.get("metadata"), dict) else {}
        mid = str(msg.get("id") or node.get("id") or "")
        when = utc(msg.get("create_time"))
        recipient = msg.get("recipient") or "all"
        if meta.get("is_visually_hidden_from_conversation") or role == "system":
            stats.skip("hidden" if role != "system" else "system")
            continue
        if ctype in ("thoughts", "reasoning_recap", "user_editable_context", "model_editable_context", "system_error"):
            stats.skip(str(ctype))
            continue
        text = _chatgpt_parts(content)
        if not text:
            stats.skip(f"empty:{ctype}")
            continue
        if role == "user":
            session.messages.append(Message(USER, PROMPT, text, 0, 0, when, mid))
        elif role == "assistant" and recipient == "all":
            session.messages.append(Message(ASSISTANT, ANSWER, text, 0, 0, when, mid))
        elif role == "assistant":
            session.messages.append(Message(ASSISTANT, TOOL_CALL, call_line(str(recipient), text), 0, 0, when, mid))
        elif role == "tool":
            session.messages.append(Message(TOOL, TOOL_OUTPUT, cut_output(text), 0, 0, when, mid))
        else:
            stats.skip(f"role:{role}")
    return session.finish()


# --- Claude.ai -------------------------------------------------------------------------------

def claude_conversation(conv: dict) -> Session:
    session = Session(CLAUDE_AI, str(conv.get("uuid") or ""), title=title_of(conv.get("name") or ""),
                      started=utc(conv.get("created_at")), updated=utc(conv.get("updated_at")))
    stats = session.stats
    for msg in conv["chat_messages"]:
        stats.records += 1
        if not isinstance(msg, dict):
            stats.skip("not-an-object")
            continue
        sender = msg.get("sender")
        mid = str(msg.get("uuid") or "")
        when = utc(msg.get("created_at"))
        role, kind = (USER, PROMPT) if sender == "human" else (ASSISTANT, ANSWER) if sender == "assistant" else ("", "")
        if not role:
            stats.skip(f"sender:{sender}")
            continue
        texts: list[str] = []
        calls: list[Message] = []
        content = msg.get("content")
        if isinstance(content, list) and content:
            for n, block in enumerate(content):
                if not isinstance(block, dict):
                    continue
                btype = block.get("type")
                if btype == "text" and isinstance(block.get("text"), str):
                    texts.append(block["text"])
                elif btype == "tool_use":
                    calls.append(Message(ASSISTANT, TOOL_CALL, call_line(str(block.get("name")), block.get("input")),
                                         0, 0, when, str(block.get("id") or f"{mid}:{n}")))
                elif btype == "tool_result":
                    head = output_head(block.get("content"))
                    if head:
                        calls.append(Message(TOOL, TOOL_OUTPUT, head, 0, 0, when, f"{mid}:{n}"))
                else:
                    stats.skip(f"block:{btype}")  # thinking, images
        elif isinstance(msg.get("text"), str):
            texts.append(msg["text"])
        for attachment in (msg.get("attachments") or []) + (msg.get("files") or []):
            if isinstance(attachment, dict) and attachment.get("file_name"):
                texts.append(one_line(f"[attachment: {attachment['file_name']}]"))
                if attachment.get("extracted_content"):
                    stats.skip("attachment-content")
        text = "\n\n".join(t.strip() for t in texts if t.strip())
        if text:
            session.messages.append(Message(role, kind, text, 0, 0, when, mid))
        session.messages.extend(calls)
    return session.finish()
