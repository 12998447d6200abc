"""The ClawGPT memory sync protocol: parse and validate sync messages, deduplicate by message id
across all date files, and append each message to the date file of its own timestamp."""
