"""``python -m memfs`` is the ``memfs`` command."""

from memfs.cli import main

main()
