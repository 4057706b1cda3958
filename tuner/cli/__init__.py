"""The ``tune`` command line: it only translates flags to a config and one core call.

Each command lives in its own module, which registers itself on ``app``; a ``TunerError``
prints one line and exits non-zero, with the traceback only under ``--debug``.
"""

from __future__ import annotations

import sys

import typer

from tuner.cli import commands  # noqa: F401  (each command module registers itself on app)
from tuner.cli.root import app, state
from tuner.errors import TunerError, disk_error


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code instead of raising for user errors."""
    try:
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        code = app(args=argv, standalone_mode=False)
    except TunerError as err:
        if state["debug"]:
            raise
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except OSError as err:  # the disk refused a write: the user's to fix, not a bug
        refused = disk_error(err)
        if refused is None or state["debug"]:
            raise
        print(f"error: {refused}", file=sys.stderr)
        return refused.exit_code
    except typer.Exit as done:
        return int(done.exit_code or 0)
    except Exception as err:  # click usage errors carry their own exit code
        code = getattr(err, "exit_code", None)
        if code is None or state["debug"]:
            raise
        show = getattr(err, "show", None)
        if callable(show):
            show()
        return int(code)
    return code if isinstance(code, int) else 0


if __name__ == "__main__":
    sys.exit(main())
