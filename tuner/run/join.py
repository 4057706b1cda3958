"""Joining a study: open its storage, create or load it and seed its queue under the lock,
then stop what a killed run of the study left running (``tuner.run.leftovers``).

``tune worker`` joins with the options it was given; ``tune run`` on several slots joins the
same way before it starts one worker process per slot (``tuner.run.parallel``).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial

from tuner.errors import StudyError
from tuner.record.study import StudyRecord, read_budget, write_budget
from tuner.run.context import RunOptions, StudyContext, open_study, prepare
from tuner.run.leftovers import clear_leftovers
from tuner.run.loop import Joined
from tuner.run.objective import Report, requeue, seed_queue
from tuner.run.slots import Slot, SlotRequest
from tuner.run.warm import load_warm_start
from tuner.samplers.registry import make_sampler
from tuner.space.stored import stored_space_text
from tuner.storage.lock import StudyLock
from tuner.storage.resilient import ResilientStorage
from tuner.storage.results import check_study_name, write_atomic
from tuner.storage.urls import StorageSettings, open_storage


@dataclass
class WorkerOptions:
    """What ``tune worker`` asks for; a study that does not exist yet needs ``space``."""

    study: str
    storage: str
    results_dir: Path = Path("results")
    space: Path | None = None
    objective: str | None = None
    launcher: str | None = None
    trials: int | None = None
    timeout_s: float | None = None
    slots: SlotRequest = field(default_factory=SlotRequest)
    pinned: Slot | None = None
    settings: StorageSettings = field(default_factory=StorageSettings)
    poll_s: float = 2.0


def run_options(ctx: StudyContext, opts: RunOptions) -> WorkerOptions:
    """``tune run``'s request as a worker's: the same study, storage, budget and deadline."""
    return WorkerOptions(
        study=ctx.name,
        storage=ctx.storage_url,
        results_dir=opts.results_dir,
        space=opts.space_path,
        objective=opts.objective,
        launcher=opts.launcher,
        trials=ctx.trials,
        timeout_s=opts.timeout_s,
    )


@dataclass
class WorkerSummary:
    """How a worker ended."""

    study: str
    ran: int
    complete: int
    budget: int
    interrupted: bool = False


def join_study(opts: WorkerOptions, report: Report, ctx: StudyContext | None = None) -> Joined:
    """Open the storage, then create or load the study and seed its queue under the lock.

    ``ctx`` is the study's context when the caller prepared it already (``tune run``);
    otherwise it is prepared here, from the space the study recorded if none is given."""
    check_study_name(opts.study)  # before the storage is touched
    storage = open_storage(opts.storage, opts.settings, requeue_lost, report)
    lock = StudyLock(opts.storage, opts.study, storage.retry)
    with lock.held():
        ctx = ctx or _context(opts, storage)
        study = open_study(ctx, storage, report)
        _recorded_warm_start(study, ctx, opts.results_dir, report)
        seed_queue(study, ctx)
        budget = _settle_budget(study, opts.trials, ctx.trials)
    ctx.trials = budget
    clear_leftovers(ctx.name, ctx.space.target.kind, ctx.paths.root / "trials", report)
    return Joined(ctx, study, storage, lock, budget)


def _recorded_warm_start(
    study: optuna.Study, ctx: StudyContext, results_dir: Path, report: Report
) -> None:
    """A worker joining (or a run resuming without the flag) samples with the prior the study
    was warm-started with; one it cannot read now costs it the prior, not the trials."""
    source = (StudyRecord.read(study) or StudyRecord.of({})).warm_start
    if ctx.warm is not None or not source:
        return
    name, url = str(source.get("study")), source.get("storage")
    try:
        ctx.warm = load_warm_start(name, url, results_dir, ctx.space, ctx.objective)
    except StudyError as err:
        report(f"warning: sampling without the warm start's prior: {err}")
        return
    study.sampler = make_sampler(ctx.sampler, ctx.space, ctx.warm.prior)


def _context(opts: WorkerOptions, storage: ResilientStorage) -> StudyContext:
    space, objective, launcher = opts.space, opts.objective, opts.launcher
    if space is None:
        record = _existing_record(opts.study, storage)
        space = recorded_space(opts.results_dir, opts.study, record)
        objective = objective or record.objective
        launcher = launcher or record.target_kind
    run = RunOptions(
        space_path=space,
        objective=objective,
        trials=opts.trials,
        launcher=launcher,
        study=opts.study,
        storage=opts.storage,
        results_dir=opts.results_dir,
    )
    return prepare(run)


def _existing_record(name: str, storage: ResilientStorage) -> StudyRecord:
    try:
        study_id = storage.get_study_id_from_name(name)
    except KeyError:
        raise StudyError(
            f"no study {name!r} in the storage yet; start one worker with --space FILE to "
            "create it (the others may then join without it)"
        ) from None
    record = StudyRecord.of(storage.get_study_user_attrs(study_id))
    if record.space_yaml is None:
        raise StudyError(f"study {name!r} was not created by tune (it records no space)")
    return record


def recorded_space(results_dir: Path, study: str, record: StudyRecord) -> Path:
    """The space the study recorded: its original file if this node has it unchanged (so
    relative dataset paths resolve as they did, and its secrets are at hand), else a copy in
    the results folder, whose secrets are read from this node's environment."""
    recorded = Path(record.space_path)
    text = str(record.space_yaml)
    if recorded.is_file() and stored_space_text(recorded.read_text()) == text:
        return recorded
    copy = results_dir / study / "space.yaml"
    write_atomic(copy, text)
    return copy


def _settle_budget(study: optuna.Study, asked: int | None, default: int) -> int:
    """An explicit ``--trials`` sets the shared budget; otherwise the study's stands."""
    stored = read_budget(study.user_attrs)
    if asked is not None or stored is None:
        write_budget(study, asked if asked is not None else default)
        return asked if asked is not None else default
    return stored


def requeue_lost(study: optuna.Study, trial: FrozenTrial) -> None:
    """Heartbeat-stale callback: the config of a dead worker's trial is queued again."""
    requeue(study, trial, reason="worker lost (no heartbeat)")


def identity(slot: Slot | None) -> str:
    who = f"{socket.gethostname()}:{os.getpid()}"
    return f"{who} {slot.describe()}" if slot is not None else who
