"""The sample-efficiency benchmark's scoring: when a search counts as having found a tier's
best, and how the table reports medians and their spread."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from bench import discretise, sweep
from bench.efficiency_table import (
    median_cell,
    ratio_interval,
    render_trace,
    spread_cell,
    trace_rows,
)
from bench.efficiency_truth import feasible_at, reached_all, trials_to_reach, truths
from tuner.samplers.registry import grid_values


def rec(value: float, ok: bool = True) -> dict:
    kind = "ok" if ok else "slo"
    return {"values": [value], "kind": kind, "constraints": {"slo": 0.0 if ok else 1.0}}


def test_reached_when_the_pick_is_truly_near_the_best(se: ModuleType) -> None:
    truth = {"best": 10.0, "near": 10.2, "far": 12.0}
    launches = [("far", rec(12.0)), ("bad", rec(1.0, ok=False)), ("near", rec(10.1))]
    assert trials_to_reach(launches, truth, 0, 0.03, False) == 3


def test_a_lucky_draw_of_a_worse_config_keeps_the_pick_wrong(se: ModuleType) -> None:
    """The pick is the best *observed* value: noise that flatters a worse config hides a
    better one measured later, and the search does not count as having found it."""
    truth = {"best": 10.0, "far": 12.0}
    launches = [("far", rec(9.5)), ("best", rec(10.0))]
    assert trials_to_reach(launches, truth, 0, 0.03, False) is None


def test_spread_shows_quartiles_and_censored_seeds(se: ModuleType) -> None:
    assert spread_cell([3, 4, 6, 9, 12, 12, 13, 14, 14, 15], 100) == "6..14"
    assert spread_cell([None, None, None, 5, 7, 8], 100) == "7..>100"
    assert median_cell([None, None, 4], 50) == (float("inf"), ">50")


def test_ratio_interval_is_narrow_for_steady_seeds_and_wide_for_scattered_ones(
    se: ModuleType,
) -> None:
    assert ratio_interval([10] * 10, [30] * 10) == "3.0x..3.0x"
    lo, hi = ratio_interval([5, 14] * 5, [8, 48] * 5).split("..")
    assert float(lo[:-1]) < 1.0 and float(hi[:-1]) > 5.0  # 8/14 .. 48/5
    assert ratio_interval([10] * 6, [None] * 6) == "inf..inf"
    assert ratio_interval([None] * 6, [20] * 6) == "0.0x..0.0x"


def test_true_value_is_the_mean_over_engine_seeds(se: ModuleType) -> None:
    table = {
        "a|x": rec(10.0), "b|x": rec(12.0),
        "a|y": rec(9.0), "b|y": rec(13.5),
    }  # fmt: skip
    truth = truths(table, ["x", "y"], 1, ["a", "b"])
    assert truth == [{"x": 11.0, "y": 11.25}]
    assert truths(table, ["x", "y"], 1, ["a"]) == [{"x": 10.0, "y": 9.0}]


def test_a_config_infeasible_on_any_seed_is_not_a_true_candidate(se: ModuleType) -> None:
    table = {"a|x": rec(10.0), "b|x": rec(10.0, ok=False), "a|y": rec(11.0), "b|y": rec(11.0)}
    assert truths(table, ["x", "y"], 1, ["a", "b"]) == [{"y": 11.0}]


def test_a_config_missing_one_tiers_slo_is_a_candidate_at_the_others(se: ModuleType) -> None:
    """As tune's recommendations count it: a TTFT SLO missed at c20 says nothing about c1."""
    slow_c20 = {"values": [9.0, 30.0], "kind": "slo", "constraints": {"slo": 0.4}}
    table = {"a|x": {**slow_c20, "tier_ok": [True, False]}, "a|y": rec2(10.0, 20.0)}
    assert truths(table, ["x", "y"], 2, ["a"]) == [{"x": 9.0, "y": 10.0}, {"y": 20.0}]
    launches = [("y", table["a|y"]), ("x", table["a|x"])]
    truth = truths(table, ["x", "y"], 2, ["a"])
    assert trials_to_reach(launches, truth[0], 0, 0.03, False) == 2
    assert trials_to_reach(launches, truth[1], 1, 0.03, False) == 1
    # records without per-tier feasibility (a refusal, a rule) fall back to the constraints
    assert not feasible_at(rec(9.0, ok=False), 0) and feasible_at(rec(9.0), 0)


