"""Per-tier data: recommendation, baseline, Pareto front, failures, counts, importances."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from objectives.objective import front_axes, get_objective
from tests.tuner.export.conftest import CONFIGS, TIERS, figures
from tuner.errors import SecretLeakError
from tuner.export.build import Export, build_export
from tuner.export.importance import MIN_TRIALS, tier_importance
from tuner.export.secrets import Redactor
from tuner.score.eligible import Policy
from tuner.score.tiers import Point, pareto_front, plot_axes
from tuner.storage.study_data import load_study_data


def _export(results: Path) -> Export:
    return build_export(load_study_data("hand", None, results))


def test_recommendation_is_the_best_feasible_config_per_tier(hand_results: Path) -> None:
    export = _export(hand_results)
    for t in export.tiers:
        best = min(CONFIGS, key=lambda cfg: figures(*cfg, t.concurrency)["p99_tpot_ms"])
        rec = t.tier.recommended
        assert rec is not None and rec.trial == CONFIGS.index(best)
        assert rec.metrics["p99_tpot_ms"] == figures(*best, t.concurrency)["p99_tpot_ms"]
        assert rec.confirmations == 1 and rec.spread == 0.0
        base = figures(*CONFIGS[0], t.concurrency)["p99_tpot_ms"]
        assert t.tier.gain == (base - rec.metrics["p99_tpot_ms"]) / base
        assert t.tier.baseline is not None and t.tier.baseline.trial == 0
        assert t.launch is not None and t.launch.verified


def test_each_point_carries_the_counts_its_percentiles_rest_on(hand_results: Path) -> None:
    for t in _export(hand_results).tiers:
        rec = t.tier.recommended
        assert rec is not None and rec.metrics["tpot_samples"] == 8
        figures = rec.figures()  # what recipe.yaml's points show beside each figure
        assert figures["tpot_samples"] == 8 and figures["ttft_samples"] == 8


def test_front_is_exactly_the_non_dominated_feasible_set(hand_results: Path) -> None:
    export = _export(hand_results)
    for t in export.tiers:
        c = t.concurrency
        feasible = {i: figures(*cfg, c) for i, cfg in enumerate(CONFIGS)}
        expected = {
            i
            for i, m in feasible.items()
            if not any(
                o["output_throughput"] >= m["output_throughput"]
                and o["p99_tpot_ms"] <= m["p99_tpot_ms"]
                and o != m
                for o in feasible.values()
            )
        }
        assert set(t.tier.front) == expected
        xs = [p.metrics["output_throughput"] for p in t.tier.front_points()]
        assert xs == sorted(xs)
        assert t.tier.recommended is not None and t.tier.recommended.trial in t.tier.front


def test_copies_and_infeasible_trials_stay_off_the_front(hand_results: Path) -> None:
    export = _export(hand_results)
    n = len(CONFIGS)
    for t in export.tiers:
        numbers = [p.trial for p in t.tier.points]
        assert n + 4 not in numbers  # duplicate_of trial 1: the same launch, not a new point
        slo = t.tier.point(n + 2)
        assert slo is not None and not slo.feasible and slo.trial not in t.tier.front
        assert n not in numbers and n + 1 not in numbers  # rules / oom: nothing measured


def test_failures_name_kind_and_reason(hand_results: Path) -> None:
    export = _export(hand_results)
    kinds = {f.trial: f.kind for f in export.failures}
    n = len(CONFIGS)
    assert kinds == {n: "rules", n + 1: "oom", n + 2: "slo", n + 3: "infra"}
    assert "out of memory" in next(f.reason for f in export.failures if f.kind == "oom")
    assert export.failure_counts() == {"rules": 1, "oom": 1, "slo": 1, "infra": 1}
    counts = export.data.counts()
    assert counts["total"] == n + 5 and counts["failed"] == 1 and counts["infeasible"] == 3


def test_importance_per_tier_ranks_the_knob_that_drives_the_objective(hand_results: Path) -> None:
    export = _export(hand_results)
    for t in export.tiers:
        imp = t.importance
        assert imp.trials == len(CONFIGS) and imp.note == ""
        # Seat caps of 4-64 never hold one or four users: max_num_seqs cannot act at these
        # tiers and is not ranked, whatever noise its values met.
        assert set(imp.values) == {"max_num_batched_tokens", "long_prefill_token_threshold"}
        assert imp.idle == ["max_num_seqs"]
        # p99 TPOT grows with sqrt(chunk size) in the model: the chunk size must lead.
        assert max(imp.values, key=imp.values.__getitem__) == "max_num_batched_tokens"
    assert [t.concurrency for t in export.tiers] == list(TIERS)


def test_importance_needs_enough_trials(hand_results: Path) -> None:
    export = _export(hand_results)
    t = export.tiers[0]

    t.tier.points = t.tier.points[: MIN_TRIALS - 1]
    imp = tier_importance(t.tier, export.data.trials, export.data.objective)
    assert imp.values == {} and "needs at least" in imp.note


def _p(trial: int, x: float, y: float, feasible: bool = True, **more: float) -> Point:
    metrics = {"output_throughput": x, "p99_tpot_ms": y, **more}
    return Point(trial, {}, metrics, feasible, eligible=feasible)


def test_pareto_front_ties_and_infeasible_points() -> None:
    points = [_p(0, 100, 10), _p(1, 100, 10), _p(2, 200, 20), _p(3, 150, 30), _p(4, 500, 1, False)]
    axes = front_axes(get_objective("p99_tpot"))
    assert pareto_front(points, axes) == [0, 1, 2]  # equal points dominate neither; 3 is dominated


def test_the_front_trades_the_objective_against_throughput_among_eligible_points() -> None:
    """The front's other axis is the study's objective, and a feasible point that may not be
    the pick (it held users back, or fell below the throughput floor) is not on it."""
    points = [
        _p(0, 100, 10, median_tpot_ms=50),
        _p(1, 200, 20, median_tpot_ms=40),
        _p(2, 300, 5, median_tpot_ms=30),
    ]
    points[2].eligible = False
    median, p99 = get_objective("median_tpot"), get_objective("p99_tpot")
    assert pareto_front(points, front_axes(median)) == [1]  # 1 beats 0 on both axes
    assert pareto_front(points, front_axes(p99)) == [0, 1]


def test_a_named_pair_makes_the_front_trade_those_two_metrics() -> None:
    """--objective p99_tpot,p99_ttft: the front is P99 TPOT against P99 TTFT, both minimised,
    whatever the throughput; the plot draws TTFT across and TPOT down."""
    points = [
        _p(0, 100, 10, p99_ttft_ms=900),
        _p(1, 300, 20, p99_ttft_ms=500),
        _p(2, 50, 30, p99_ttft_ms=400),
        _p(3, 400, 25, p99_ttft_ms=950),  # the most throughput, dominated on both named axes
    ]
    axes = (get_objective("p99_tpot"), get_objective("p99_ttft"))
    assert pareto_front(points, axes) == [2, 1, 0]  # rising TTFT, the plot's left to right
    x, y = plot_axes(axes)
    assert (x.key, y.key) == ("p99_ttft_ms", "p99_tpot_ms")
    assert pareto_front(points, front_axes(axes[0])) == [0, 1, 3]


def test_scrub_removes_known_values_and_token_shapes() -> None:
    r = Redactor()
    r.add("s3cr3t-value")
    text = (
        "key s3cr3t-value, hf_abcdefghijklmnopqrstuvwx, Authorization: Bearer abcdefghijklmnop123"
    )
    assert r.scrub(text) == "key <redacted>, <redacted>, Authorization: Bearer <redacted>"
    assert r.scrub("--max-num-batched-tokens 8192") == "--max-num-batched-tokens 8192"
    with pytest.raises(SecretLeakError):
        r.check(Path("x"), "value s3cr3t-value")


def test_confirmations_pool_into_their_trial(hand_results: Path) -> None:
    url = f"sqlite:///{hand_results / 'hand' / 'study.db'}"
    study = optuna.load_study(study_name="hand", storage=url)
    before = _export(hand_results).tiers[1].tier
    rec = before.recommended
    assert rec is not None
    original = study.trials[rec.trial]
    tiers = {
        k: {**m, "p99_tpot_ms": m["p99_tpot_ms"] * 1.1}
        for k, m in original.user_attrs["tiers"].items()
    }
    attrs = {**original.user_attrs, "tiers": tiers, "confirm_of": rec.trial}
    study.add_trial(
        optuna.trial.create_trial(
            params=original.params, distributions=original.distributions,
            values=original.values, user_attrs=attrs,
        )
    )  # fmt: skip
    tier = _export(hand_results).tiers[1].tier
    point = tier.point(rec.trial)
    assert point is not None and point.confirmations == 2
    assert point.metrics["p99_tpot_ms"] == pytest.approx(rec.metrics["p99_tpot_ms"] * 1.05)
    assert point.spread == pytest.approx(0.1 / 1.05)
    assert len(tier.points) == len(before.points)  # a confirmation is not a point of its own


def test_export_picks_what_tune_show_picks_after_confirmations(hand_results: Path) -> None:
    from objectives.objective import get_objective
    from tuner.score.recommend import recommend

    url = f"sqlite:///{hand_results / 'hand' / 'study.db'}"
    study = optuna.load_study(study_name="hand", storage=url)
    first = _export(hand_results).tiers[0].tier.recommended
    assert first is not None
    original = study.trials[first.trial]
    # A re-measurement far worse than the first launch: pooled, this config no longer leads.
    tiers = {
        k: {**m, "p99_tpot_ms": m["p99_tpot_ms"] * 3.0}
        for k, m in original.user_attrs["tiers"].items()
    }
    study.add_trial(
        optuna.trial.create_trial(
            params=original.params, distributions=original.distributions,
            values=original.values,
            user_attrs={**original.user_attrs, "tiers": tiers, "confirm_of": first.trial},
        )
    )  # fmt: skip
    objective = get_objective(study.user_attrs["objective"])
    export = _export(hand_results)
    shown = recommend(study.get_trials(), objective, TIERS, Policy.of(export.data.space))
    for t, rec in zip(export.tiers, shown, strict=True):
        assert t.tier.recommended is not None and t.tier.recommended.trial == rec.trial
    assert shown[0].trial != first.trial
