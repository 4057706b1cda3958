"""``tune worker``: flags -> WorkerOptions -> run_worker -> exit code."""

from __future__ import annotations

from pathlib import Path

import typer

from tuner.cli.durations import parse_duration
from tuner.cli.root import app
from tuner.run.slots import Slot, SlotRequest
from tuner.run.worker import WorkerOptions, run_worker
from tuner.storage.urls import StorageSettings


@app.command()
def worker(
    study: str = typer.Option(..., "--study", help="Name of the shared study."),
    storage: str = typer.Option(
        ..., "--storage", help="Shared storage: postgresql://..., journal:FILE or sqlite:///FILE."
    ),
    space: Path = typer.Option(
        None, "--space", help="Search space; needed only by the worker that creates the study."
    ),
    trials: int = typer.Option(
        None, "--trials", help="Set the study's budget of finished trials (all workers)."
    ),
    timeout: str = typer.Option(None, "--timeout", help="Stop starting trials after e.g. 8h."),
    launcher: str = typer.Option(None, "--launcher", help="'sim' runs the simulated engine."),
    objective: str = typer.Option(None, "--objective", help="Objective, e.g. p99_tpot."),
    results_dir: Path = typer.Option(Path("results"), "--results-dir", help="Results folder."),
    gpus: str = typer.Option(None, "--gpus", help="GPUs of this node, e.g. 0-7."),
    npus: str = typer.Option(None, "--npus", help="Ascend NPUs of this node, e.g. 0-15."),
    slots: int = typer.Option(None, "--slots", help="Trials at once on this node."),
    devices_per_trial: int = typer.Option(
        None, "--devices-per-trial", help="Devices one engine needs (default: from the space)."
    ),
    heartbeat: int = typer.Option(30, "--heartbeat", help="Seconds between trial heartbeats."),
    grace: int = typer.Option(
        180, "--grace", help="Seconds without a heartbeat before a trial's worker counts as dead."
    ),
    outage: str = typer.Option(
        "30m", "--outage", help="How long to wait out an unreachable database, e.g. 30m."
    ),
    poll: float = typer.Option(2.0, "--poll", help="Seconds between checks while waiting."),
    pinned_slot: str = typer.Option(None, "--pinned-slot", hidden=True),
) -> None:
    """Join a shared study and run its trials until the study's budget is met."""
    opts = WorkerOptions(
        study=study,
        storage=storage,
        results_dir=results_dir,
        space=space,
        objective=objective,
        launcher=launcher,
        trials=trials,
        timeout_s=parse_duration(timeout) if timeout else None,
        slots=SlotRequest(gpus, npus, slots, devices_per_trial),
        pinned=Slot.from_arg(pinned_slot) if pinned_slot else None,
        settings=StorageSettings(heartbeat, grace, parse_duration(outage)),
        poll_s=poll,
    )
    summary = run_worker(opts, report=lambda line: typer.echo(line))
    typer.echo(
        f"worker done: ran {summary.ran} trial(s); study {summary.study!r} holds "
        f"{summary.complete}/{summary.budget} finished trials"
    )
    if summary.interrupted:
        raise typer.Exit(130)
