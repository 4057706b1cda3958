"""``tune cleanup``: remove the engine containers a killed run left behind."""

from __future__ import annotations

import typer

from launchers import launcher_class
from tuner.cli.root import app


@app.command("cleanup")
def cleanup(
    study: str | None = typer.Option(None, "--study", help="Only containers of this study."),
    force: bool = typer.Option(
        False, "--force", help="Also remove containers of runs still alive on this host."
    ),
) -> None:
    """Remove engine containers whose run is gone (found by their tune.* labels)."""
    removed = launcher_class("docker").remove_leftovers(study, force)
    for gone in removed:
        typer.echo(
            f"removed {gone.name} ({gone.status}; study {gone.study or '-'}, "
            f"trial {gone.trial or '-'}, owner {gone.owner or '-'})"
        )
    typer.echo(f"{len(removed)} container(s) removed")
