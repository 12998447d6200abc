"""``python -m memfs`` is the ``memfs`` command (its entry point is :mod:`memfs.quickcli`)."""

from memfs.quickcli import main

main()
