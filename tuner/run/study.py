"""The study loop behind ``tune run``: baseline first, resume, failures recorded, Ctrl-C safe.

``run_study`` creates or resumes the Optuna study (one objective per concurrency tier, so the
sampler looks for each tier's best config) and runs trials until the study holds the asked
number of finished trials, then launches each tier's leading configs again (``confirm``).
"""

from __future__ import annotations

import time

from tuner.errors import InfraError
from tuner.export import export_study
from tuner.export.recommend import format_recommendations
from tuner.run.confirm import run_confirmations
from tuner.run.context import RunOptions, StudyContext, StudySummary, open_study, prepare
from tuner.run.objective import Report, TrialLoop, finished_count, seed_queue, write_tables
from tuner.run.parallel import run_study_in_slots
from tuner.run.signals import sigterm_as_interrupt
from tuner.run.slots import plan_slots

__all__ = ["RunOptions", "StudySummary", "run_study"]


def run_study(opts: RunOptions, report: Report = print) -> StudySummary:
    """Run (or resume) a study until it holds ``trials`` finished trials, or time runs out."""
    ctx = prepare(opts)
    for line in ctx.warnings:
        report(f"warning: {line}")
    slots = plan_slots(ctx.space, opts.parallel)
    if len(slots) > 1:  # one worker process per slot (see tuner.run.parallel)
        summary = run_study_in_slots(ctx, opts, slots, report)
        export_results(ctx, report)
        return summary
    study = open_study(ctx)
    seed_queue(study, ctx)
    loop = TrialLoop(ctx, study, report, slots[0])
    interrupted = False
    started = time.monotonic()
    done = finished_count(study)
    report(f"study {ctx.name!r}: {done}/{ctx.trials} trials done, storage {ctx.storage_url}")
    try:
        with sigterm_as_interrupt():
            if finished_count(study) < ctx.trials:
                study.optimize(
                    loop, timeout=ctx.timeout_s, catch=(InfraError,), callbacks=[loop.after_trial]
                )
            if finished_count(study) >= ctx.trials:  # explored in full: confirm the leaders
                left = ctx.timeout_s and ctx.timeout_s - (time.monotonic() - started)
                run_confirmations(study, loop, ctx.confirm, left)
    except KeyboardInterrupt:
        interrupted = True
        report("interrupted: the running engine was stopped; rerun the same command to resume")
    recs = write_tables(ctx, study)
    export_results(ctx, report)
    table = format_recommendations(recs, ctx.objective)
    return StudySummary(ctx.name, finished_count(study), interrupted, recs, table)


def export_results(ctx: StudyContext, report: Report) -> None:
    """recipe.yaml, commands.md, report.html and the tables, from the storage alone."""
    exported = export_study(ctx.name, ctx.storage_url, ctx.paths.root)
    report(f"exported recipe.yaml, commands.md, report.html and tables to {exported.out_dir}/")
