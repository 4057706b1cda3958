"""``tune dashboard``: optuna-dashboard on the study's storage, bound to 127.0.0.1."""

from __future__ import annotations

from pathlib import Path

import typer

from tuner.cli.root import app
from tuner.export.dashboard import serve_dashboard


@app.command()
def dashboard(
    study: str = typer.Option(..., "--study", help="Study name."),
    storage: str = typer.Option(None, "--storage", help="Optuna storage URL."),
    port: int = typer.Option(8080, "--port", help="Port on 127.0.0.1 (0: any free port)."),
    results_dir: Path = typer.Option(Path("results"), "--results-dir", help="Results folder."),
    allow_edits: bool = typer.Option(
        False, "--allow-edits", help="Let the dashboard change studies (read-only without)."
    ),
) -> None:
    """Serve optuna-dashboard for the study on 127.0.0.1 until Ctrl-C; prints its URL."""
    serve_dashboard(study, storage, results_dir, port, typer.echo, allow_edits)
