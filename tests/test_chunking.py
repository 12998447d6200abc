import json

from memfs.index.text import tokens
from memfs.index.text.chunking import chunk_markdown, chunk_messages
from memfs.index.text.messages import Message, parse_jsonl


def test_lines_are_one_based_and_cover_the_file() -> None:
    text = "".join(f"line {i} " + "word " * 30 + "\n" for i in range(1, 101))
    chunks = chunk_markdown(text, 400, 80)
    assert chunks[0].start_line == 1 and chunks[-1].end_line == 100
    lines = text.split("\n")
    for chunk in chunks:
        assert tokens.count(chunk.text) <= 400
        assert chunk.text == "\n".join(lines[chunk.start_line - 1 : chunk.end_line])
    for before, after in zip(chunks, chunks[1:]):
        assert after.start_line <= before.end_line  # overlap
        assert after.end_line > before.end_line  # progress: no chunk only of overlap


def test_overlong_line_is_split_and_cites_its_line() -> None:
    text = "short\n" + "x" * 20 + " " + "lorem ipsum " * 2000 + "\nlast\n"
    chunks = chunk_markdown(text, 400, 80)
    assert all(tokens.count(c.text) <= 401 for c in chunks)
    assert any(c.start_line == c.end_line == 2 for c in chunks)
    joined = "".join(c.text for c in chunks if c.start_line == c.end_line == 2)
    assert "lorem ipsum" in joined
    assert chunks[-1].end_line == 3


def test_cjk_counts_and_splits_without_mangling() -> None:
    line = "我们决定使用PostgreSQL作为数据库。" * 200
    chunks = chunk_markdown(line + "\n", 100, 20)
    assert len(chunks) > 3
    assert "".join(c.text for c in chunks) == line
    assert all(tokens.count(c.text) <= 100 for c in chunks)


def test_empty_and_blank_files_make_no_chunks() -> None:
    assert chunk_markdown("", 400, 80) == []
    assert chunk_markdown("\n\n   \n", 400, 80) == []


def test_messages_are_never_split_and_cite_jsonl_lines() -> None:
    records = [
        '{"id":"c-%d","chatId":"c","chatTitle":"t","role":"%s","content":"%s","timestamp":1707123456789}'
        % (i, "user" if i % 2 else "assistant", ("message %d " % i) + "blah " * 40)
        for i in range(30)
    ]
    text = "\n".join(records[:10]) + "\nnot json\n" + "\n".join(records[10:]) + "\n"
    messages = parse_jsonl(text, session=False)
    assert len(messages) == 30 and messages[10].line == 12
    assert messages[0].text.startswith("[2024-02-05 08:57 UTC] Assistant: message 0")
    chunks = chunk_messages(messages, 200, 40)
    by_line = {m.line: m.text for m in messages}
    for chunk in chunks:
        assert tokens.count(chunk.text) <= 200
        for line in range(chunk.start_line, chunk.end_line + 1):
            if line in by_line:
                assert by_line[line] in chunk.text  # whole messages only


def test_huge_message_is_cut_to_the_limit() -> None:
    chunks = chunk_messages([Message(1, "User: " + "word " * 3000)], 200, 40)
    assert len(chunks) > 1 and all(c.start_line == c.end_line == 1 for c in chunks)
    assert all(tokens.count(c.text) <= 200 for c in chunks)


def test_session_transcript_keeps_only_dialogue() -> None:
    lines = [
        '{"type":"session","id":"s1"}',
        '{"type":"message","timestamp":"2026-01-26T10:00:00Z","message":{"role":"user","content":"Deploy the blue build"}}',
        '{"type":"message","message":{"role":"assistant","content":[{"type":"text","text":"Deploying now."},'
        '{"type":"toolCall","name":"bash","arguments":{"cmd":"SECRET-TOOL-ARG"}}]}}',
        '{"type":"message","message":{"role":"toolResult","content":[{"type":"text","text":"SECRET-TOOL-OUTPUT"}]}}',
        '{"type":"custom","data":1}',
    ]
    messages = parse_jsonl("\n".join(lines), session=True)
    assert [m.line for m in messages] == [2, 3]
    assert messages[0].text == "[2026-01-26 10:00 UTC] User: Deploy the blue build"
    assert "SECRET" not in " ".join(m.text for m in messages)


def test_a_flat_session_record_is_read_too() -> None:
    """Some runtimes write role and content beside "type": "message" (a newcomer's transcript of
    that shape was indexed as nothing, without a word); tool results stay out either way."""
    lines = ['{"type":"message","role":"user","content":"Table at Bangkok Garden for four","timestamp":1763800000}',
             '{"type":"message","role":"toolResult","content":"SECRET-TOOL-OUTPUT"}']
    messages = parse_jsonl("\n".join(lines), session=True)
    assert [m.text for m in messages] == ["[2025-11-22 08:26 UTC] User: Table at Bangkok Garden for four"]