def rec2(c1: float, c20: float) -> dict:
    return {"values": [c1, c20], "kind": None, "constraints": {"slo": 0.0}, "tier_ok": [True, True]}


def test_replicates_are_named_as_earlier_tables_hold_them(se: ModuleType) -> None:
    assert sweep.replicate_names(4) == ["a", "b", "c", "d"]


def test_trace_rows_show_each_launch_against_each_tiers_best(se: ModuleType) -> None:
    truth = [{"x": 12.0, "y": 10.0}, {"x": 20.0, "y": 25.0}]
    launches = [
        ("z", {**rec(5.0, ok=False), "params": {"budget": 8192}}),
        ("x", {"values": [12.0, 20.0], "kind": None, "constraints": {}, "params": {"budget": 1}}),
        ("y", {"values": [10.0, 25.0], "kind": None, "constraints": {}, "params": {"budget": 2}}),
    ]
    rows = trace_rows(launches, truth, 0.03, False)
    assert [r["kind"] for r in rows] == ["slo", "ok", "ok"]
    assert rows[0]["vs_best"] == [None, None]
    assert rows[1]["vs_best"] == [1.2, 1.0] and rows[1]["reached"] == [1]
    assert rows[2]["vs_best"] == [1.0, 1.25] and rows[2]["reached"] == [0]
    text = render_trace(rows, [1, 8]).splitlines()
    assert text[0].split() == ["#", "budget", "kind", "c1", "c8", "reached"]
    assert text[1].split() == ["1", "8192", "slo", "-", "-"]
    assert text[3].split() == ["3", "2", "ok", "1.00", "1.25", "c1"]


# --- other spaces: --space and its discretisation -------------------------------------------

SPACES = Path(__file__).resolve().parents[2] / "search_spaces"
ASCEND = {
    "hccl_aiv": ["unset", "AIV"],
    "fused_mc2": ["0", "1", "2"],
    "flashcomm1": ["0", "1"],
    "task_queue": ["0", "1", "2"],
    "cpu_binding": [False, True],
    "async_scheduling": ["off", "on"],
}


def test_the_910c_space_keeps_every_ascend_value_and_thins_the_rest(se: ModuleType) -> None:
    space = se.bench_space(SPACES / "minimax_910c.yaml", 20)
    grid = grid_values(space)
    assert {name: grid[name] for name in ASCEND} == ASCEND
    assert grid["max_num_batched_tokens"] == [2048, 16384]
    assert grid["num_speculative_tokens"] == [0, 3]
    assert grid["max_num_seqs"] == [256] and grid["long_prefill_token_threshold"] == [0]
    assert space.target.settings()["profile"] == "910c" and space.workload.num_prompts == 20


def test_the_910c_points_obey_its_rules(se: ModuleType) -> None:
    """vLLM refuses suffix drafts with explicit async scheduling: no such point is measured."""
    points = sweep.all_points(se.bench_space(SPACES / "minimax_910c.yaml", 20))
    assert len(points) == 2 * 3 * 2 * 3 * 2 * 2 * 3  # async on only without drafts
    assert not [p for p in points if p["async_scheduling"] == "on" and p["num_speculative_tokens"]]
    assert len(sweep.distinct_launches(se.bench_space(SPACES / "minimax_910c.yaml", 20))) == 432


def test_the_h200_space_is_discretised_as_before(se: ModuleType) -> None:
    """Its cached table and published figures read this discretisation."""
    space = se.bench_space(sweep.SPACE, 40)
    grid = grid_values(space)
    assert grid["max_num_seqs"] == [16, 64, 256] and grid["gpu_memory_utilization"] == [0.92]
    assert space.parameters["max_num_seqs"].default == 256  # vLLM's 1024 is not on the grid
    assert se.default_prompts(sweep.SPACE) == 40
    assert sweep.cache_path(space) != sweep.cache_path(
        se.bench_space(SPACES / "minimax_910c.yaml", 40)
    )


