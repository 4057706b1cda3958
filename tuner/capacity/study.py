"""``tune capacity``'s core: each recommended config and the defaults, launched once each, and
the largest load at which the study's SLOs still hold, searched on the running engine.

The configs are the study's recommendations per tier (one entry per distinct config, labelled
by the tiers it wins) and the engine's defaults; each is launched through the study's own
launch path (``TrialRunner.serving``), searched, then settled at the boundary
(``tuner.capacity.search``): each side rests on ``repeats`` runs, so the answer carries its
spread. The answer goes to the study's ``capacity.json`` once every config is measured
(``capacity.partial.json`` till then: an interrupted run leaves the last complete answer in
place), and the exports are rebuilt so the recipe and the report show it.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from objectives.endpoint import Endpoint
from objectives.metrics import SLO
from tuner.capacity.probe import Prober, capacity_slos
from tuner.capacity.search import Bounds, Bracket, search, settle
from tuner.errors import InfraError, LaunchError, StudyError
from tuner.export import export_study
from tuner.export.capacity_text import probe_line
from tuner.record.trial import TrialRecord
from tuner.run.context import RunOptions, StudyContext, prepare
from tuner.run.join import recorded_space
from tuner.run.objective import finished_count
from tuner.run.signals import sigterm_as_interrupt
from tuner.run.trial import TrialRunner
from tuner.score.eligible import Policy
from tuner.score.recommend import recommend
from tuner.space import render_engine_config
from tuner.storage.capacity import (
    CONCURRENCY,
    HELD_TO_BOUND,
    REQUEST_RATE,
    CapacityReport,
    ConfigCapacity,
    Probe,
    write_capacity,
)
from tuner.storage.results import write_trial_config
from tuner.storage.study_data import StudyData, load_study_data

Report = Callable[[str], None]
RATE_START = 1.0  # req/s: doubled or halved from here
RATE_FLOOR = RATE_START / 64


@dataclass
class CapacityOptions:
    """What ``tune capacity`` asks for."""

    study: str
    storage: str | None = None
    results_dir: Path = Path("results")
    launcher: str | None = None  # default: the launcher the study ran on
    request_rate: bool = False  # search the request rate instead of the concurrency
    max_users: int = 256  # the concurrency bound; in request_rate mode the in-flight cap
    max_rate: float = 64.0
    max_steps: int = 24  # probes per config that choose a load (the repeats aside)
    repeats: int = 3  # runs at each side of the boundary, the search's own included

    @property
    def mode(self) -> str:
        return REQUEST_RATE if self.request_rate else CONCURRENCY

    def check(self) -> None:
        """Raises ``StudyError`` for a bound that leaves nothing to search."""
        if self.max_users < 1 or self.max_rate <= 0:
            raise StudyError("--max-users must be at least 1 and --max-rate above 0")
        if self.max_steps < 2 or self.repeats < 1:
            raise StudyError("--max-steps must be at least 2 and --repeats at least 1")


def run_capacity(opts: CapacityOptions, report: Report = print) -> CapacityReport:
    """Measure every config's capacity; writes ``capacity.json`` and the exports."""
    opts.check()
    data = load_study_data(opts.study, opts.storage, opts.results_dir)
    ctx = launch_context(opts, data, report)
    slos, top = capacity_slos(ctx.space)
    out = CapacityReport(
        study=opts.study,
        mode=opts.mode,
        slos=[s.model_dump(exclude_none=True) for s in slos],
        slo_tier=top,
        max_load=opts.max_rate if opts.request_rate else opts.max_users,
        max_steps=opts.max_steps,
        repeats=opts.repeats,
        measured_on=ctx.space.target.kind,
        trials=finished_count(data.study),
        in_flight=opts.max_users if opts.request_rate else None,
        created=time.time(),
    )
    session = Session(ctx, out, slos, report)
    with sigterm_as_interrupt():  # a scheduler's stop unwinds as Ctrl-C: the engine stopped
        for config in configs_to_measure(data):
            out.configs.append(config)
            session.measure(config)
            # A Ctrl-C keeps every config measured so far, beside the last complete answer.
            write_capacity(ctx.paths.root, out, complete=False)
    write_capacity(ctx.paths.root, out)
    export_study(opts.study, opts.storage, None, opts.results_dir)
    return out


def launch_context(opts: CapacityOptions, data: StudyData, report: Report) -> StudyContext:
    """The study's space as ``tune run`` validates it: the engine checked, the target set."""
    record = data.record
    space = recorded_space(opts.results_dir, opts.study, record)
    run = RunOptions(
        space_path=space,
        objective=record.objective,
        trials=1,
        launcher=opts.launcher or record.target_kind,
        study=opts.study,
        storage=opts.storage,
        results_dir=opts.results_dir,
        confirm=0,
    )
    ctx = prepare(run)
    for line in ctx.warnings:
        report(f"warning: {line}")
    return ctx


