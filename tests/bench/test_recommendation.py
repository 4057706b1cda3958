"""The all-tier re-measurement's plan and table (the launches themselves run in the e2e suite)."""

from __future__ import annotations

from bench.recommendation import Config, configs_to_measure, report, rotations


def test_each_distinct_config_once_labelled_by_its_tiers_then_the_defaults() -> None:
    recs = {1: {"a": 1}, 4: {"a": 2}, 16: {"a": 2}}
    configs = configs_to_measure(recs, {"a": 0})
    assert [(c.label, c.params) for c in configs] == [
        ("c1", {"a": 1}),
        ("c4,c16", {"a": 2}),
        ("default", {"a": 0}),
    ]


def test_rounds_rotate_so_no_config_always_runs_first() -> None:
    configs = [Config("x", {}), Config("y", {}), Config("d", {})]
    order = [c.label for c in rotations(3, configs)]
    assert order == ["x", "y", "d", "y", "d", "x", "d", "x", "y"]


def test_report_compares_each_tier_with_its_own_recommendation() -> None:
    rec = Config("c1,c4", {"a": 1}, {1: {"p99_tpot_ms": [10.0, 11.0]}, 4: {"p99_tpot_ms": [30.0]}})
    base = Config(
        "default", {"a": 0}, {1: {"p99_tpot_ms": [20.0, 21.0]}, 4: {"p99_tpot_ms": [29.0]}}
    )
    text = report([rec, base], [1, 4, 16], "p99_tpot")
    tier1, tier4 = text.split("tier 1:")[1].split("tier 4:")
    assert "recommended better beyond spread" in tier1 and "1.95x" in tier1
    assert "default better beyond spread" in tier4.split("tier 16")[0]
    assert "tier 16: no recommendation" in text