def test_a_space_without_an_entry_gets_a_few_values_per_range_on_its_scale() -> None:
    assert discretise.spread({"type": "int", "low": 0, "high": 5, "default": 0}) == [0, 2, 5]
    log = {"type": "int", "low": 16, "high": 1024, "log": True, "default": 256}
    assert discretise.spread(log) == [16, 128, 256, 1024]
    stepped = {"type": "float", "low": 0.5, "high": 0.9, "step": 0.1, "default": 0.9}
    assert discretise.spread(stepped) == pytest.approx([0.5, 0.7, 0.9])
    parameters = {"kernel": {"type": "categorical", "choices": ["a", "b"]}, "n": log}
    assert discretise.discretisation("elsewhere", parameters) == {"n": [16, 128, 256, 1024]}


def test_a_default_off_the_grid_becomes_the_nearest_value() -> None:
    assert discretise.nearest([16, 64, 256], 1024) == 256
    assert discretise.nearest([0.85, 0.92], 0.9) == 0.92
    assert discretise.nearest(["FULL", "PIECEWISE"], "NONE") == "FULL"


def run_910c(se: ModuleType, capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    argv = ["--space", str(SPACES / "minimax_910c.yaml"), "--prompts", "2", "--workers", "1"]
    assert se.main([*argv, "--replicates", "1", "--budget", "3", *args]) == 0
    return capsys.readouterr().out.splitlines()


def test_a_tiny_910c_run_prints_a_row_per_tier_for_each_method(
    se: ModuleType,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """Three knobs held to two values each keep the sweep to seconds; the rest as shipped."""
    small = {name: values[:1] for name, values in ASCEND.items() if name != "hccl_aiv"}
    small |= {**discretise.DISCRETE["minimax_910c"], "num_speculative_tokens": [0]}
    monkeypatch.setitem(discretise.DISCRETE, "minimax_910c", small)
    monkeypatch.setattr(sweep, "CACHE_DIR", tmp_path)
    out = run_910c(se, capsys, "--methods", "tune,random", "--seeds", "2")
    assert out[0].startswith("space: minimax_910c discretised to 4 points")
    assert "simulated 910c engine" in out[0]
    head = out.index("median launches to come within 3% of each tier's best (>3: not reached by "
                     "half the seeds)")  # fmt: skip
    assert out[head + 1].split()[:3] == ["tier", "tune", "random"]
    rows = [line.split() for line in out[head + 2 : head + 7]]
    assert [r[0] for r in rows] == ["c1", "c4", "c10", "c16", "all"]
    assert all(len(r) >= 3 for r in rows)
    assert len(list(tmp_path.glob("sample_efficiency_*.json"))) == 1


@pytest.mark.slow
def test_a_910c_trace_shows_every_ascend_knob_of_the_full_discretisation(
    se: ModuleType,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    """The shipped discretisation, swept on one engine seed of 2 prompts (about a minute)."""
    monkeypatch.setattr(sweep, "CACHE_DIR", tmp_path)
    out = run_910c(se, capsys, "--methods", "tune", "--trace", "0")
    head = out[0].split()
    assert set(ASCEND) <= set(head) and head[-5:] == ["c1", "c4", "c10", "c16", "reached"]
    assert [line.split()[0] for line in out[1:]] == ["1", "2", "3"]


def test_a_method_that_cannot_search_stops_the_bench_before_its_sweep(
    se: ModuleType, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def measure_all(*_: object) -> list[str]:
        raise AssertionError("swept before the methods were checked")

    monkeypatch.setattr(se, "measure_all", measure_all)
    assert se.main(["--methods", "tune,annealing", "--seeds", "1"]) == 2
    assert "--methods annealing: unknown sampler 'annealing'" in capsys.readouterr().err


def test_a_search_may_stop_once_every_tier_is_reached(se: ModuleType) -> None:
    """Each figure is the first launch that reached: later launches change none of them."""
    truth = [{"x": 12.0, "y": 10.0}, {"x": 20.0, "y": 25.0}]
    x = ("x", {"values": [12.0, 20.0], "kind": None, "constraints": {}})
    y = ("y", {"values": [10.0, 25.0], "kind": None, "constraints": {}})
    assert not reached_all([x], (truth, 0.03, False))
    assert reached_all([x, y], (truth, 0.03, False))
    assert not reached_all([x, y], None)  # --trace spends the whole budget
