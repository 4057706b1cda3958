"""The linear surrogate: features of a flat space, fits of additive shapes, uncertainty."""

from __future__ import annotations

import numpy as np
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import create_trial

from tuner.samplers.additive import covering
from tuner.samplers.surrogate import BayesLinear, Encoder, best_target, enumerate_points

SPACE = {
    "backend": CategoricalDistribution(["a", "b", "c"]),
    "budget": CategoricalDistribution([8192, 32768, 131072]),
    "spec": IntDistribution(0, 5),
    "util": FloatDistribution(0.5, 0.95),
}
EFFECT = {"a": 0.0, "b": -0.4, "c": 0.3}


def truth(p: dict) -> float:
    """Additive in the knobs, plus one pairwise term (backend b likes big budgets)."""
    pair = -0.3 if p["backend"] == "b" and p["budget"] == 131072 else 0.0
    return EFFECT[p["backend"]] + 0.1 * p["spec"] - 0.5 * p["util"] + pair


def points(n: int, seed: int) -> list[dict]:
    rng = np.random.default_rng(seed)
    return [
        {
            "backend": str(rng.choice(["a", "b", "c"])),
            "budget": int(rng.choice([8192, 32768, 131072])),
            "spec": int(rng.integers(0, 6)),
            "util": float(rng.uniform(0.5, 0.95)),
        }
        for _ in range(n)
    ]


def test_features_one_hot_rank_and_numeric_position() -> None:
    enc = Encoder(SPACE)
    # backend: 3 one-hot; budget: 3 one-hot + rank; spec, util: position, square, is-low
    assert enc.widths == [3, 4, 3, 3]
    row = enc.main([{"backend": "b", "budget": 32768, "spec": 0, "util": 0.95}])[0]
    assert row.tolist() == [0, 1, 0, 0, 1, 0, 0.5, 0, 0, 1, 1, 1, 0]
    main, pairs = enc.features(points(4, 0))
    # products only across knobs: 13 features minus same-knob pairs
    same = sum(w * (w - 1) // 2 for w in enc.widths)
    assert pairs.shape == (4, 13 * 12 // 2 - same)
    assert main.shape == (4, 13)


def test_fit_recovers_an_additive_shape_with_a_pairwise_term() -> None:
    enc = Encoder(SPACE)
    train, test = points(40, 1), points(200, 2)
    y = np.array([truth(p) for p in train]) + np.random.default_rng(3).normal(0, 0.02, 40)
    model = BayesLinear(list(enc.features(train)), y)
    predicted = model.predict(list(enc.features(test)), model.mean)
    actual = np.array([truth(p) for p in test])
    assert np.abs(predicted - actual).mean() < 0.08
    assert np.corrcoef(predicted, actual)[0, 1] > 0.95


def test_values_never_measured_are_the_uncertain_ones() -> None:
    enc = Encoder(SPACE)
    seen = [p for p in points(30, 4) if p["backend"] != "c"]
    model = BayesLinear(list(enc.features(seen)), np.array([truth(p) for p in seen]))
    grid = enumerate_points(
        {"backend": ["a", "b", "c"], "budget": [32768], "spec": [2], "util": [0.7]}
    )
    sd = model.sd(list(enc.features(grid)))
    assert sd[2] > 2 * max(sd[0], sd[1])


def test_draws_spread_around_the_mean() -> None:
    enc = Encoder(SPACE)
    train = points(20, 5)
    model = BayesLinear(list(enc.features(train)), np.array([truth(p) for p in train]))
    rng = np.random.default_rng(0)
    draws = np.array([model.draw(rng) for _ in range(400)])
    assert np.allclose(draws.mean(0), model.mean, atol=0.1)
    assert draws.std(0).max() > 0


def test_a_knob_whose_numbers_are_not_in_its_order_has_no_rank() -> None:
    """Slot counts [-1, 1, 2, 4, 8] where -1 means auto (4): ranked, -1 would sit below 1 and
    one bad launch at 1 would condemn 8; unordered, each choice is only its own one-hot."""
    space = {"parallel": CategoricalDistribution([-1, 1, 2, 4, 8])}
    ranked, unranked = Encoder(space), Encoder(space, frozenset({"parallel"}))
    assert ranked.main([{"parallel": 8}]).shape == (1, 6)
    assert unranked.main([{"parallel": 8}]).tolist() == [[0, 0, 0, 0, 1]]


def test_every_choice_of_an_unordered_numeric_knob_is_launched_early() -> None:
    space = {"parallel": CategoricalDistribution([-1, 1, 8])}
    done = [create_trial(params={"parallel": -1}, distributions=space, values=[1.0])]
    pool = [{"parallel": v} for v in (1, 8)]
    assert covering(pool, done, space) == pool  # ordered: nothing forces a choice
    assert covering(pool, done, space, frozenset({"parallel"})) == pool
    done.append(create_trial(params={"parallel": 1}, distributions=space, values=[2.0]))
    assert covering(pool, done, space, frozenset({"parallel"})) == [{"parallel": 8}]


def test_the_target_the_features_explain_best_is_chosen_whatever_its_spread() -> None:
    """An offset that predicts the values (an earlier engine's fit) leaves a residual the
    features explain; one that does not leaves a wider, less explained residual."""
    enc = Encoder(SPACE)
    train = points(12, 4)
    blocks = list(enc.features(train))
    rng = np.random.default_rng(5)
    y = np.array([truth(p) for p in train]) + rng.normal(0, 0.02, 12)
    helpful = np.array([truth(p) for p in train]) * 0.9
    unrelated = rng.normal(0, 0.5, 12)
    assert best_target(blocks, [y, y - 0.5 * helpful, y - helpful])[0] == 2
    assert best_target(blocks, [y, y - 0.5 * unrelated, y - unrelated])[0] == 0
