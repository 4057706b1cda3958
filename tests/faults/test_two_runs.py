"""Two ``tune run`` on one study at once share its budget instead of overshooting it.

They used to end at ``[4/3]``. A single-slot run is now a one-slot worker: it claims trials
under the study lock against the shared budget, so a second run joins as one more worker.
Confirmations are queued under the lock too, so two runs do not confirm one leader twice.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy.exc
from optuna.trial import TrialState

from tests.faults.procs import finish, load, sqlite_url, tune
from tests.tuner.conftest import write_yaml
from tuner.run.objective import in_budget
from tuner.run.study import RunOptions, run_study
from tuner.storage import urls
from tuner.storage.urls import open_storage


def assert_shared(study: optuna.Study, budget: int, outs: list[str]) -> None:
    assert sum(map(in_budget, study.trials)) == budget  # confirmations come on top
    assert not [t for t in study.trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    shown = [int(n) for out in outs for n in re.findall(r"\[(\d+)/\d+\]", out)]
    assert shown and max(shown) <= budget, outs
    confirmed = Counter(t.user_attrs.get("confirm_of") for t in study.trials)
    confirmed.pop(None, None)
    assert all(n == 1 for n in confirmed.values()), confirmed  # one confirmation per leader


@pytest.mark.slow  # already held; two studies' worth of trials in threads: about 4 s
def test_two_runs_in_one_process_share_the_budget(
    tmp_path: Path, small_space: dict[str, Any]
) -> None:
    small_space["target"] = {"kind": "sim", "profile": "h200x4", "wall_startup_s": 0.2}
    space = write_yaml(tmp_path / "s.yaml", small_space)
    opts = RunOptions(space_path=space, trials=3, study="k", results_dir=tmp_path / "results")
    outs: list[list[str]] = [[], []]
    runs = [threading.Thread(target=run_study, args=(opts, out.append)) for out in outs]
    for run in runs:
        run.start()
    for run in runs:
        run.join(timeout=120)
    assert_shared(load(sqlite_url(tmp_path / "results", "k"), "k"), 3, ["\n".join(o) for o in outs])


@pytest.mark.slow  # two tune processes side by side: about 15 s
def test_two_tune_runs_at_once_share_the_budget(
    tmp_path: Path, small_space: dict[str, Any]
) -> None:
    """The report's reproduction: the same command twice, at once."""
    small_space["target"] = {"kind": "sim", "profile": "h200x4", "wall_startup_s": 1.0}
    space = write_yaml(tmp_path / "s.yaml", small_space)
    args = ("run", "--space", str(space), "--trials", "3", "--study", "k")
    procs = [tune(*args, cwd=tmp_path) for _ in range(2)]
    results = [finish(p, timeout_s=300) for p in procs]
    assert [code for code, _ in results] == [0, 0], results
    study = load(sqlite_url(tmp_path / "results", "k"), "k")
    assert_shared(study, 3, [out for _, out in results])


def open_at_once(url: str, runs: int) -> list[BaseException]:
    """What ``runs`` threads opening ``url`` at the same instant raise."""
    errors: list[BaseException] = []
    barrier = threading.Barrier(runs)

    def open_it() -> None:
        barrier.wait()
        try:
            open_storage(url, report=lambda _: None)
        except Exception as err:
            errors.append(err)

    opening = [threading.Thread(target=open_it) for _ in range(runs)]
    for t in opening:
        t.start()
    for t in opening:
        t.join(timeout=120)
    return errors


def test_an_open_that_meets_another_runs_schema_creation_opens_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What the second of two runs starting a new study meets: its insert of the schema's
    version breaks a unique constraint, since the first run inserted it a moment before."""
    real, calls = urls._rdb, []

    def first_loses_the_race(*args: Any) -> Any:
        calls.append(args)
        if len(calls) == 1:
            raise sqlalchemy.exc.IntegrityError("INSERT INTO alembic_version", {}, Exception())
        return real(*args)

    monkeypatch.setattr(urls, "_rdb", first_loses_the_race)
    open_storage(f"sqlite:///{tmp_path / 'study.db'}", report=lambda _: None)
    assert len(calls) == 2


@pytest.mark.slow  # the race itself, a few rounds of it: about 5 s
def test_runs_opening_a_new_database_at_once_all_open_it(tmp_path: Path) -> None:
    """Two runs starting a new study both create the schema: the second insert of its version
    broke a unique constraint, and that run died with a traceback."""
    for attempt in range(5):
        url = f"sqlite:///{tmp_path / str(attempt) / 'study.db'}"
        assert open_at_once(url, 4) == []
