"""The ``tune`` typer app every command module registers itself on, and the ``--debug`` flag."""

from __future__ import annotations

import optuna
import typer

app = typer.Typer(
    name="tune",
    help="Automated config tuner for LLM serving engines.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)

state = {"debug": False}


@app.callback()
def _root(
    debug: bool = typer.Option(False, "--debug", help="Show tracebacks for errors."),
) -> None:
    state["debug"] = debug
    # Optuna logs every trial at INFO; tune prints its own one-line progress instead.
    optuna.logging.set_verbosity(optuna.logging.DEBUG if debug else optuna.logging.WARNING)
