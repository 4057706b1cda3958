"""What ``tune show`` prints, rebuilt from the Optuna storage alone (no space file needed), and
the study folder's ``capacity.json`` when ``tune capacity`` has written one."""

from __future__ import annotations

from pathlib import Path

from objectives.objective import get_objective
from tuner.export.capacity import read_capacity
from tuner.export.capacity_text import capacity_text
from tuner.export.data import space_from_text
from tuner.export.eligible import Policy
from tuner.export.recommend import recommend
from tuner.export.recommend_table import format_recommendations
from tuner.record.study import StudyRecord
from tuner.record.trial import TrialRecord
from tuner.storage.studies import open_study


def show_study(name: str, storage: str | None, results_dir: Path) -> str:
    study = open_study(name, storage, results_dir)
    record = StudyRecord.of(study.user_attrs)
    objective = get_objective(str(record.objective))
    trials = study.get_trials(deepcopy=False)
    space = space_from_text(name, str(record.space_yaml))
    against = tuple(get_objective(n) for n in record.trade_off or [])
    recs = recommend(trials, objective, record.tiers, Policy.of(space), against)
    complete = [r for r in map(TrialRecord.of, trials) if r.complete]
    confirms = sum(1 for r in complete if r.confirm_of is not None)
    done = len(complete) - confirms
    feasible = sum(1 for r in complete if r.feasible)
    head = (
        f"study {name!r}: objective {objective.name}, {done} finished trials "
        f"+ {confirms} confirmation launches "
        f"({feasible} feasible, {len(trials) - len(complete)} failed or unfinished)"
    )
    text = head + "\n\n" + format_recommendations(recs, objective)
    capacity = read_capacity(results_dir / name)
    return text if capacity is None else text + "\n\n" + capacity_text(capacity, paths=False)
