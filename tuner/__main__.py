"""``python -m tuner`` and the ``tune`` script: the command line, with Ctrl-C covered from the
first import on."""

import os
import sys


def run() -> int:
    """Load the command line and run it; a Ctrl-C while its modules load prints one line."""
    try:
        from tuner.cli import main
    except KeyboardInterrupt:  # nothing has started yet
        print("interrupted", file=sys.stderr, flush=True)
        # Straight out: the interpreter's shutdown after an import cut short by Ctrl-C
        # sometimes ends the process by SIGINT (-2) instead of this exit status.
        os._exit(130)
    return main()


if __name__ == "__main__":
    sys.exit(run())
