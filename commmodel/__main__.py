"""``python -m commmodel`` (and ``torchrun -m commmodel``) is the same as the ``commmodel`` command.

The cyclic collector's first threshold is raised before anything is imported (the same call
:func:`commmodel.cli.app.main` makes for the console script, after its own import): see
:data:`commmodel.cli.app.GC_YOUNG_THRESHOLD`.
"""

import gc

gc.set_threshold(100_000)  # = commmodel.cli.app.GC_YOUNG_THRESHOLD (importing it first would defeat the purpose)

from commmodel.cli.app import main  # noqa: E402 - after the collector threshold, on purpose

if __name__ == "__main__":
    main()
