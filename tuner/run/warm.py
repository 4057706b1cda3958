"""Warm starts (``tune run --warm-start STUDY``): an earlier study's picks first, its
measurements the sampler's prior.

The earlier study may be the same space on the simulated engine, an older engine release or a
neighbouring model. Each of its tiers' recommendations (``tuner.score.recommend``, what
``tune show`` prints for it) is read into this space (``tuner.space.translate``: knobs this
space lacks dropped, values moved to the nearest this space takes, gaps at its defaults) and
queued right after the baseline, once each, unless this space's rules refuse it. Its
measurements become the sampler's prior (``tuner.samplers.prior``), each tier of this study
reading the earlier tier of nearest concurrency: they are never trials of this study, so
none of its tables, fronts or recommendations holds them. The study records where it was
warm-started from (``StudyRecord.warm_start``), so that a worker joining it later reads the
same prior.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import optuna
from optuna.trial import FrozenTrial

from objectives.objective import Objective
from tuner.errors import StudyError
from tuner.record.trial import TrialRecord, warm_attrs
from tuner.samplers.prior import Prior
from tuner.score.eligible import Policy
from tuner.score.recommend import TierRecommendation, recommend
from tuner.space.params import Scalar
from tuner.space.sample import config_key
from tuner.space.schema import Space
from tuner.space.translate import queued, translate
from tuner.storage.results import StudyPaths
from tuner.storage.study_data import StudyData, load_study_data
from tuner.storage.urls import redact


@dataclass(frozen=True)
class WarmStart:
    """What a new study takes from an earlier one, read and checked before anything runs."""

    study: str
    storage: str | None  # where the earlier study was read; None: the results folder's
    queue: tuple[tuple[int, dict[str, Scalar]], ...]  # (earlier trial, its pick in this space)
    prior: Prior
    notes: tuple[str, ...] = ()  # picks that could not be queued, said once

    def source(self) -> dict[str, Any]:
        """What the study records of it (no password)."""
        return {"study": self.study, "storage": redact(self.storage) if self.storage else None}


def load_warm_start(
    name: str, storage: str | None, results_dir: Path, space: Space, objective: Objective
) -> WarmStart:
    """The earlier study ``name`` as a warm start of a study of ``space``; a study that is
    not there, or optimised another objective, is a one-line ``StudyError``."""
    data = _earlier(name, storage, results_dir)
    if data.objective.name != objective.name:
        raise StudyError(
            f"--warm-start {name}: it optimised {data.objective.name}, not {objective.name}; "
            "its values would be read as another objective's"
        )
    recs = recommend(data.trials, data.objective, data.tiers, Policy.of(data.space), data.against)
    picks, notes = _picks(recs, space)
    return WarmStart(name, storage, picks, _prior(data, space), notes)


def queue_picks(study: optuna.Study, warm: WarmStart) -> None:
    """The earlier study's picks, queued (after the baseline, on a new study)."""
    for trial, config in warm.queue:
        study.enqueue_trial(config, user_attrs=warm_attrs(warm.study, trial))


def _earlier(name: str, storage: str | None, results_dir: Path) -> StudyData:
    if storage is None and not StudyPaths.for_study(results_dir, name).storage_file.exists():
        raise StudyError(
            f"--warm-start {name}: no study {name!r} under {results_dir}/; pass "
            "--warm-start-storage URL for a study stored elsewhere"
        )
    try:
        return load_study_data(name, storage, results_dir)
    except StudyError as err:
        raise StudyError(f"--warm-start {name}: {err}") from None


def _picks(
    recs: Sequence[TierRecommendation], space: Space
) -> tuple[tuple[tuple[int, dict[str, Scalar]], ...], tuple[str, ...]]:
    """Each tier's pick in this space, once each and not the baseline again; the notes say
    which picks this space's rules refuse."""
    seen = {config_key(space.defaults())}
    picks: list[tuple[int, dict[str, Scalar]]] = []
    notes: list[str] = []
    for rec in recs:
        config = queued(rec.params, space) if rec.trial is not None else None
        if rec.trial is not None and config is None:
            notes.append(f"warm start: c{rec.concurrency}'s pick breaks a rule here; not queued")
        if config is not None and config_key(config) not in seen:
            seen.add(config_key(config))
            picks.append((int(rec.trial or 0), config))
    return tuple(picks), tuple(notes)


def _prior(data: StudyData, space: Space) -> Prior:
    """Every launch the earlier study measured on its own draw of the workload (a launch on
    another draw measured other traffic), its config in this space, its values at the earlier
    tier nearest each of this study's (NaN where it was infeasible there)."""
    launches = [t for t in data.trials if _own_launch(TrialRecord.of(t))]
    nearest = [_nearest_tier(c, data.tiers) for c in space.workload.tiers]
    values = np.array(
        [[_value(t, i, data.tiers[i]) for i in nearest] for t in launches], dtype=float
    ).reshape(len(launches), len(nearest))
    points = tuple(translate(t.params, space) for t in launches)
    return Prior(data.name, points, values)


def _own_launch(r: TrialRecord) -> bool:
    return r.is_measurement and r.draw_seed is None


def _nearest_tier(concurrency: int, tiers: Sequence[int]) -> int:
    """The index of the tier nearest ``concurrency`` on a log scale (8 is nearer 4 than 20)."""
    return min(range(len(tiers)), key=lambda i: abs(math.log(tiers[i] / concurrency)))


def _value(trial: FrozenTrial, index: int, concurrency: int) -> float:
    values = trial.values or []
    ok = TrialRecord.of(trial).feasible_at(concurrency) and index < len(values)
    return float(values[index]) if ok and math.isfinite(values[index]) else math.nan
