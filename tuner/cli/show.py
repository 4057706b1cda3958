"""``tune show``: per-tier recommendations from the study's storage alone."""

from __future__ import annotations

from pathlib import Path

import typer

from tuner.cli.root import app
from tuner.export.show import show_study


@app.command()
def show(
    study: str = typer.Option(..., "--study", help="Study name."),
    storage: str = typer.Option(None, "--storage", help="Optuna storage URL."),
    results_dir: Path = typer.Option(Path("results"), "--results-dir", help="Results folder."),
) -> None:
    """Print the recommended config per tier and the best-vs-baseline gains."""
    typer.echo(show_study(study, storage, results_dir))
