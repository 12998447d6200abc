"""What memfs takes from the agent runtimes people use, and what it tells them.

- ``memfs import RUNTIME [PATH...]`` (:mod:`.importer`, :mod:`.sources`): sessions of Claude Code,
  Codex CLI, Gemini CLI and aider, and ChatGPT / Claude.ai exports, written into the workspace
  as session files memfs indexes (:mod:`.layout`, :mod:`.writer`), appending only what is new;
- ``memfs hook RUNTIME EVENT`` (:mod:`.hookrun`, :mod:`.hooks`): the runtime's hooks call it: the
  context bundle at session start, recall on a prompt (``recall.on_prompt``), the transcript's new
  part into the workspace before compaction and at the end of a turn, always within a second;
- ``memfs connect RUNTIME`` (:mod:`.connect`): the MCP server entry, the hooks and a note in the
  instruction file, merged into the runtime's own files and taken out again with ``--remove``.

Nothing is imported here: :mod:`memfs.commands` reaches :mod:`.recall` and :mod:`.transcript`
for a daemon, and the hook's process must stay light (standard library) until it forks.
"""
