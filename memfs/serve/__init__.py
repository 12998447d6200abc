"""The warm process: a Unix socket that answers the CLI's commands from a running mount or
``memfs serve``, so a command costs a round trip instead of a new process loading the index and
the model.  ``wire`` is all a client needs (standard library only, imported by the CLI before
anything heavy); ``server`` and ``daemon`` run inside the warm process."""
