"""What ``tune show`` prints, rebuilt from the Optuna storage alone (no space file needed), and
the study folder's ``capacity.json`` when ``tune capacity`` has written one."""

from __future__ import annotations

from pathlib import Path

from objectives.objective import get_objective
from tuner.export.capacity_text import capacity_text
from tuner.export.hours import StudyHours, clock_words, span, startup_words, study_hours
from tuner.export.recommend_table import format_recommendations
from tuner.record.study import StudyRecord
from tuner.record.trial import TrialRecord
from tuner.score.eligible import Policy
from tuner.score.recommend import recommend
from tuner.storage.capacity import read_capacity
from tuner.storage.studies import open_study
from tuner.storage.study_data import space_from_text


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
    drawn = sum(1 for r in complete if r.draw_seed is not None)  # confirmations, on another draw
    # A pick launched with knobs at their defaults is on top of --trials, as a confirmation is.
    reverts = sum(1 for r in complete if r.revert_of is not None and r.confirm_of is None)
    done = len(complete) - confirms - reverts
    feasible = sum(1 for r in complete if r.feasible)
    head = (
        f"study {name!r}: objective {objective.name}, {done} finished trials "
        f"+ {confirms} confirmation launches ({drawn} on another draw of the workload) "
        f"+ {reverts} with knobs put back to their defaults "
        f"({feasible} feasible, {len(trials) - len(complete)} failed or unfinished)"
    )
    hours = study_hours(trials, record.tiers, record.target_kind == "sim")
    text = head + "\n\n" + format_recommendations(recs, objective) + "\n\n" + hours_text(hours)
    capacity = read_capacity(results_dir / name)
    return text if capacity is None else text + "\n\n" + capacity_text(capacity, paths=False)


def hours_text(h: StudyHours) -> str:
    """A few lines: each part's hours and share, then what start-up took first and later."""
    if not h.launches:
        return "where the hours went: no launch recorded its times (a study older than that)"
    total = f"{span(h.total_s)} over {h.launches} launches"
    lines = [f"where the hours went ({clock_words(h)}): {total}"]
    for name, seconds in h.parts():
        line = f"  {name:<14} {span(seconds):>9} {h.share(seconds):>4.0%}"
        if name == "tiers" and len(h.tiers_s) > 1:
            line += "  (" + ", ".join(f"c{c} {span(s)}" for c, s in h.tiers_s.items()) + ")"
        lines.append(line)
    if h.untimed:
        lines.append(f"  {h.untimed} earlier launches recorded no times and are left out")
    if h.cache is not None:
        lines.append(f"  start-up: {startup_words(h.cache)}")
    return "\n".join(lines)
