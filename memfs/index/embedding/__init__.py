"""The embedding stage: providers (the offline model, an OpenAI-compatible server, none), the
per-user embedding service and its client, how a chunk's units are read (late, once, whole),
and the background work of embedding a backlog (turns, rates, the work ratio)."""
