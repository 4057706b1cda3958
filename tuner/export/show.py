"""What ``tune show`` prints, rebuilt from the Optuna storage alone (no space file needed)."""

from __future__ import annotations

from pathlib import Path

import optuna

from objectives.objective import get_objective
from tuner.errors import StudyError
from tuner.export.recommend import format_recommendations, recommend
from tuner.record.pooling import CONFIRM_ATTR
from tuner.storage.results import StudyPaths
from tuner.storage.urls import driver_url


def load_study(name: str, storage: str | None, results_dir: Path) -> optuna.Study:
    """Open an existing study; a missing one is a one-line error, never a new empty study."""
    paths = StudyPaths.for_study(results_dir, name)
    if storage is None:
        if not paths.storage_file.exists():
            raise StudyError(
                f"no study {name!r} under {results_dir}/ (looked for {paths.storage_file}); "
                "pass --storage URL for a study stored elsewhere"
            )
        storage = paths.default_storage_url
    storage = driver_url(storage)
    try:
        return optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        known = [s.study_name for s in optuna.get_all_study_summaries(storage)]
        raise StudyError(f"no study {name!r} in {storage}; studies there: {known}") from None


def show_study(name: str, storage: str | None, results_dir: Path) -> str:
    # The exporter's opener reads every backend tune writes (journal files included); imported
    # here because it builds on load_study above.
    from tuner.export.data import open_study

    study = open_study(name, storage, results_dir)
    attrs = study.user_attrs
    objective = get_objective(attrs["objective"])
    tiers = [int(t) for t in attrs["tiers"]]
    trials = study.get_trials(deepcopy=False)
    recs = recommend(trials, objective, tiers)
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    confirms = sum(1 for t in complete if t.user_attrs.get(CONFIRM_ATTR) is not None)
    done = len(complete) - confirms
    feasible = sum(1 for t in complete if t.user_attrs.get("feasible"))
    head = (
        f"study {name!r}: objective {objective.name}, {done} finished trials "
        f"+ {confirms} confirmation launches "
        f"({feasible} feasible, {len(trials) - len(complete)} failed or unfinished)"
    )
    return head + "\n\n" + format_recommendations(recs, objective)
