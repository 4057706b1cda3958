"""The ``tune`` command line: it only translates flags to a config and one core call.

Each command lives in its own module, which registers itself on ``app``; a ``TunerError``
prints one line and exits non-zero, with the traceback only under ``--debug``.
"""

from __future__ import annotations

import sys

import optuna
import typer

from tuner.errors import TunerError

app = typer.Typer(
    name="tune",
    help="Automated config tuner for LLM serving engines.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

_state = {"debug": False}


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    _state["debug"] = debug
    # Optuna logs every trial at INFO; tune prints its own one-line progress instead.
    optuna.logging.set_verbosity(optuna.logging.DEBUG if debug else optuna.logging.WARNING)


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point; returns the exit code instead of raising for user errors."""
    _register_commands()
    try:
        # Without standalone mode click returns a typer.Exit's code instead of raising it.
        code = app(args=argv, standalone_mode=False)
    except TunerError as err:
        if _state["debug"]:
            raise
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except typer.Exit as done:
        return int(done.exit_code or 0)
    except Exception as err:  # click usage errors carry their own exit code
        code = getattr(err, "exit_code", None)
        if code is None or _state["debug"]:
            raise
        show = getattr(err, "show", None)
        if callable(show):
            show()
        return int(code)
    return code if isinstance(code, int) else 0


def _register_commands() -> None:
    # Imported here so each command module can import `app` from this package.
    from tuner.cli import commands  # noqa: F401


if __name__ == "__main__":
    sys.exit(main())
