"""What Memory (:mod:`memfs.memory`, the façade every front end calls) routes to: the index's
lifecycle and the state one Memory holds (:mod:`.lifecycle`), and one module per answer:
:mod:`.searching`, :mod:`.reading` (get), :mod:`.syncing`, :mod:`.bundling`, :mod:`.reporting`
(status), :mod:`.changes` (writes, removals, moves, appends, history); :mod:`.problems` (files
not indexed whole), which search and status share."""