def _sync_line(i: int, chat: str, title: str, content: str) -> str:
    return json.dumps({"id": f"{chat}-{i}", "chatId": chat, "chatTitle": title, "role": "user" if i % 2 else "assistant",
                       "content": content, "timestamp": 1707123456789 + i * 60_000})


def test_chunks_never_mix_two_chats() -> None:
    lines = [_sync_line(i, "a" if i < 3 or i == 5 else "b", "Lisbon trip" if i < 3 or i == 5 else "Tax return",
                        f"message {i} " + "word " * 10) for i in range(7)]
    messages = parse_jsonl("\n".join(lines), session=False)
    chunks = chunk_messages(messages, 400, 80)  # all seven would fit one chunk
    chats = [{m.chat_id for m in messages if c.start_line <= m.line <= c.end_line} for c in chunks]
    assert all(len(chat) == 1 for chat in chats), chats
    assert [(c.start_line, c.end_line, c.chat_id) for c in chunks] == [(1, 3, "a"), (4, 5, "b"), (6, 6, "a"),
                                                                      (7, 7, "b")]
    assert chunks[0].text.startswith("# Lisbon trip\n") and chunks[1].text.startswith("# Tax return\n")


def test_a_chat_title_is_its_messages_context() -> None:
    messages = parse_jsonl(_sync_line(1, "c9", "Lisbon trip", "Book the tram tickets"), session=False)
    assert (messages[0].chat_id, messages[0].chat_title) == ("c9", "Lisbon trip")
    units = chunk_messages(messages, 400, 80)[0].units
    # The title is in the keyword signal of every reading, and in the vector of one of them.
    assert all("Lisbon trip" in u.keyword_text for u in units)
    assert {u.embedding_text for u in units} == {"Lisbon trip\n[2024-02-05 08:58 UTC] User: Book the tram tickets",
                                                 "[2024-02-05 08:58 UTC] User: Book the tram tickets"}
    untitled = parse_jsonl(json.dumps({"id": "x", "chatId": "c7", "chatTitle": "", "role": "user", "content": "hi",
                                       "timestamp": 1707123456789}), session=False)
    assert untitled[0].chat_title == "Chat c7"


def test_a_session_header_titles_its_messages_even_in_an_appended_tail() -> None:
    from memfs.index.text.messages import session_header

    header = '{"type":"session","id":"s1","timestamp":"2026-01-26T09:59:00Z"}'
    turn = '{"type":"message","timestamp":"2026-01-26T10:00:00Z","message":{"role":"user","content":"Deploy"}}'
    whole = parse_jsonl(f"{header}\n{turn}", session=True)
    assert whole[0].chat_title == "Session s1 (started 2026-01-26 09:59 UTC)" and whole[0].chat_id == "s1"
    tail = parse_jsonl(turn, session=True, first_line=7, header=session_header(header))
    assert (tail[0].line, tail[0].chat_title) == (7, whole[0].chat_title)
    assert chunk_messages(tail, 400, 80)[0].units[0].context == whole[0].chat_title


def test_memory_md_headings_are_units_only_with_text_of_their_own() -> None:
    # The template's empty sections are placeholders: "drink preference" found "## User
    # Preferences" (nothing under it) above the fact a newcomer had written.  A daily log's
    # heading can be the entry itself, so there it stays a unit.
    text = ("# Long-term Memory\n\nCurated, durable facts.\n\n## User Preferences\n\n## People\n"
            "- Sam: my sister\n\n## Projects\n### memfs\nShipping the PostgreSQL backend.\n\n## Empty at the end\n")
    def heading_only(chunks: list) -> list[str]:
        return [u.text for c in chunks for u in c.units if u.text.lstrip().startswith("#") and "\n" not in u.text]

    everywhere = chunk_markdown(text, 400, 80)
    assert heading_only(everywhere) == ["## User Preferences", "## People", "## Projects", "## Empty at the end"]
    memory_md = chunk_markdown(text, 400, 80, headings_alone=False)
    assert heading_only(memory_md) == []
    kept = [u.text for c in memory_md for u in c.units]
    assert "- Sam: my sister" in kept and "### memfs\nShipping the PostgreSQL backend." in kept
    assert any("Curated, durable facts." in u for u in kept)
    log = "## 14:00 Called the dentist\n## 15:30 Lunch with Sam\n"
    assert [u.text for c in chunk_markdown(log, 400, 80) for u in c.units] == [
        "## 14:00 Called the dentist", "## 15:30 Lunch with Sam"]
