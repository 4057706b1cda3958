"""The noisy-OR failure model: blame that explains away, successes that clear, pair failures."""

from __future__ import annotations

import numpy as np
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

from tuner.samplers.failure_model import FailureModel, Ingredients

SPACE = {
    "attn": CategoricalDistribution(["flash", "triton", "flashinfer"]),
    "moe": CategoricalDistribution(["auto", "cutlass", "deep_gemm"]),
    "budget": CategoricalDistribution([8192, 32768, 262144]),
}
ING = Ingredients(SPACE)


def cfg(attn: str, moe: str, budget: int) -> dict:
    return {"attn": attn, "moe": moe, "budget": budget}


def fit(history: list[tuple[dict, bool]]) -> FailureModel:
    points = [p for p, _ in history]
    failed = np.array([f for _, f in history])
    return FailureModel(ING, ING.ids(points), failed)


def risk(model: FailureModel, point: dict) -> float:
    return float(model.risk(ING.ids([point]))[0])


OK = cfg("flashinfer", "auto", 32768)
HISTORY = [
    (OK, False),
    (cfg("flashinfer", "auto", 262144), False),
    (cfg("flash", "auto", 32768), True),  # flash fails next to cleared values: blamed
    (cfg("flash", "auto", 262144), True),
]


def test_a_value_failing_next_to_cleared_values_is_blamed() -> None:
    model = fit(HISTORY)
    assert risk(model, cfg("flash", "auto", 32768)) > 0.8
    assert risk(model, OK) < 0.1


def test_a_new_value_tried_next_to_a_bad_one_is_hardly_blamed() -> None:
    """cutlass failed only together with flash, which already explains the failure."""
    model = fit([*HISTORY, (cfg("flash", "cutlass", 32768), True)])
    assert risk(model, cfg("flashinfer", "cutlass", 32768)) < 0.3
    assert risk(model, cfg("flash", "cutlass", 32768)) > 0.8


def test_a_pair_that_fails_is_blamed_when_each_value_works_elsewhere() -> None:
    """deep_gemm works at 32768, 262144 works with auto: deep_gemm x 262144 takes the blame."""
    history = [
        *HISTORY,
        (cfg("flashinfer", "deep_gemm", 32768), False),
        (cfg("flashinfer", "deep_gemm", 262144), True),
        (cfg("triton", "deep_gemm", 262144), True),
    ]
    model = fit(history)
    assert risk(model, cfg("flashinfer", "deep_gemm", 262144)) > 0.6
    assert risk(model, cfg("flashinfer", "deep_gemm", 32768)) < 0.1
    assert risk(model, cfg("flashinfer", "auto", 262144)) < 0.1


def test_unseen_configs_sit_at_the_prior_and_nothing_failed_means_nothing_blamed() -> None:
    model = fit([(OK, False)])
    unseen = risk(model, cfg("triton", "cutlass", 8192))
    assert 0.1 < unseen < 0.6
    assert risk(model, OK) < 0.05


def test_draws_spread_around_thin_evidence_and_not_around_clear_evidence() -> None:
    """One confounded failure leaves doubt (draws vary); repeated clean ones do not."""
    model = fit([*HISTORY, (cfg("triton", "cutlass", 8192), True)])
    rng = np.random.default_rng(0)
    thin = ING.ids([cfg("flashinfer", "cutlass", 32768)])
    clear = ING.ids([cfg("flash", "auto", 32768)])
    draws = [
        (model.risk(thin, p)[0], model.risk(clear, p)[0])
        for p in (model.draw(rng) for _ in range(200))
    ]
    thin_risk, clear_risk = np.array(draws).T
    assert thin_risk.min() < 0.2 < 0.5 < thin_risk.max()
    assert np.mean(clear_risk > 0.8) > 0.9


def test_numeric_knobs_count_by_range_with_the_low_end_apart() -> None:
    ing = Ingredients({"spec": IntDistribution(0, 6), "util": FloatDistribution(0.5, 0.9)})
    ids = ing.ids([{"spec": s, "util": 0.5} for s in (0, 1, 3, 6)])
    assert len(set(ids[:, 0])) == 4  # 0 alone, then three equal parts of 1..6
    assert len(set(ids[:, 1])) == 1
    assert ids.shape == (4, 3)  # two knobs and their one pair
