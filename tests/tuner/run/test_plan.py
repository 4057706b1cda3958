"""The night planned before its first launch: a trial's cost from the space's baseline."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from objectives.objective import get_objective
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tests.tuner.run.test_confirm import load
from tuner.run.eta import launch_seconds
from tuner.run.plan import TrialCost, plan_line, space_cost
from tuner.run.study import RunOptions, run_study
from tuner.space import load_space

P99 = get_objective("p99_tpot")


def test_the_plan_says_whether_the_trials_fit_and_what_the_timeout_buys() -> None:
    cost = TrialCost(startup_s=120.0, warmup_s=30.0, tiers_s=1350.0)  # 25 min a trial
    short = plan_line(cost, 40, 8 * 3600)
    assert "25.0 min a trial (start-up 2.0 min, warm-up 30 s, tiers 22.5 min)" in short
    assert "40 trials need up to 16.67 h of hardware time" in short
    assert short.endswith(
        "the 8.00 h timeout buys 19 of them (--trials 19 fits, as does --timeout 17h)"
    )
    assert plan_line(cost, 19, 8 * 3600).endswith("the 8.00 h timeout fits them")
    assert plan_line(cost, 1, None).endswith("1 trial needs up to 25.0 min of hardware time")


def test_the_space_cost_is_its_baseline_launch_on_the_hardwares_clock(
    space_file: Path, tmp_path: Path
) -> None:
    """The plan's trial is what the study's own baseline then spends: start-up, warm-up and
    every tier, each on the simulated hardware's clock."""
    cost = space_cost(load_space(space_file), P99, space_file.parent)
    assert cost is not None and cost.startup_s > 0 and cost.warmup_s > 0 and cost.tiers_s > 0
    lines: list[str] = []
    opts = RunOptions(space_file, trials=1, confirm=0, results_dir=tmp_path / "results")
    run_study(opts, lines.append)
    measured = [line for line in lines if line.startswith("trial ")]
    assert "baseline" in measured[0]

    [baseline_s] = launch_seconds(load(tmp_path).trials, hardware=True)
    assert cost.total_s == pytest.approx(baseline_s, rel=0.1)  # one noise draw apart


def test_a_space_with_no_simulated_stand_in_is_planned_by_its_launches(tmp_path: Path) -> None:
    data: dict[str, Any] = copy.deepcopy(SMALL_SPACE)
    repo = Path(__file__).resolve().parents[3]
    node = yaml.safe_load((repo / "search_spaces" / "minimax_h200.yaml").read_text())
    data["target"] = node["target"]  # the node's docker target: nothing here can launch it
    space = load_space(write_yaml(tmp_path / "endpoint.yaml", data))
    assert space_cost(space, P99, tmp_path) is None
    data["sim"] = {"profile": "h200x4"}
    space = load_space(write_yaml(tmp_path / "stand_in.yaml", data))
    assert space_cost(space, P99, tmp_path) is not None


def test_tune_run_with_a_timeout_plans_from_the_space_then_from_its_launches(
    space_file: Path, tmp_path: Path
) -> None:
    lines: list[str] = []
    opts = RunOptions(space_file, trials=2, confirm=0, timeout_s=60, results_dir=tmp_path)
    run_study(opts, report=lines.append)
    assert lines[1].startswith("plan from the space") and "the 60 s timeout buys" in lines[1]
    lines.clear()
    run_study(RunOptions(space_file, trials=3, confirm=0, timeout_s=3600, results_dir=tmp_path),
              report=lines.append)  # fmt: skip
    assert "to the timeout fits" in lines[0]  # measured now: the study's own pace
    assert not any(line.startswith("plan from the space") for line in lines)
