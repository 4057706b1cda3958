"""``tune run``: flags -> RunOptions -> run_study -> exit code.

Exit codes: 0 when the study ran (its budget met, its time up, or its space exhausted); 1 when
it stopped short on infrastructure faults (the last one's reason is printed: what to fix); 2
for a user error; 130 on Ctrl-C.
"""

from __future__ import annotations

from pathlib import Path

import typer

from tuner.cli.durations import parse_duration
from tuner.cli.root import app
from tuner.run.context import DEFAULT_CONFIRM
from tuner.run.slots import SlotRequest
from tuner.run.study import RunOptions, run_study
from tuner.samplers.registry import DEFAULT_SAMPLER, SAMPLERS


@app.command()
def run(
    space: Path = typer.Option(..., "--space", help="Search-space YAML file."),
    objective: str = typer.Option(
        None,
        "--objective",
        help="Objective, e.g. p99_tpot; a list (p99_tpot,p99_ttft) makes each tier's front "
        "trade the first against the others instead of against output throughput.",
    ),
    trials: int = typer.Option(None, "--trials", help="Finished trials the study should hold."),
    timeout: str = typer.Option(None, "--timeout", help="Stop starting trials after e.g. 8h."),
    launcher: str = typer.Option(None, "--launcher", help="'sim' runs the simulated engine."),
    study: str = typer.Option(None, "--study", help="Study name (default: from the space)."),
    storage: str = typer.Option(None, "--storage", help="Optuna storage URL."),
    results_dir: Path = typer.Option(Path("results"), "--results-dir", help="Results folder."),
    gpus: str = typer.Option(None, "--gpus", help="GPUs to use, e.g. 0-7: one trial per group."),
    npus: str = typer.Option(None, "--npus", help="Ascend NPUs to use, e.g. 0-15."),
    slots: int = typer.Option(None, "--slots", help="Trials at once (default: as devices fit)."),
    devices_per_trial: int = typer.Option(
        None, "--devices-per-trial", help="Devices one engine needs (default: from the space)."
    ),
    confirm: int = typer.Option(
        DEFAULT_CONFIRM, "--confirm", help="Leading configs per tier launched again (0: off)."
    ),
    sampler: str = typer.Option(
        DEFAULT_SAMPLER, "--sampler", help=f"Optuna sampler: {', '.join(SAMPLERS)}."
    ),
    warm_start: str = typer.Option(
        None,
        "--warm-start",
        help="Seed a new study from an earlier one: its picks first, its measurements the "
        "sampler's prior.",
    ),
    warm_start_storage: str = typer.Option(
        None, "--warm-start-storage", help="Where --warm-start's study is (default: --storage)."
    ),
) -> None:
    """Run or resume a tuning study; prints the recommended config per concurrency tier."""
    opts = RunOptions(
        space_path=space,
        objective=objective,
        trials=trials,
        timeout_s=parse_duration(timeout) if timeout else None,
        launcher=launcher,
        study=study,
        storage=storage,
        results_dir=results_dir,
        parallel=SlotRequest(gpus, npus, slots, devices_per_trial),
        confirm=confirm,
        sampler=sampler,
        warm_start=warm_start,
        warm_start_storage=warm_start_storage,
    )
    summary = run_study(opts, report=lambda line: typer.echo(line))
    typer.echo("")
    typer.echo(f"recommended config per concurrency tier (study {summary.name!r}):")
    typer.echo(summary.table)
    if summary.interrupted:
        raise typer.Exit(130)
    if summary.stopped is not None:  # faults to fix, not a finished study
        typer.echo(f"error: {summary.stopped}; fix it and rerun the same command", err=True)
        raise typer.Exit(1)
