"""The study as plain data, rebuilt from the Optuna storage alone.

Everything an export needs (space, objective, tiers, trials) comes out of the storage: the study
records the full space file text, so base args, env, target and engine are re-parsed from it and
the space file itself may be gone or edited since.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import optuna
import yaml
from optuna.trial import FrozenTrial, TrialState
from pydantic import ValidationError

from objectives.objective import Objective, get_objective
from tuner.errors import StudyError
from tuner.record.study import StudyRecord, missing_keys
from tuner.record.trial import TrialRecord
from tuner.space.schema import Space
from tuner.space.yaml_text import YamlLimitError, read_yaml_text
from tuner.storage.studies import open_study


@dataclass
class StudyData:
    """One study: its space, objective, tiers and every trial, as stored."""

    name: str
    storage: str
    study: optuna.Study
    space: Space
    objective: Objective
    tiers: list[int]
    record: StudyRecord
    trials: list[FrozenTrial] = field(default_factory=list)

    @property
    def against(self) -> tuple[Objective, ...]:
        """What each tier's front trades the objective against (empty: output throughput)."""
        return tuple(get_objective(n) for n in self.record.trade_off or [])

    @property
    def target_kind(self) -> str:
        """The launcher the trials ran on (``sim`` when ``--launcher sim`` replaced the target)."""
        return str(self.record.target_kind or self.space.target.kind)

    def counts(self) -> dict[str, int]:
        """Trials by outcome: total, complete, feasible, infeasible, failed, running."""
        done = [r for r in map(TrialRecord.of, self.trials) if r.complete]
        feasible = sum(1 for r in done if r.feasible)
        return {
            "total": len(self.trials),
            "complete": len(done),
            "feasible": feasible,
            "infeasible": len(done) - feasible,
            "failed": sum(1 for t in self.trials if t.state == TrialState.FAIL),
            "unfinished": sum(1 for t in self.trials if t.state in _UNFINISHED),
        }

    def wall_time_s(self) -> float:
        """From the first trial's start to the last trial's end (0 for an empty study)."""
        starts = [t.datetime_start for t in self.trials if t.datetime_start]
        ends = [t.datetime_complete for t in self.trials if t.datetime_complete]
        if not starts or not ends:
            return 0.0
        return max(0.0, (max(ends) - min(starts)).total_seconds())

    def created(self) -> str:
        stamp = self.record.created
        if not isinstance(stamp, int | float) or not math.isfinite(stamp):
            return "unknown"
        return datetime.fromtimestamp(stamp, tz=UTC).strftime("%Y-%m-%d %H:%M UTC")


_UNFINISHED = (TrialState.RUNNING, TrialState.WAITING)


def load_study_data(name: str, storage: str | None, results_dir: Path) -> StudyData:
    """Open the study and re-parse the space it recorded; a foreign study is a one-line error."""
    url = storage or f"sqlite:///{results_dir / name / 'study.db'}"
    return study_data(open_study(name, storage, results_dir), url)


def study_data(study: optuna.Study, url: str) -> StudyData:
    """A study already open (at ``url``) as plain data, its space re-parsed from the record."""
    name = study.study_name
    missing = missing_keys(study.user_attrs)
    if missing:
        raise StudyError(
            f"study {name!r} lacks {', '.join(missing)} in its user attrs: it was not created by "
            "'tune run', so there is nothing to export"
        )
    record = StudyRecord.of(study.user_attrs)
    return StudyData(
        name=name,
        storage=url,
        study=study,
        space=space_from_text(name, str(record.space_yaml)),
        objective=get_objective(str(record.objective)),
        tiers=record.tiers,
        record=record,
        trials=study.get_trials(deepcopy=False),
    )


def space_from_text(name: str, text: str) -> Space:
    try:
        return Space.model_validate(read_yaml_text(text))
    except (ValidationError, yaml.YAMLError, YamlLimitError) as err:
        first = str(err).splitlines()[0]
        raise StudyError(f"study {name!r}: its recorded space no longer parses: {first}") from None
