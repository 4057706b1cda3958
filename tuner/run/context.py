"""Turning a ``tune run`` request into a validated study context, and opening its study.

``prepare`` validates everything (space, objective, target, storage) and writes nothing, so a
refused run leaves no trace in results/.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import optuna

from objectives.datasets import file_digests
from objectives.objective import Objective, parse_objectives
from objectives.workload import STALL_FLOOR_S
from tuner.errors import SpaceError, StudyError
from tuner.record.study import StudyRecord, write_trade_off, write_workload_files
from tuner.run.preflight import check_devices, check_engine
from tuner.run.slots import SlotRequest
from tuner.run.trial import TrialRunner
from tuner.run.warm import WarmStart, load_warm_start
from tuner.samplers.registry import DEFAULT_SAMPLER, check_sampler, make_sampler
from tuner.score.recommend import TierRecommendation
from tuner.space import Space, load_space
from tuner.space.render import api_key
from tuner.space.schema import TargetSpec
from tuner.space.stored import redact_space_data, stored_space_text
from tuner.storage.results import StudyPaths, set_aside_trials
from tuner.storage.urls import driver_url

DEFAULT_CONFIRM = 2  # leading configs per tier launched again after exploration (--confirm)


@dataclass
class RunOptions:
    """What ``tune run`` asks for; ``None`` means 'the space's default'."""

    space_path: Path
    objective: str | None = None
    trials: int | None = None
    timeout_s: float | None = None
    launcher: str | None = None
    study: str | None = None
    storage: str | None = None
    results_dir: Path = Path("results")
    parallel: SlotRequest = field(default_factory=SlotRequest)  # --gpus/--npus/--slots
    confirm: int | None = None  # leading configs per tier launched again (None: the default)
    sampler: str | None = None
    warm_start: str | None = None  # an earlier study to seed a new one from
    warm_start_storage: str | None = None  # where it is (default: --storage, else results/)


@dataclass
class StudyContext:
    """Everything a run needs, validated, before anything is written."""

    space: Space
    space_path: Path
    space_text: str
    objective: Objective
    name: str
    paths: StudyPaths
    storage_url: str
    trials: int
    timeout_s: float | None
    confirm: int = DEFAULT_CONFIRM
    sampler: str = DEFAULT_SAMPLER
    warnings: list[str] = field(default_factory=list)  # shown once when the run starts
    against: tuple[Objective, ...] = ()  # what each tier's front trades the objective against
    warm: WarmStart | None = None  # the earlier study's picks and prior (``--warm-start``)


@dataclass
class StudySummary:
    """How a run ended and what it recommends."""

    name: str
    finished_trials: int
    interrupted: bool
    recommendations: list[TierRecommendation] = field(default_factory=list)
    table: str = ""
    # Why the run stopped short of its budget through a fault to fix (None: it did not).
    stopped: str | None = None


def prepare(opts: RunOptions) -> StudyContext:
    """Validate the request; raises ``TunerError`` subclasses and writes nothing."""
    space = load_space(opts.space_path)
    name = opts.study or default_study_name(space, Path(opts.space_path), opts.launcher)
    if opts.launcher and opts.launcher != space.target.kind:
        space = _retarget(space, opts.launcher, opts.space_path)
    objective, against = parse_objectives(opts.objective or space.study.objective or "")
    paths = StudyPaths.for_study(opts.results_dir, name)
    trials = opts.trials if opts.trials is not None else space.study.trials
    if trials < 1:
        raise StudyError(f"--trials must be at least 1 (got {trials})")
    runner = TrialRunner(space, objective, space.study.ready_timeout_s)  # validates the target
    api_key(space)  # a key variable that is named but not set fails here, not in a trial
    warnings = check_engine(space, opts.space_path, getattr(runner.settings, "cwd", None))
    warnings += check_devices(space)
    text = Path(opts.space_path).read_text(encoding="utf-8")  # load_space checked it decodes
    url = opts.storage or paths.default_storage_url
    confirm = DEFAULT_CONFIRM if opts.confirm is None else opts.confirm
    if confirm < 0:
        raise StudyError(f"--confirm must be 0 (off) or more (got {confirm})")
    extra: list[str] = []
    if not space.parameters:
        # Every sample is the same launch: one measurement is all a budget could buy.
        if trials > 1 or confirm:
            extra.append("the space has no parameters: one measurement, no repeats")
        trials, confirm = 1, 0
    sampler = check_sampler(opts.sampler or DEFAULT_SAMPLER)
    make_sampler(sampler, space)  # a grid over a continuous space is refused here
    warm = _warm_start(opts, name, space, objective)
    extra += warm.notes if warm else ()
    return StudyContext(
        space,
        Path(opts.space_path),
        text,
        objective,
        name,
        paths,
        url,
        trials,
        opts.timeout_s,
        confirm,
        sampler,
        [*warnings, *extra],
        against,
        warm,
    )