def configs_to_measure(data: StudyData) -> list[ConfigCapacity]:
    """Each distinct recommended config once, labelled by its tiers, then the defaults."""
    recs = recommend(data.trials, data.objective, data.tiers, Policy.of(data.space), data.against)
    out: list[ConfigCapacity] = []
    for rec in (r for r in recs if r.trial is not None):
        same = next((c for c in out if c.params == rec.params), None)
        if same is not None:
            same.tiers.append(rec.concurrency)
        else:
            out.append(ConfigCapacity("", [rec.concurrency], dict(rec.params), trial=rec.trial))
    defaults = dict(data.space.defaults())
    base = next((c for c in out if c.params == defaults), None)
    if base is None:
        base = ConfigCapacity("", [], defaults, trial=_baseline_trial(data))
        out.append(base)
    base.baseline = True
    for c in out:
        c.label = _label(c)
    return out


def _label(c: ConfigCapacity) -> str:
    tiers = ",".join(f"c{t}" for t in c.tiers)
    if c.baseline:
        return f"{tiers} (defaults)" if tiers else "defaults"
    return tiers


def _baseline_trial(data: StudyData) -> int | None:
    return next((t.number for t in data.trials if TrialRecord.of(t).baseline), None)


class Session:
    """Measures configs of one study, one launch each, against the same SLOs and bounds."""

    def __init__(
        self, ctx: StudyContext, out: CapacityReport, slos: list[SLO], report: Report
    ) -> None:
        self.ctx, self.out, self.slos, self.report = ctx, out, slos, report
        base_dir = ctx.space_path.parent
        self.runner = TrialRunner(
            ctx.space, ctx.objective, ctx.space.study.ready_timeout_s, base_dir
        )
        self.bounds = bounds_of(out, ctx.space.workload.tiers)

    def measure(self, config: ConfigCapacity) -> None:
        """One launch of ``config``: the search, then the boundary settled, into ``config``."""
        slug = re.sub(r"[^A-Za-z0-9]+", "-", config.label).strip("-") or "defaults"
        labels = {"study": self.ctx.name, "trial": f"capacity-{slug}"}
        engine = render_engine_config(self.ctx.space, config.params, labels=labels)
        run_dir = self.ctx.paths.root / "capacity" / slug
        write_trial_config(run_dir, engine)  # the exact launch, to reproduce a figure
        config.launches = 1
        try:
            with self.runner.serving(engine, run_dir) as endpoint:
                prober = self._prober(endpoint, run_dir, config.label)
                bracket = search(prober, self.bounds)
                settle(prober, bracket, self.bounds, self.out.repeats)
        except InfraError as err:
            raise InfraError(f"{config.label}: {err}") from err
        except LaunchError as err:
            config.failure = f"did not start: {err}"
            self.report(f"{config.label}: {config.failure}")
            return
        answer(config, bracket, self.bounds)

    def _prober(self, endpoint: Endpoint, run_dir: Path, label: str) -> Prober:
        def show(probe: Probe) -> None:
            self.report(probe_line(self.out, label, probe))

        workload, in_flight = self.ctx.space.workload, self.out.in_flight or 0
        base_dir = self.runner.base_dir
        return Prober(
            endpoint, workload, self.slos, self.out.mode, in_flight, base_dir, run_dir, show
        )


def bounds_of(out: CapacityReport, tiers: list[int]) -> Bounds:
    """From the study's least tier (or 1 req/s), to ``out.max_load``."""
    if out.mode == CONCURRENCY:
        start = float(min(min(tiers), out.max_load))
        return Bounds(start, 1.0, out.max_load, True, out.max_steps)
    return Bounds(min(RATE_START, out.max_load), RATE_FLOOR, out.max_load, False, out.max_steps)


def answer(config: ConfigCapacity, bracket: Bracket, bounds: Bounds) -> None:
    """The bracket as the config's answer, and what held it back."""
    config.capacity = _whole(bracket.held, bounds)
    config.above = None if bracket.broke is None else _whole(bracket.broke, bounds)
    config.exact = bracket.exact(bounds)
    config.probes = bracket.probes
    config.failure = bracket.stopped
    config.bound_by = _bound_by(config)


def _whole(load: float, bounds: Bounds) -> float:
    return int(load) if bounds.integer else load


def _bound_by(config: ConfigCapacity) -> str:
    """What broke at the first load that broke: the SLO metric, else why the runs failed."""
    if config.above is None:
        return HELD_TO_BOUND
    broken = [p for p in config.runs_at(config.above) if not p.ok]
    if not broken:
        return "not measured"  # the search stopped before it reached that load
    first = broken[0]
    if first.violated:
        return first.violated[0]
    if first.fatal:
        return "the engine stopped serving"
    return "failed requests" if "failed" in " ".join(first.broke) else first.broke[0]
