"""The study loop behind ``tune run``: baseline first, resume, failures recorded, Ctrl-C safe.

``run_study`` creates or resumes the Optuna study (one objective per concurrency tier, so the
sampler looks for each tier's best config) and runs trials until the study holds the asked
number of finished trials, then launches each tier's leading configs again (``confirm``).
A single-slot run is a one-slot worker: it claims, runs and tells its trials through the same
``WorkerLoop`` as ``tune worker``, with the same storage (heartbeats, retries), study lock,
stop rules and re-queue rules; several slots are one worker process each.
"""

from __future__ import annotations

from tuner.export.recommend_table import format_recommendations
from tuner.run.confirm import confirm_leaders
from tuner.run.context import RunOptions, StudyContext, StudySummary, prepare
from tuner.run.eta import WALL, Clock, plan_note, run_clock
from tuner.run.join import identity, join_study, run_options
from tuner.run.loop import Joined, WorkerLoop
from tuner.run.objective import Report, StudyObjective, finished_count, write_results
from tuner.run.parallel import run_study_in_slots
from tuner.run.plan import space_plan
from tuner.run.signals import TIME_UP, TimeUp, deadline_alarm, sigterm_as_interrupt
from tuner.run.slots import Slot, plan_slots
from tuner.storage.urls import redact

POLL_S = 2.0  # how often a run waits on a trial another process of the study is running

__all__ = ["RunOptions", "StudySummary", "run_study"]


def run_study(opts: RunOptions, report: Report = print) -> StudySummary:
    """Run (or resume) a study until it holds ``trials`` finished trials, or time runs out."""
    ctx = prepare(opts)
    for line in ctx.warnings:
        report(f"warning: {line}")
    slots = plan_slots(ctx.space, opts.parallel)
    if len(slots) > 1:  # one worker process per slot (see tuner.run.parallel)
        joined, ran = run_study_in_slots(ctx, opts, slots, report)
        return _summary(joined, report, ran.interrupted)
    interrupted = False
    stopped: str | None = None
    with sigterm_as_interrupt():
        joined = join_study(run_options(ctx, opts), report, ctx)
        # On the simulated engine --timeout reads the hardware's clock: a rehearsal plans the
        # node's night, and a launch takes seconds here, so no alarm cuts one short.
        clock = run_clock(joined.study, ctx.space.target.kind == "sim")
        deadline = None if ctx.timeout_s is None else clock.now() + ctx.timeout_s
        done = finished_count(joined.study)
        left = ctx.trials - done
        report(opening_line(ctx, done) + plan_note(joined.study, left, ctx.timeout_s, clock))
        if plan := space_plan(ctx, joined.study, left, clock):
            report(plan)
        try:
            with deadline_alarm(None if clock.hardware else deadline):
                stopped = _run_here(joined, slots[0], deadline, report, clock)
        except TimeUp:
            report(TIME_UP)
        except KeyboardInterrupt:
            interrupted = True
            report("interrupted: the running engine was stopped; rerun the same command to resume")
    return _summary(joined, report, interrupted, stopped)


def _summary(
    joined: Joined, report: Report, interrupted: bool, stopped: str | None = None
) -> StudySummary:
    """Every result file written, and what the study recommends now."""
    ctx = joined.ctx
    exported = write_results(ctx, joined.study, only=None)
    report(f"exported recipe.yaml, commands.md, report.html and tables to {exported.out_dir}/")
    assert exported.export is not None
    recs = exported.export.recommendations
    table = format_recommendations(recs, ctx.objective)
    done = finished_count(joined.study)
    if stopped is not None:
        stopped = f"stopped with {done} of {ctx.trials} trials done after {stopped}"
    return StudySummary(ctx.name, done, interrupted, recs, table, stopped)


def opening_line(ctx: StudyContext, done: int) -> str:
    """The run's first line: how far the study is, and where it is stored (no password)."""
    warm = f", warm-started from {ctx.warm.study!r}" if ctx.warm else ""
    return (
        f"study {ctx.name!r}: {done}/{ctx.trials} trials done, storage "
        f"{redact(ctx.storage_url)}{warm}"
    )


def _run_here(
    joined: Joined, slot: Slot, deadline: float | None, report: Report, clock: Clock = WALL
) -> str | None:
    """The budget through the one claim / run / tell loop every worker runs, then, once it is
    met, the leaders of every tier launched again. Returns why it stopped short through a
    fault to fix (``StudyObjective.failed_stop``), else None."""
    objective = StudyObjective(joined.ctx, joined.study, report, slot, deadline, clock)
    worker = WorkerLoop(joined, objective, identity(slot), poll_s=POLL_S)
    if worker.run(deadline, report).done:  # explored in full: confirm the leaders
        confirm_leaders(worker, joined.ctx.confirm, deadline)
    return objective.failed_stop()