def _warm_start(
    opts: RunOptions, name: str, space: Space, objective: Objective
) -> WarmStart | None:
    if opts.warm_start is None:
        if opts.warm_start_storage is not None:
            raise StudyError("--warm-start-storage names where --warm-start STUDY is; give both")
        return None
    if opts.warm_start == name:
        raise StudyError(f"--warm-start {name}: a study cannot warm-start itself")
    storage = opts.warm_start_storage or opts.storage
    return load_warm_start(opts.warm_start, storage, opts.results_dir, space, objective)


REHEARSAL_SUFFIX = "-sim"


def default_study_name(space: Space, path: Path, launcher: str | None) -> str:
    """The space's study name, or its file's stem; a rehearsal on the simulated engine of a
    space that targets real hardware is a study of its own (``NAME-sim``), so the real night
    that follows it on the same space never resumes what the simulator measured."""
    name = space.study.name or path.stem
    if launcher == "sim" and space.target.kind != "sim":
        return name + REHEARSAL_SUFFIX
    return name


def _retarget(space: Space, kind: str, path: Path) -> Space:
    if kind != "sim":
        raise SpaceError(
            f"{path}: --launcher {kind}: the space's target is '{space.target.kind}' and only "
            "'sim' can replace it (the settings of any other kind belong in the space's target)"
        )
    return simulated(space)


def simulated(space: Space) -> Space:
    """``space`` on its simulated stand-in: the target its ``sim:`` settings describe."""
    if space.target.kind == "sim":
        return space
    target = TargetSpec(kind="sim", **(space.sim or {}))
    return space.model_copy(update={"target": target})


def open_study(
    ctx: StudyContext,
    storage: optuna.storages.BaseStorage | None = None,
    report: Callable[[str], None] = print,
) -> optuna.Study:
    """Create or resume the study; a resumed study must match the space and objective.

    ``storage`` replaces ``ctx.storage_url`` with an opened storage (workers pass one with
    heartbeats and retries). A new study's results folder keeps no earlier study's trials.
    """
    if ctx.storage_url == ctx.paths.default_storage_url:
        ctx.paths.root.mkdir(parents=True, exist_ok=True)
    tiers = list(ctx.space.workload.tiers)
    study = optuna.create_study(
        study_name=ctx.name,
        storage=storage or driver_url(ctx.storage_url),
        directions=[ctx.objective.direction] * len(tiers),
        sampler=make_sampler(ctx.sampler, ctx.space, ctx.warm.prior if ctx.warm else None),
        load_if_exists=True,
    )
    if _check_or_record(study, ctx, tiers) and (aside := set_aside_trials(ctx.paths.root)):
        report(f"an earlier study's trial folders of this name were moved to {aside}")
    # optuna-dashboard names each objective by these ("p99_tpot c20"), not "Objective 3".
    names = [f"{ctx.objective.name} c{t}" for t in tiers]
    if study.metric_names != names:
        with warnings.catch_warnings():  # experimental in optuna since 3.2, stable in use
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names(names)
    return study


