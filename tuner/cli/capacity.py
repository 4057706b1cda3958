"""``tune capacity``: flags -> CapacityOptions -> run_capacity -> the answer printed.

Exit codes: 0 once every config was measured (a config that did not start says so in its
row); 2 for a user error (an unknown study, a space with no SLO at its highest tier); 130 on
Ctrl-C or SIGTERM, with the configs measured so far kept in capacity.partial.json and the
last complete answer left in capacity.json.
"""

from __future__ import annotations

from pathlib import Path

import typer

from tuner.capacity import CapacityOptions, run_capacity
from tuner.cli.root import app
from tuner.errors import StudyError
from tuner.export.capacity_text import capacity_text


@app.command()
def capacity(
    study: str = typer.Option(..., "--study", help="Study name."),
    storage: str = typer.Option(None, "--storage", help="Optuna storage URL."),
    results_dir: Path = typer.Option(Path("results"), "--results-dir", help="Results folder."),
    launcher: str = typer.Option(None, "--launcher", help="'sim': the simulated engine."),
    request_rate: bool = typer.Option(
        False, "--request-rate", help="Search requests/s (open loop) instead of users."
    ),
    max_users: int = typer.Option(
        256, "--max-users", help="Most users searched (with --request-rate: most in flight)."
    ),
    max_rate: float = typer.Option(64.0, "--max-rate", help="Most requests/s searched."),
    max_steps: int = typer.Option(24, "--max-steps", help="Probes per config, repeats aside."),
    repeats: int = typer.Option(3, "--repeats", help="Runs each side of the boundary rests on."),
    users: int = typer.Option(None, "--users", help="Users to serve: replicas each config needs."),
    target_rate: float = typer.Option(
        None, "--target-rate", help="With --request-rate: req/s to serve, replicas needed."
    ),
) -> None:
    """Users (or req/s) one replica serves within the SLO: each recommendation, the defaults."""
    if (users is not None and request_rate) or (target_rate is not None and not request_rate):
        raise StudyError(
            "--users goes with a concurrency search, --target-rate with --request-rate"
        )
    opts = CapacityOptions(
        study, storage, results_dir, launcher, request_rate, max_users, max_rate, max_steps, repeats
    )
    answer = run_capacity(opts, report=lambda line: typer.echo(line, err=True))
    typer.echo(capacity_text(answer, target_rate if request_rate else users))
