"""How a bench script ends, as ``tune`` does: its exit code, or one line for a user error."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import NoReturn

from tuner.errors import TunerError


def run(main: Callable[[], int]) -> NoReturn:
    """Run ``main`` and exit with its code; a ``TunerError`` prints one line, no traceback."""
    try:
        code = main()
    except TunerError as err:
        print(f"error: {err}", file=sys.stderr)
        raise SystemExit(err.exit_code) from None
    raise SystemExit(code)
