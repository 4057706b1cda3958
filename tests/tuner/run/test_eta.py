"""The progress line's ETA and what ``--timeout`` leaves room for, from measured trial times."""

from __future__ import annotations

import time
from datetime import datetime, timedelta
from pathlib import Path

import optuna
from optuna.trial import FrozenTrial, TrialState, create_trial

from tuner.run.eta import WALL, Clock, eta_note, launch_seconds, plan_note
from tuner.run.study import RunOptions, run_study

START = datetime(2026, 1, 1, 8, 0, 0)


def study_of(*seconds: float, running: int = 0, free: int = 0) -> optuna.Study:
    """Launches that took ``seconds`` each, ``free`` instant rule refusals, ``running`` more."""
    study = optuna.create_study()
    for s in seconds:
        study.add_trial(timed(create_trial(value=1.0), s))
    for _ in range(free):
        study.add_trial(timed(create_trial(value=1.0, user_attrs={"failure_kind": "rules"}), 0))
    for _ in range(running):
        study.add_trial(timed(create_trial(state=TrialState.RUNNING), None))
    return study


def timed(trial: FrozenTrial, seconds: float | None) -> FrozenTrial:
    trial.datetime_start = START
    trial.datetime_complete = None if seconds is None else START + timedelta(seconds=seconds)
    return trial


def test_the_mean_counts_launches_only() -> None:
    study = study_of(8.0, 12.0, free=3)
    assert launch_seconds(study.get_trials()) == [8.0, 12.0]


def test_the_hardware_clock_counts_the_wall_time_a_run_waited() -> None:
    """Waiting on another run's trial moves a rehearsal's clock; the wall clock is the wall's."""
    study = optuna.create_study()
    clock = Clock(hardware=True, study=study)
    clock.waited(4.5)
    clock.waited(2.0)
    assert clock.now() == 6.5
    before = WALL.now()
    WALL.waited(3600.0)
    assert WALL.waited_s == 0.0 and WALL.now() - before < 60


def test_eta_and_room_before_the_timeout() -> None:
    note = eta_note(study_of(8.0, 12.0), left=3, deadline=time.monotonic() + 605)
    assert note.startswith("  | 3 to go: done in ~30 s (about ")
    assert "; 10.1 min to the timeout fits 60 more (at 10 s a trial)" in note


def test_a_timeout_too_short_for_the_budget_says_how_much_of_it_fits() -> None:
    note = eta_note(study_of(10.0), left=100, deadline=time.monotonic() + 605)
    assert "100 to go: done in ~16.7 min" in note
    assert "10.1 min to the timeout fits 60 of the 100 to go" in note


def test_trials_running_elsewhere_share_the_work() -> None:
    note = eta_note(study_of(10.0, running=1), left=4, deadline=None)
    assert "4 to go: done in ~20 s" in note and note.endswith("(at 10 s a trial, 2 at once)")


def test_nothing_to_say_before_a_launch_or_after_the_budget() -> None:
    assert eta_note(study_of(free=2), left=3, deadline=None) == ""
    assert eta_note(study_of(10.0), left=0, deadline=None) == ""
    assert "timeout reached" in eta_note(study_of(10.0), left=0, deadline=time.monotonic() - 1)


def test_a_resumed_run_plans_its_budget_on_its_first_line() -> None:
    assert plan_note(study_of(10.0), left=400, timeout_s=3600) == (
        "; 60.0 min to the timeout fits 360 of the 400 to go at the measured 10 s a trial"
    )
    assert plan_note(study_of(10.0), left=4, timeout_s=None) == ""


def test_tune_run_with_a_timeout_shows_it_on_every_trial(space_file: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    opts = RunOptions(space_file, trials=3, confirm=0, timeout_s=3600, results_dir=tmp_path)
    run_study(opts, report=lines.append)
    trials = [line for line in lines if line.startswith("trial ")]
    assert len(trials) == 3
    assert "2 to go: done in ~" in trials[0] and "to the timeout fits" in trials[0]
    assert "to go" not in trials[-1] and "to the timeout fits" in trials[-1]
    lines.clear()
    run_study(RunOptions(space_file, trials=5, confirm=0, timeout_s=3600, results_dir=tmp_path),
              report=lines.append)  # fmt: skip
    assert "3/5 trials done" in lines[0] and "to the timeout fits" in lines[0]