def _check_or_record(study: optuna.Study, ctx: StudyContext, tiers: list[int]) -> bool:
    """Whether the study is new (its record written now); a resumed one is checked."""
    digest = _space_digest(ctx.space)
    files = file_digests(ctx.space.workload, ctx.space_path.parent)
    record = StudyRecord.read(study)
    if record is None:
        StudyRecord.new(
            objective=ctx.objective.name,
            tiers=tiers,
            space_digest=digest,
            space_path=str(ctx.space_path),
            space_yaml=stored_space_text(ctx.space_text),  # its secrets named only
            target_kind=ctx.space.target.kind,
            hardware=ctx.space.hardware,
            engine=ctx.space.engine.model_dump(),
            trade_off=[o.name for o in ctx.against],
            warm_start=ctx.warm.source() if ctx.warm else None,
            workload_files=files,
        ).write(study)
        return True
    _check_warm_start(ctx, record)
    if record.objective != ctx.objective.name:
        raise StudyError(
            f"study {ctx.name!r} optimises {record.objective!r}, not "
            f"{ctx.objective.name!r}; use --study NEW_NAME for a new study"
        )
    if record.space_digest != digest:
        raise StudyError(_changed_space(ctx, record))
    _check_files(ctx, record, files, study)
    if (record.trade_off or []) != [o.name for o in ctx.against]:
        write_trade_off(study, [o.name for o in ctx.against])
    return False


def _changed_space(ctx: StudyContext, record: StudyRecord) -> str:
    """Why a stored study cannot be resumed with this space, and the ways on."""
    made, now = record.target_kind, ctx.space.target.kind
    if made and made != now:
        return (
            f"study {ctx.name!r} was made with the {made!r} launcher, and this run launches "
            f"{now!r}: pass --launcher {made} to resume it, or --study NEW_NAME for a study "
            f"on {now!r}"
        )
    return (
        f"study {ctx.name!r} was created from a different space (parameters, rules, target "
        "or workload changed); use --study NEW_NAME for a new study"
    )


def _check_files(
    ctx: StudyContext, record: StudyRecord, files: dict[str, str], study: optuna.Study
) -> None:
    """A workload file whose contents changed sends other requests: no resume measures them."""
    if record.workload_files is None:
        write_workload_files(study, files)  # created before they were recorded: from now on
        return
    changed = sorted(
        k for k in {*files, *record.workload_files} if files.get(k) != record.workload_files.get(k)
    )
    if changed:
        raise StudyError(
            f"study {ctx.name!r} was measured with other contents of {', '.join(changed)}; "
            "use --study NEW_NAME for a new study, or put the files back as they were"
        )


def _check_warm_start(ctx: StudyContext, record: StudyRecord) -> None:
    """A warm start seeds a new study: a resumed one keeps the one it was created with."""
    if ctx.warm is None:
        return
    earlier = (record.warm_start or {}).get("study")
    if earlier != ctx.warm.study:
        was = f"warm-started from {earlier!r}" if earlier else "not warm-started"
        raise StudyError(
            f"study {ctx.name!r} was {was}; a warm start seeds a new study: use --study NEW_NAME"
        )


# Not in the digest at these values: when a silent engine counts as hung, and the whole-tier
# measurement that was the only one before steady_state.
LATER_WORKLOAD_DEFAULTS: dict[str, object] = {
    "stall_floor_s": STALL_FLOOR_S,
    "steady_state": False,
    "client_cpus": [],
}


def _space_digest(space: Space) -> str:
    keys = {"parameters", "rules", "workload", "slos", "engine", "target", "base"}
    # Of the stored form: a worker launching from the stored copy joins the same study.
    data = redact_space_data(space.model_dump(mode="json", include=keys))
    # Where the API key is read is no part of what is measured (and older studies lack it).
    if data["target"].get("api_key_env") is None:
        data["target"].pop("api_key_env", None)
    for param in data["parameters"].values():  # a sampler's hint, not what is launched
        if param.get("ordered", True):
            param.pop("ordered", None)
    # Workload fields added since, at their defaults, measure what older studies measured.
    for key, default in LATER_WORKLOAD_DEFAULTS.items():
        if data["workload"].get(key) == default:
            data["workload"].pop(key)
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
