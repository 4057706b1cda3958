"""The per-tier surrogate sampler: finds each tier's best, learns failures, never repeats."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.samplers.additive import (
    RISK_LIMIT,
    STALE_AFTER,
    STALE_LIMIT,
    AdditiveSampler,
    covering,
    distance_to_best,
    knob_values,
    trust_region,
)
from tuner.samplers.observed import Observed

KERNELS = ["slow", "fast", "fastest"]
BUDGETS = [8192, 16384, 32768, 65536, 131072, 262144]


def tiers(trial: optuna.Trial) -> list[float]:
    """Three tiers: the kernel helps every tier alike; the best budget grows with the tier;
    the fastest kernel crashes above 65536 tokens and budget 8192 misses an SLO."""
    kernel = trial.suggest_categorical("kernel", KERNELS)
    budget = trial.suggest_categorical("budget", BUDGETS)
    seqs = trial.suggest_categorical("seqs", [16, 64, 256])
    crash = kernel == "fastest" and budget > 65536
    trial.set_constraint("engine", 1.0 if crash else 0.0)
    trial.set_constraint("slo", 1.0 if budget == 8192 else 0.0)
    speed = {"slow": 1.3, "fast": 1.0, "fastest": 0.8}[kernel]
    b = math.log2(budget)
    return [
        speed * (10 + (b - 15) ** 2) * (1 + 0.001 * seqs),
        speed * (30 + 2 * (b - 17) ** 2) * (1 + 0.002 * abs(seqs - 64)),
        speed * (60 + 3 * (b - 18) ** 2) * (1 + 0.0005 * (256 - seqs)),
    ]


def run(n: int, seed: int = 0) -> optuna.Study:
    sampler = AdditiveSampler(seed=seed)
    study = optuna.create_study(directions=["minimize"] * 3, sampler=sampler)
    study.enqueue_trial({"kernel": "slow", "budget": 8192, "seqs": 256})
    study.optimize(tiers, n_trials=n)
    return study


def feasible(t: optuna.trial.FrozenTrial) -> bool:
    return all(v <= 0 for v in t.constraints.values())


def every_config() -> list[tuple[str, int, int, list[float]]]:
    study = optuna.create_study(directions=["minimize"] * 3)
    for k in KERNELS:
        for b in BUDGETS:
            for s in (16, 64, 256):
                study.enqueue_trial({"kernel": k, "budget": b, "seqs": s})
    study.optimize(tiers, n_trials=len(KERNELS) * len(BUDGETS) * 3)
    return [
        (t.params["kernel"], t.params["budget"], t.params["seqs"], t.values)
        for t in study.trials
        if feasible(t)
    ]


def test_finds_each_tiers_own_best() -> None:
    configs = every_config()
    best = [min(configs, key=lambda c: c[3][i])[:3] for i in range(3)]
    assert len(set(best)) == 3  # each tier has its own best
    found = []
    for seed in range(3):
        study = run(30, seed)  # 30 of 54 configs, 15 of them failing
        tops = [
            min((t for t in study.trials if feasible(t)), key=lambda t: t.values[i])
            for i in range(3)
        ]
        found.append([(t.params["kernel"], t.params["budget"], t.params["seqs"]) for t in tops])
        best_values = [min(c[3][i] for c in configs) for i in range(3)]
        assert all(t.values[i] <= 1.2 * best_values[i] for i, t in enumerate(tops))
    # A crash at a big budget makes the fastest kernel look risky at the next budget down too,
    # so one seed in three may stop one step short on a tier; the others find every best.
    assert sum(f == best for f in found) >= 2


def test_never_launches_a_config_twice() -> None:
    study = run(40)
    keys = Counter(tuple(sorted(t.params.items())) for t in study.trials)
    assert max(keys.values()) == 1


def test_a_config_still_running_is_not_proposed_before_any_trial_finished() -> None:
    """A second worker asks while the first launch runs: it must not measure the same config."""
    for seed in range(10):
        study = optuna.create_study(sampler=AdditiveSampler(seed=seed))
        first = study.ask()
        first.suggest_categorical("x", [1, 2])
        second = study.ask()
        assert second.suggest_categorical("x", [1, 2]) != first.params["x"]


def test_learns_where_configs_fail() -> None:
    study = run(40)
    late = study.trials[20:]
    assert sum(not feasible(t) for t in late) <= 4  # 6 of 18 configs fail; it stops trying


def test_rules_are_never_proposed() -> None:
    sampler = AdditiveSampler(seed=1, allowed=lambda p: not (p["budget"] < 4 * p["seqs"]))
    study = optuna.create_study(directions=["minimize"], sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        budget = trial.suggest_categorical("budget", [16, 64, 256, 1024])
        seqs = trial.suggest_categorical("seqs", [4, 16, 64, 256])
        trial.set_constraint("rules", 0.0)
        return budget / seqs

    study.optimize(objective, n_trials=10)  # 10 configs obey the rule
    measured = [t.params for t in study.trials if t.state == TrialState.COMPLETE]
    assert all(p["budget"] >= 4 * p["seqs"] for p in measured[1:])  # the first is random


def test_an_exhausted_space_falls_back_to_random() -> None:
    sampler = AdditiveSampler(seed=0)
    study = optuna.create_study(sampler=sampler)
    study.optimize(lambda t: float(t.suggest_categorical("x", [1, 2, 3])), n_trials=6)
    assert sorted({t.params["x"] for t in study.trials}) == [1, 2, 3]
    assert len(study.trials) == 6


def test_wide_numeric_ranges_get_a_log_grid_and_stay_in_bounds() -> None:
    sampler = AdditiveSampler(seed=0)
    study = optuna.create_study(sampler=sampler)

    def objective(trial: optuna.Trial) -> float:
        budget = trial.suggest_int("budget", 8192, 262144, log=True)
        util = trial.suggest_float("util", 0.5, 0.95)
        spec = trial.suggest_int("spec", 0, 5)
        return (math.log2(budget) - 16) ** 2 + (util - 0.9) ** 2 + abs(spec - 3)

    study.optimize(objective, n_trials=25)
    assert all(8192 <= t.params["budget"] <= 262144 for t in study.trials)
    assert min(t.value for t in study.trials if t.value is not None) < 1.0
    grid = knob_values(optuna.distributions.IntDistribution(8192, 262144, log=True), [], "b")
    assert grid[0] == 8192 and grid[-1] == 262144 and len(grid) == 9
    assert knob_values(optuna.distributions.IntDistribution(0, 5), [], "s") == list(range(6))


def test_trust_region_keeps_candidates_near_the_best() -> None:
    pool = [{"a": a, "b": b, "c": c} for a in range(3) for b in range(3) for c in range(3)]
    dist = optuna.distributions.CategoricalDistribution([0, 1, 2])
    best = optuna.trial.create_trial(
        params={"a": 0, "b": 0, "c": 0}, distributions=dict.fromkeys("abc", dist), value=1
    )
    d = distance_to_best(pool, [best], {"a": 0, "b": 0, "c": 0})
    assert Counter(d.tolist()) == {0: 1, 1: 6, 2: 12, 3: 8}
    safe = np.ones(len(pool), dtype=bool)
    assert trust_region(d, safe).sum() == 1 + 6  # itself and one knob changed
    assert trust_region(None, safe).all()  # the optimistic move looks anywhere
    assert not distance_to_best(pool, [], {"a": 0, "b": 0, "c": 0}).any()


def test_trust_region_widens_past_candidates_expected_to_fail() -> None:
    d = np.array([1, 1, 2, 2, 3])
    assert trust_region(d, np.array([False, False, True, False, True])).tolist() == [
        True, True, True, True, False,
    ]  # fmt: skip
    # nothing safe anywhere: the nearest ring, where the least risky one is taken
    assert trust_region(d, np.zeros(5, dtype=bool)).tolist() == [True, True, False, False, False]


def only_one_kernel_works(trial: optuna.Trial) -> list[float]:
    """Every kernel but 'fast' misses the SLO, and so does budget 8192."""
    kernel = trial.suggest_categorical("kernel", KERNELS)
    budget = trial.suggest_categorical("budget", BUDGETS)
    seqs = trial.suggest_categorical("seqs", [16, 64, 256])
    trial.set_constraint("slo", 0.0 if kernel == "fast" and budget > 8192 else 1.0)
    return [math.log2(budget) + seqs / 256, 20 - math.log2(budget)]


def test_cold_start_finds_a_working_config_by_blaming_what_failed() -> None:
    """Before anything works, each launch avoids the values already blamed for failures."""
    for seed in range(5):
        study = optuna.create_study(directions=["minimize"] * 2, sampler=AdditiveSampler(seed))
        study.enqueue_trial({"kernel": "slow", "budget": 8192, "seqs": 256})
        study.optimize(only_one_kernel_works, n_trials=4)
        assert any(feasible(t) for t in study.trials), seed


def finished(value: float) -> optuna.trial.FrozenTrial:
    dist = optuna.distributions.CategoricalDistribution(KERNELS)
    return optuna.trial.create_trial(
        params={"kernel": "fast"}, distributions={"kernel": dist}, values=[value, value]
    )


def test_stale_counts_trials_since_the_tiers_best() -> None:
    directions = [optuna.study.StudyDirection.MINIMIZE] * 2
    trials = [finished(v) for v in (5.0, 2.0, 3.0, 4.0)]
    assert Observed(trials, directions, 0).stale() == 2  # best is the second of four
    assert Observed([], directions, 0).stale() == 0


def first_is_best(trial: optuna.Trial) -> list[float]:
    """Nothing beats the first launch (slow, 16384, 256) at any tier."""
    values = tiers(trial)
    config = (trial.params["kernel"], trial.params["budget"], trial.params["seqs"])
    return [1.0] * 3 if config == ("slow", 16384, 256) else [v + 1.0 for v in values]


def test_a_stuck_tier_gets_the_optimistic_move_under_the_looser_limit() -> None:
    seen: list[tuple[bool, float]] = []

    class Spy(AdditiveSampler):
        def _pick(self, enc, data, pool, dist, limit):  # type: ignore[no-untyped-def]
            seen.append((dist is None, limit))
            return super()._pick(enc, data, pool, dist, limit)

    study = optuna.create_study(directions=["minimize"] * 3, sampler=Spy(seed=0))
    study.enqueue_trial({"kernel": "slow", "budget": 16384, "seqs": 256})
    study.optimize(first_is_best, n_trials=STALE_AFTER + 6)
    # seen[k] proposed trial k + 1, when k trials had gone by since the best (the first)
    assert {s[1] for s in seen[:STALE_AFTER]} == {RISK_LIMIT}
    assert any(not greedy for greedy, _ in seen[:STALE_AFTER])  # local draws still happen
    assert seen[STALE_AFTER:] == [(True, STALE_LIMIT)] * 5


def launched(kernel: str, budget: int, values: list[float], **attrs: object) -> FrozenTrial:
    space = {"kernel": CategoricalDistribution(KERNELS), "budget": CategoricalDistribution(BUDGETS)}
    slo = {"constraints:slo": 1.0} if attrs.pop("missed_slo", False) else {}
    return optuna.trial.create_trial(
        params={"kernel": kernel, "budget": budget},
        distributions=space,
        values=values,
        system_attrs=slo,
        user_attrs=dict(attrs),
    )


def test_covering_keeps_the_candidates_that_launch_a_choice_never_launched() -> None:
    space = {"kernel": CategoricalDistribution(KERNELS), "budget": CategoricalDistribution(BUDGETS)}
    pool = [{"kernel": k, "budget": b} for k in KERNELS for b in BUDGETS]
    kept = covering(pool, [launched("slow", 8192, [1.0])], space)
    assert {p["kernel"] for p in kept} == {"fast", "fastest"}
    # budgets are ordered (one launch teaches its neighbours through the rank), so not covered
    assert len(kept) == 2 * len(BUDGETS)
    every_kernel = [launched(k, 8192, [1.0]) for k in KERNELS]
    assert covering(pool, every_kernel, space) == pool


def test_every_choice_of_a_kernel_is_launched_early() -> None:
    """A kernel never launched is judged by the prior alone, which ranks it below any value
    measured good: the first launches give each choice its one measurement."""
    for seed in range(5):
        study = run(3, seed)
        assert {t.params["kernel"] for t in study.trials} == set(KERNELS), seed


def test_a_trial_that_missed_one_tiers_slo_still_teaches_the_other_tiers() -> None:
    directions = [optuna.study.StudyDirection.MINIMIZE] * 2
    ok_at_c1 = {"tier_ok": {"1": True, "20": False}}
    trials = [
        launched("fast", 8192, [2.0, 50.0], **ok_at_c1, missed_slo=True),
        launched("slow", 8192, [3.0, 40.0], tier_ok={"1": True, "20": True}),
    ]
    c1, c20 = (Observed(trials, directions, i, tiers=[1, 20]) for i in (0, 1))
    assert c1.ok.tolist() == [True, True] and c20.ok.tolist() == [False, True]
    assert c1.best(1)[0].params["kernel"] == "fast"  # the c20 SLO miss does not hide it at c1
    assert c20.best(2) == [trials[1]]
    main = np.eye(2)
    blocks, y = c1.design(main, main)
    assert len(y) == 3 and all(
        len(b) == 3 for b in blocks
    )  # rows: both trials at c1, the second at c20 only
    # without per-tier feasibility the whole trial counts: an SLO miss anywhere hides it
    assert Observed(trials, directions, 0).ok.tolist() == [False, True]


def test_a_launch_on_another_draw_of_the_workload_is_not_learned_from(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Such a launch measured other traffic than every other trial: neither the additive
    sampler nor a tiered one fits it."""
    import tuner.samplers.additive as additive
    from tests.tuner.conftest import SMALL_SPACE
    from tuner.samplers import make_sampler
    from tuner.samplers.tiered import TierTurnSampler
    from tuner.space.schema import Space

    sp = Space.model_validate(SMALL_SPACE)
    dists = {
        "max_num_batched_tokens": CategoricalDistribution([2048, 8192, 32768]),
        "max_num_seqs": CategoricalDistribution([4, 16, 64]),
        "long_prefill_token_threshold": CategoricalDistribution([0, 1024, 4096]),
    }
    rows = [(2048, 4, 0), (8192, 16, 0), (32768, 64, 1024), (8192, 64, 4096)]
    made = [
        optuna.trial.create_trial(
            params=dict(zip(dists, r, strict=True)),
            distributions=dists,
            values=[10.0 + i, 20.0 + i],
            user_attrs={"feasible": True},
        )
        for i, r in enumerate(rows)
    ]
    other = optuna.trial.create_trial(
        params=made[0].params,
        distributions=dists,
        values=[99.0, 99.0],
        user_attrs={"feasible": True, "confirm_of": 0, "draw_seed": 4, "draw_for": 1},
    )
    seen: list[list[FrozenTrial]] = []

    class Spy(Observed):
        def __init__(self, trials, *a, **kw) -> None:  # type: ignore[no-untyped-def]
            seen.append(list(trials))
            super().__init__(trials, *a, **kw)

    monkeypatch.setattr(additive, "Observed", Spy)
    study = optuna.create_study(directions=["minimize"] * 2, sampler=make_sampler("additive", sp))
    study.add_trials([*made, other])
    study.ask(dists)
    assert seen and all(len(s) == len(made) for s in seen)
    assert all(t.user_attrs.get("draw_seed") is None for s in seen for t in s)
    tiered = TierTurnSampler(optuna.samplers.RandomSampler(seed=0))
    view, _ = tiered._view(study, study.ask())
    assert len(view.trials) == len(made) + 1  # the made trials and the view's own stand-in
