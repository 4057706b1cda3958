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
  and queues its config again; if the lost worker comes back its late result is refused. A
  worker on the same host need not wait the grace: a claimer whose pid is gone is dead
  (``tuner.run.orphans``);
- ``--timeout`` passing: stopped as by Ctrl-C, and the worker ends as one whose time is up;
- an error that stops the worker (an image not pulled, a bug): FAIL, and its config queued
  again when a worker next joins the study (``seed_queue``).

A config is queued again only when it is known whole (``tuner.record.trial.lost_params``): a trial
lost while its own proposal was still being written launched nothing, and a fresh sample takes
its place in the budget.
"""

from __future__ import annotations

import time

from tuner.run.join import WorkerOptions, WorkerSummary, identity, join_study
from tuner.run.loop import Joined, WorkerLoop
from tuner.run.objective import Report, StudyObjective, write_results
from tuner.run.parallel import run_slots
from tuner.run.signals import TIME_UP, TimeUp, deadline_alarm, sigterm_as_interrupt
from tuner.run.slots import Slot, plan_slots

__all__ = ["WorkerOptions", "WorkerSummary", "run_worker"]


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
            return run_slots(opts, joined, slots, report)
        return _run_one(opts, joined, slots[0], deadline, report)


def _run_one(
    opts: WorkerOptions, joined: Joined, slot: Slot, deadline: float | None, report: Report
) -> WorkerSummary:
    joined.study.sampler.reseed_rng()  # workers sharing a seed would sample the same configs
    objective = StudyObjective(joined.ctx, joined.study, report, slot, deadline)
    worker = WorkerLoop(joined, objective, identity(slot), opts.poll_s)
    report(f"worker {worker.who} joined study {opts.study!r} (budget {joined.budget} trials)")
    interrupted = False
    try:
        with deadline_alarm(deadline):
            tally = worker.run(deadline, report)
    except TimeUp:
        report(TIME_UP)
        tally = worker.tally()
    except KeyboardInterrupt:
        interrupted = True
        report("interrupted: the running engine was stopped and its trial queued again")
        tally = worker.tally()
    write_results(joined.ctx, joined.study)
    return WorkerSummary(opts.study, worker.ran, tally.complete, tally.budget, interrupted)
