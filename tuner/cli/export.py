"""``tune export``: every result file of a study, from its storage alone."""

from __future__ import annotations

from pathlib import Path

import typer

from tuner.cli.root import app
from tuner.export import export_study


@app.command()
def export(
    study: str = typer.Option(..., "--study", help="Study name."),
    storage: str = typer.Option(None, "--storage", help="Optuna storage URL."),
    out: Path = typer.Option(None, "--out", help="Output folder (default: results/<study>/)."),
    results_dir: Path = typer.Option(Path("results"), "--results-dir", help="Results folder."),
) -> None:
    """Write recipe.yaml, commands.md, trials.csv, pareto_c<N>.csv, recommendations.txt/.json
    and report.html."""
    result = export_study(study, storage, out, results_dir)
    for path in result.files:
        typer.echo(f"{path}  ({path.stat().st_size:,} bytes)")
