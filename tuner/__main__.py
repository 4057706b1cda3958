"""``python -m tuner``: the ``tune`` command line."""

import os
import sys

try:
    from tuner.cli import main
except KeyboardInterrupt:  # Ctrl-C while the modules load: nothing has started yet
    print("interrupted", file=sys.stderr, flush=True)
    # Straight out: the interpreter's shutdown after an import cut short by Ctrl-C sometimes
    # ends the process by SIGINT (-2) instead of this exit status, and there is nothing to
    # clean up yet.
    os._exit(130)

sys.exit(main())
