"""Text renderings shared by the CLI and the virtual files, so both print the same bytes."""
