"""Samplers by name, the grid walk, and SLOs as constraints the samplers see."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.trial import TrialState

from tests.tuner.conftest import write_yaml
from tuner.errors import StudyError
from tuner.record.trial import CONSTRAINT_KEYS
from tuner.run.study import RunOptions, run_study
from tuner.samplers.additive import AdditiveSampler
from tuner.samplers.grid import GridWalkSampler
from tuner.samplers.observed import Observed
from tuner.samplers.registry import DEFAULT_SAMPLER, SAMPLERS, grid_values, make_sampler
from tuner.samplers.tiered import TierTurnSampler
from tuner.space.schema import Space


def space_of(data: dict[str, Any]) -> Space:
    return Space.model_validate(data)


def options(space: Path, tmp_path: Path, **kw: Any) -> RunOptions:
    kw.setdefault("confirm", 0)
    return RunOptions(space_path=space, results_dir=tmp_path / "results", **kw)


def load(tmp_path: Path) -> optuna.Study:
    url = f"sqlite:///{tmp_path / 'results' / 'small' / 'study.db'}"
    return optuna.load_study(study_name="small", storage=url)


def test_unknown_sampler_lists_the_valid_ones(space_file: Path, tmp_path: Path) -> None:
    valid = "unknown sampler 'cmaes'; valid samplers: tpe, tpe-tiers, additive, gp"
    with pytest.raises(StudyError, match=valid):
        run_study(options(space_file, tmp_path, sampler="cmaes"), report=lambda _: None)
    assert not (tmp_path / "results").exists()


@pytest.mark.parametrize("name", [n for n in SAMPLERS if n != "gp"])
def test_every_sampler_runs_a_study(name: str, space_file: Path, tmp_path: Path) -> None:
    summary = run_study(options(space_file, tmp_path, trials=3, sampler=name), lambda _: None)
    assert summary.finished_trials == 3
    assert all(r.trial is not None for r in summary.recommendations)


def test_gp_needs_torch_and_scipy(small_space: dict[str, Any]) -> None:
    if any(importlib.util.find_spec(m) is None for m in ("torch", "scipy")):
        with pytest.raises(StudyError, match=r"needs torch and scipy .*pip install -e '\.\[gp\]'"):
            make_sampler("gp", space_of(small_space))
    else:
        assert isinstance(make_sampler("gp", space_of(small_space)), optuna.samplers.GPSampler)


def test_the_gp_extra_the_error_names_brings_both() -> None:
    pyproject = tomllib.loads((Path(__file__).parents[3] / "pyproject.toml").read_text())
    extra = pyproject["project"]["optional-dependencies"]["gp"]
    assert {re.split(r"[<>=]", req)[0] for req in extra} == {"torch", "scipy"}


def test_grid_walks_every_valid_point_once_after_the_baseline(
    small_space: dict[str, Any],
) -> None:
    small_space["rules"] = ["long_prefill_token_threshold <= max_num_batched_tokens"]
    small_space["parameters"]["long_prefill_token_threshold"]["choices"] = [0, 4096]
    space = space_of(small_space)
    study = optuna.create_study(sampler=make_sampler("grid", space))
    study.enqueue_trial(space.defaults())
    seen: list[tuple[Any, ...]] = []

    def walk(trial: optuna.Trial) -> float:
        seen.append(
            tuple(
                trial.suggest_categorical(n, p.choices or []) for n, p in space.parameters.items()
            )
        )
        return 0.0

    study.optimize(walk, n_trials=16)
    valid = [
        (m, s, lp) for m in (2048, 8192, 32768) for s in (4, 16, 64) for lp in (0, 4096) if lp <= m
    ]
    assert len(valid) == 15  # 4096 > 2048 is refused by the rule, never proposed
    assert sorted(seen[:15]) == sorted(valid) and seen[0] == (8192, 64, 0)
    assert seen[15] in valid  # exhausted: the walk starts over


def test_grid_order_is_nested_and_seeded() -> None:
    grid = {"a": [1, 2, 3], "b": ["x", "y"]}
    sampler = GridWalkSampler(grid, seed=0)
    points = [(p["a"], p["b"]) for p in sampler.points()]
    assert len(set(points)) == 6
    assert points[0][0] == points[1][0]  # the last parameter turns fastest
    orders = {
        tuple(tuple(p.values()) for p in GridWalkSampler(grid, seed=s).points()) for s in range(8)
    }
    assert len(orders) > 1


def test_grid_refuses_a_continuous_parameter(small_space: dict[str, Any]) -> None:
    small_space["parameters"]["gpu_memory_utilization"] = {
        "type": "float",
        "low": 0.85,
        "high": 0.95,
        "default": 0.9,
        "flag": "--gpu-memory-utilization",
    }
    with pytest.raises(StudyError, match=r"parameters\.gpu_memory_utilization has no finite"):
        make_sampler("grid", space_of(small_space))
    small_space["parameters"]["gpu_memory_utilization"]["step"] = 0.05
    assert grid_values(space_of(small_space))["gpu_memory_utilization"] == pytest.approx(
        [0.85, 0.9, 0.95]
    )


def test_slo_miss_is_a_constraint_the_sampler_sees(
    space_file: Path, tmp_path: Path, small_space: dict[str, Any]
) -> None:
    # p99 TTFT under 1 ms at tier 4 cannot be met; tier 1 has no SLO; a per-request SLO
    # (ttft) defines goodput and is not a constraint.
    small_space["slos"] = [
        {"metric": "p99_ttft_ms", "max": 1.0, "tiers": [4]},
        {"metric": "ttft", "max": 1.0},
    ]
    write_yaml(space_file, small_space)
    summary = run_study(options(space_file, tmp_path, trials=3), report=lambda _: None)
    study = load(tmp_path)
    assert len(study.directions) == 2  # one objective per tier
    for t in study.get_trials(states=(TrialState.COMPLETE,)):
        assert set(t.constraints) == set(CONSTRAINT_KEYS)  # every key on every trial
        assert t.constraints["slo"] > 0 and t.user_attrs["failure_kind"] == "slo"
        assert t.user_attrs["feasible"] is False
        assert t.user_attrs["tiers"]["4"]["p99_ttft_ms"] > 1.0  # the metrics are kept
    c1, c4 = summary.recommendations  # the SLO binds at tier 4 only
    assert c1.trial is not None and c4.trial is None
    sampler = make_sampler(DEFAULT_SAMPLER, space_of(small_space))
    assert isinstance(sampler, AdditiveSampler)
    done = study.get_trials(states=(TrialState.COMPLETE,))
    ok = [Observed(done, study.directions, i, sampler.tiers).ok.all() for i in range(2)]
    assert ok == [True, False]  # the sampler learns tier 1 from them, and tier 4's failure
    small_space["slos"] = [{"metric": "p99_ttft_ms", "max": 1e9, "tiers": [4]}]
    write_yaml(space_file, small_space)
    run_study(options(space_file, tmp_path / "met", trials=1), report=lambda _: None)
    met = load(tmp_path / "met").trials[0]
    assert met.constraints["slo"] == 0 and met.user_attrs["feasible"] is True


def test_tier_turns_find_each_tiers_own_best() -> None:
    # Three tiers whose optima sit in different corners, one corner (x=6) infeasible.
    sampler = TierTurnSampler(
        optuna.samplers.TPESampler(multivariate=True, seed=0, n_startup_trials=5)
    )
    study = optuna.create_study(directions=["minimize"] * 3, sampler=sampler)
    asked: list[int] = []

    def tiers(trial: optuna.Trial) -> list[float]:
        x = trial.suggest_categorical("x", [1, 2, 3, 4, 5, 6])
        y = trial.suggest_int("y", 0, 10)
        trial.set_constraint("slo", 1.0 if x == 6 else 0.0)
        asked.append(trial.number)
        return [(x - 1) ** 2 + y, (x - 3) ** 2 + (y - 5) ** 2, (x - 5) ** 2 + (10 - y)]

    study.optimize(tiers, n_trials=40)
    feasible = [t for t in study.trials if t.params["x"] != 6]
    for i, best in enumerate([(1, 0), (3, 5), (5, 10)]):
        top = min(feasible, key=lambda t: t.values[i])
        assert (top.params["x"], top.params["y"]) == best
    assert asked == list(range(40))
