"""Confirmation runs on the simulated engine: leaders of each tier launched again, pooled."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

import launchers
from objectives.objective import get_objective
from tests.tuner.conftest import write_yaml
from tests.tuner.run.test_study import FlakyLauncher
from tuner.run.confirm import pending
from tuner.run.loop import WORKER_ATTR, study_tally
from tuner.run.study import RunOptions, run_study


def options(space: Path, tmp_path: Path, **kw: Any) -> RunOptions:
    return RunOptions(space_path=space, results_dir=tmp_path / "results", **kw)


def load(tmp_path: Path) -> optuna.Study:
    url = f"sqlite:///{tmp_path / 'results' / 'small' / 'study.db'}"
    return optuna.load_study(study_name="small", storage=url)


def confirmations(study: optuna.Study) -> list[optuna.trial.FrozenTrial]:
    return [t for t in study.trials if t.user_attrs.get("confirm_of") is not None]


def test_leaders_are_launched_again_on_a_fresh_engine(space_file: Path, tmp_path: Path) -> None:
    lines: list[str] = []
    summary = run_study(options(space_file, tmp_path, trials=6, confirm=1), report=lines.append)
    study = load(tmp_path)
    assert study.metric_names == ["p99_tpot c1", "p99_tpot c4"]  # the dashboard's names
    again = confirmations(study)
    assert again and summary.finished_trials == 6  # confirmations come on top of --trials
    assert 0 in {t.user_attrs["confirm_of"] for t in again}  # the baseline is re-measured too
    for t in again:
        first = study.trials[t.user_attrs["confirm_of"]]
        assert t.state == TrialState.COMPLETE and t.params == first.params
        assert "duplicate_of" not in t.user_attrs  # launched, not answered from the cache
        assert (
            tmp_path / "results" / "small" / "trials" / f"{t.number:04d}" / "engine.log"
        ).exists()
        assert t.values != first.values  # a fresh engine draws fresh run-to-run noise
    assert pending(study.trials, get_objective("p99_tpot"), [1, 4], 1) == []
    for rec in summary.recommendations:  # the baseline's repeat gives every tier its noise
        assert rec.noise_cv is not None
        assert rec.verdict in {"better", "worse", "within noise", "baseline", "baseline infeasible"}
    assert any(line.startswith("confirming ") for line in lines)
    assert any(" confirms " in line for line in lines)
    run_study(options(space_file, tmp_path, trials=6, confirm=1), report=lambda _: None)
    assert len(load(tmp_path).trials) == len(study.trials)  # already confirmed: nothing new


def test_a_single_slot_run_is_a_one_slot_worker(space_file: Path, tmp_path: Path) -> None:
    """Every trial of ``tune run``, confirmations too, is claimed through the worker loop, and
    the budget the workers share counts launches, not confirmations."""
    run_study(options(space_file, tmp_path, trials=4, confirm=1), report=lambda _: None)
    study = load(tmp_path)
    assert confirmations(study)
    assert all(WORKER_ATTR in t.system_attrs for t in study.trials)
    tally = study_tally(study, default_budget=99)
    assert tally.budget == 4 and tally.complete == 4 and tally.done


def test_confirm_zero_launches_nothing_extra(space_file: Path, tmp_path: Path) -> None:
    summary = run_study(options(space_file, tmp_path, trials=3, confirm=0), report=lambda _: None)
    assert not confirmations(load(tmp_path))
    assert all(len(r.runs) <= 1 for r in summary.recommendations)


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> type[FlakyLauncher]:
    launchers.launcher_class("sim")
    monkeypatch.setitem(launchers.LAUNCHERS, "flaky", FlakyLauncher)
    FlakyLauncher.hits = []
    return FlakyLauncher


def test_infra_fault_on_a_confirmation_requeues_it(
    space_file: Path, tmp_path: Path, small_space: dict[str, Any], flaky: type[FlakyLauncher]
) -> None:
    small_space["target"] = {"kind": "flaky", "fail_trials": [3]}
    write_yaml(space_file, small_space)
    run_study(options(space_file, tmp_path, trials=3, confirm=1), report=lambda _: None)
    study = load(tmp_path)
    failed = study.trials[3]
    assert failed.state == TrialState.FAIL and failed.user_attrs.get("confirm_of") is not None
    again = [t for t in study.trials if t.user_attrs.get("requeued_from") == 3]
    assert len(again) == 1 and again[0].state == TrialState.COMPLETE
    assert again[0].user_attrs["confirm_of"] == failed.user_attrs["confirm_of"]


def test_pending_picks_close_tiers_leaders_and_the_baseline() -> None:
    """A tier's leaders are launched again only where the pick is within the noise of a
    rival: a clear lead would not change with another draw."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    dist = {"chunk": CategoricalDistribution([1, 2, 3, 4, 5])}

    def add(chunk: int, c1: float, c8: float, **attrs: Any) -> None:
        tiers = {"1": {"p99_tpot_ms": c1}, "8": {"p99_tpot_ms": c8}}
        attrs = {"tiers": tiers, "feasible": True, **attrs}
        study.add_trial(
            optuna.trial.create_trial(
                params={"chunk": chunk}, distributions=dist, values=[c1, c8], user_attrs=attrs
            )
        )

    add(1, 50.0, 50.0, baseline=True)  # 0
    add(2, 10.0, 90.0)  # 1: leads tier 1, 1% ahead of trial 3: within the noise
    add(3, 90.0, 10.0)  # 2: leads tier 8 by half: no rival near
    add(4, 10.1, 20.0)  # 3: second at both
    add(5, 30.0, 30.0)  # 4
    p99 = get_objective("p99_tpot")
    assert [t.number for t in pending(study.trials, p99, [1, 8], 1)] == [0, 1]
    assert [t.number for t in pending(study.trials, p99, [1, 8], 2)] == [0, 1, 3]
    add(2, 10.05, 91.0, confirm_of=1)
    study.enqueue_trial({"chunk": 4}, user_attrs={"confirm_of": 3})
    assert [t.number for t in pending(study.trials, p99, [1, 8], 2)] == [0]
    assert pending(study.trials, p99, [1, 8], 0) == []


def test_each_pick_is_launched_on_another_draw_of_the_workload(
    small_space: dict[str, Any], tmp_path: Path
) -> None:
    """Where the space sets a limit, every pick is launched once more on the workload drawn
    with the next seed: other prompts, so other figures, never pooled with the study's."""
    space = write_yaml(tmp_path / "small.yaml", {**small_space, "slos": [
        {"metric": "max_itl_ms", "max": 600000}]})  # fmt: skip
    lines: list[str] = []
    summary = run_study(options(space, tmp_path, trials=6, confirm=1), report=lines.append)
    study = load(tmp_path)
    drawn = [t for t in study.trials if t.user_attrs.get("draw_seed") is not None]
    picks = {r.trial for r in summary.recommendations if r.trial is not None}
    assert {t.user_attrs["confirm_of"] for t in drawn} == picks
    for t in drawn:
        root = study.trials[t.user_attrs["confirm_of"]]
        assert t.user_attrs["draw_seed"] == small_space["workload"]["seed"] + 1
        assert t.params == root.params and t.state == TrialState.COMPLETE
        tokens = [s.user_attrs["tiers"]["1"]["total_input_tokens"] for s in (root, t)]
        assert tokens[0] != tokens[1]  # another draw: other prompt lengths
    for rec in summary.recommendations:
        assert not set(rec.runs) & {t.number for t in drawn}  # not pooled
    assert any("on another draw of the workload" in line for line in lines)
