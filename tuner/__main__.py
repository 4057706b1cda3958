"""``python -m tuner``: the ``tune`` command line."""

import sys

try:
    from tuner.cli import main
except KeyboardInterrupt:  # Ctrl-C while the modules load: nothing has started yet
    print("interrupted", file=sys.stderr)
    sys.exit(130)

sys.exit(main())
