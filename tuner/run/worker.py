"""``tune worker``: one process joins a shared study and runs its trials until the budget is met.

Many workers (on one node, one per slot; on many nodes) share one study through its storage.
Each loops: under the study lock (``tuner.storage.lock``) it fails the trials of dead workers
(heartbeats), reads the budget and the COMPLETE and RUNNING counts, and claims a trial (the
queue first, else a sampled one, its parameters written at once so that every other worker's
sampler sees them as running). Claims are serialised, so COMPLETE + RUNNING never exceeds the
budget and the study ends with exactly ``budget`` COMPLETE trials. A worker whose claim would
exceed it waits, because a running trial may still die and need another run; it exits when the
budget is met.

A trial's fate decides what happens next:

- a measurement (feasible or not): told COMPLETE, exactly once;
- an infrastructure fault: FAIL, its config queued again (``requeued_from``);
- Ctrl-C / SIGTERM: engine stopped, FAIL with ``interrupted``, config queued again at once;
- its worker killed or its node lost: no heartbeat for ``grace_s``, so another worker fails it
  and queues its config again; if the lost worker comes back its late result is refused.

A config is queued again only when it is known whole (``tuner.record.trial.lost_params``): a trial
lost while its own proposal was still being written launched nothing, and a fresh sample takes
its place in the budget.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial

from tuner.errors import StudyError
from tuner.record.study import StudyRecord, read_budget, write_budget
from tuner.run.context import RunOptions, StudyContext, open_study, prepare
from tuner.run.loop import Joined, WorkerLoop
from tuner.run.objective import Report, TrialLoop, requeue, write_tables
from tuner.run.slots import Slot, SlotRequest, plan_slots
from tuner.run.study import seed_queue, sigterm_as_interrupt
from tuner.storage.lock import StudyLock
from tuner.storage.resilient import ResilientStorage
from tuner.storage.results import write_atomic
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


@dataclass
class WorkerSummary:
    """How a worker ended."""

    study: str
    ran: int
    complete: int
    budget: int
    interrupted: bool = False


def join_study(opts: WorkerOptions, report: Report) -> Joined:
    """Open the storage, then create or load the study and seed its queue under the lock."""
    storage = open_storage(opts.storage, opts.settings, requeue_lost, report)
    lock = StudyLock(opts.storage, opts.study, storage.retry)
    with lock.held():
        ctx = _context(opts, storage)
        study = open_study(ctx, storage)
        seed_queue(study, ctx)
        budget = _settle_budget(study, opts.trials, ctx.trials)
    ctx.trials = budget
    return Joined(ctx, study, storage, lock, budget)


def _context(opts: WorkerOptions, storage: ResilientStorage) -> StudyContext:
    space, objective, launcher = opts.space, opts.objective, opts.launcher
    if space is None:
        record = _existing_record(opts.study, storage)
        space = _space_file(opts, record)
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


def _space_file(opts: WorkerOptions, record: StudyRecord) -> Path:
    """The space the study recorded: its original file if this node has it unchanged (so
    relative dataset paths resolve as they did), else a copy in the results folder."""
    recorded = Path(record.space_path)
    text = str(record.space_yaml)
    if recorded.is_file() and recorded.read_text() == text:
        return recorded
    copy = opts.results_dir / opts.study / "space.yaml"
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


def run_worker(opts: WorkerOptions, report: Report = print) -> WorkerSummary:
    """Join the study and run trials until its budget is met; Ctrl-C / SIGTERM safe."""
    deadline = None if opts.timeout_s is None else time.monotonic() + opts.timeout_s
    with sigterm_as_interrupt():
        try:
            joined = join_study(opts, report)
        except KeyboardInterrupt:
            return WorkerSummary(opts.study, 0, 0, 0, interrupted=True)
        slots = [opts.pinned] if opts.pinned else plan_slots(joined.ctx.space, opts.slots)
        if len(slots) > 1:
            from tuner.run.parallel import run_slots

            return run_slots(opts, joined, slots, report)
        return _run_one(opts, joined, slots[0], deadline, report)


def _run_one(
    opts: WorkerOptions, joined: Joined, slot: Slot, deadline: float | None, report: Report
) -> WorkerSummary:
    joined.study.sampler.reseed_rng()  # workers sharing a seed would sample the same configs
    loop = TrialLoop(joined.ctx, joined.study, report, slot)
    worker = WorkerLoop(joined, loop, identity(slot), opts.poll_s)
    report(f"worker {worker.who} joined study {opts.study!r} (budget {joined.budget} trials)")
    interrupted = False
    try:
        tally = worker.run(deadline, report)
    except KeyboardInterrupt:
        interrupted = True
        report("interrupted: the running engine was stopped and its trial queued again")
        tally = worker.tally()
    write_tables(joined.ctx, joined.study)
    return WorkerSummary(opts.study, worker.ran, tally.complete, tally.budget, interrupted)
