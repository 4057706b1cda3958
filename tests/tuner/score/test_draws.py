"""A pick must stay within the space's limits on another draw of the workload: a launch there
counts towards feasibility but not towards the pooled figures, and once such launches show how
far a draw moves a limited figure, a config whose figure a new draw would plausibly push past
its limit is not picked."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
from optuna.trial import FrozenTrial

from objectives.metrics import SLO
from tests.tuner.score.test_revert import DEFAULTS, P99, trial
from tuner.run.holdout import draw_seed, holdouts
from tuner.score.draws import PER_TIER, draw_cv, near_limit
from tuner.score.eligible import Eligible, Policy
from tuner.score.pooling import configs
from tuner.score.recommend import recommend
from tuner.space import load_space
from tuner.space.schema import Space

GAP = SLO(metric="max_itl_ms", max=2000)
POLICY = Policy(defaults=DEFAULTS, slo_tiers=frozenset({1}), limits={1: (GAP,)})
BASE = {"chunk": 8192, "noop": "1", "seats": 1024}
BIG = {"chunk": 131072, "noop": "1", "seats": 1024}  # best TPOT, longest stalls
MID = {"chunk": 32768, "noop": "1", "seats": 1024}


def launch(params: dict[str, Any], tpot: float, gap: float, **attrs: Any) -> FrozenTrial:
    ok = gap <= 2000
    tiers = {"1": {"p99_tpot_ms": tpot, "max_itl_ms": gap}}
    return trial(params, tpot, tiers=tiers, tier_ok={"1": ok}, feasible=ok, **attrs)


def numbered(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    for n, t in enumerate(trials):
        t.number = n
    return trials


def explored() -> list[FrozenTrial]:
    """BIG leads on TPOT at 1.8 s longest gap, MID trails at 1.1 s; the baseline is measured
    twice, so the tier's noise is known."""
    return numbered(
        [
            launch(BASE, 30.0, 900, baseline=True),
            launch(BASE, 30.3, 910, confirm_of=0),
            launch(BIG, 20.0, 1800),
            launch(MID, 24.0, 1100),
        ]
    )


def drawn(root: int, params: dict[str, Any], tpot: float, gap: float) -> FrozenTrial:
    return launch(params, tpot, gap, confirm_of=root, draw_seed=43, draw_for=1)


def test_a_launch_on_another_draw_is_not_pooled_but_must_hold() -> None:
    trials = numbered([*explored(), drawn(2, BIG, 26.0, 1990)])
    big = configs(trials)[2]
    assert [t.number for t in big.drawn] == [4]
    assert big.values(P99, 1) == [20.0]  # the other draw's 26 ms is not the config's figure
    assert big.mean_metrics(1, ["max_itl_ms"]) == {"max_itl_ms": 1800}
    assert big.feasible_at(1)
    broke = numbered([*explored(), drawn(2, BIG, 26.0, 2300)])
    assert not configs(broke)[2].feasible_at(1)  # a limit broken on another draw: not a pick
    (rec,) = recommend(broke, P99, [1], POLICY)
    assert rec.trial == 3


def test_without_a_launch_on_another_draw_no_margin_is_taken() -> None:
    trials = explored()
    assert draw_cv(list(configs(trials).values()), "max_itl_ms", 1) is None
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.trial == 2  # 1.8 s is within 2 s, and nothing says how far a draw moves it


def test_a_config_a_new_draw_would_push_past_a_limit_is_not_picked() -> None:
    """BIG held on another draw (1.99 s), but that launch shows a draw moves the longest gap by
    about 11%: a third draw would plausibly pass 2 s, so the pick is MID, which keeps the
    margin (1.1 s)."""
    trials = numbered([*explored(), drawn(2, BIG, 21.0, 1990)])
    groups = list(configs(trials).values())
    cv = draw_cv(groups, "max_itl_ms", 1)
    assert cv is not None and abs(cv - 190 / 1800) < 1e-9
    assert near_limit(configs(trials)[2], 1, (GAP,), groups) is not None
    assert near_limit(configs(trials)[3], 1, (GAP,), groups) is None
    pool = Eligible.at(groups, 1, POLICY)
    assert [c.root.number for c in pool.near_limit] == [2]
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.trial == 3 and "within a draw's spread of a limit" in rec.choice
    (free,) = recommend(trials, P99, [1], Policy(defaults=DEFAULTS))  # no limit, no margin
    assert free.trial == 2


def test_a_draw_that_breaks_a_config_is_no_spread() -> None:
    """A config infeasible on its own draw tells nothing of how far a draw moves a figure."""
    trials = numbered([*explored(), launch(BIG, 19.0, 2500), drawn(4, BIG, 19.0, 9000)])
    assert draw_cv(list(configs(trials).values()), "max_itl_ms", 1) is None


def test_a_preemption_storm_on_another_draw_rules_the_config_out_and_is_no_spread() -> None:
    """BIG held at 1.8 s on its own draw; on another its engine preempted and a user met a 20 s
    gap. It is no pick, and the other configs are not held to a spread 10 times their figure:
    MID's pair (1.1 s, then 1.15 s) is the spread. A pair that crossed the limit without
    preempting is the spread the margin is for, and counts."""
    storm = drawn(2, BIG, 21.0, 20000)
    storm.user_attrs["tiers"]["1"]["server"] = {"num_preemptions": 17}
    trials = numbered([*explored(), storm, drawn(3, MID, 24.0, 1150)])
    groups = list(configs(trials).values())
    cv = draw_cv(groups, "max_itl_ms", 1)
    assert cv is not None and abs(cv - 50 / 1100) < 1e-9
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.trial == 3 and not configs(trials)[2].feasible_at(1)
    crossed = numbered([*explored(), drawn(2, BIG, 21.0, 2100)])
    cv = draw_cv(list(configs(crossed).values()), "max_itl_ms", 1)
    assert cv is not None and abs(cv - 300 / 1800) < 1e-9


def test_a_tier_a_race_stopped_early_is_no_spread() -> None:
    """A launch stopped after 41 of 60 requests (out of contention) holds a longest gap over
    those 41 only: beside a full launch on another draw, the difference is the 19 requests it
    never sent, not the draw (0.87 s against 21 s, seen at c40 on the H200 space)."""
    raced = launch(BIG, 19.0, 865)
    raced.user_attrs["tiers"]["1"]["decided_after"] = 41
    trials = numbered([*explored(), raced, drawn(4, BIG, 19.0, 1900)])
    assert draw_cv(list(configs(trials).values()), "max_itl_ms", 1) is None
    full = numbered([*explored(), launch(BIG, 19.0, 865), drawn(4, BIG, 19.0, 1900)])
    assert draw_cv(list(configs(full).values()), "max_itl_ms", 1) is not None


def space(tmp_path: Path, slos: list[dict[str, Any]]) -> Space:
    from tests.tuner.conftest import SMALL_SPACE, write_yaml

    return load_space(write_yaml(tmp_path / "s.yaml", {**SMALL_SPACE, "slos": slos}))


def h200_like() -> list[FrozenTrial]:
    """Two tiers with the small space's knobs: trial 1 leads at c1, trial 2 at c4."""
    a = {"max_num_batched_tokens": 2048, "max_num_seqs": 64, "long_prefill_token_threshold": 0}
    b = {**a, "max_num_batched_tokens": 32768}
    base = {**a, "max_num_batched_tokens": 8192}
    dist = optuna.distributions.CategoricalDistribution

    def t(params: dict[str, Any], c1: float, c4: float, **attrs: Any) -> FrozenTrial:
        tiers = {
            "1": {"p99_tpot_ms": c1, "max_itl_ms": 50},
            "4": {"p99_tpot_ms": c4, "max_itl_ms": 50},
        }
        return optuna.trial.create_trial(
            params=params,
            distributions={
                "max_num_batched_tokens": dist([2048, 8192, 32768]),
                "max_num_seqs": dist([4, 16, 64]),
                "long_prefill_token_threshold": dist([0, 1024, 4096]),
            },
            values=[c1, c4],
            user_attrs={
                "feasible": True,
                "tiers": tiers,
                "tier_ok": {"1": True, "4": True},
                **attrs,
            },
        )

    return numbered([t(base, 30, 60, baseline=True), t(a, 20, 70), t(b, 25, 40)])


def test_each_pick_is_launched_once_on_another_draw(tmp_path: Path) -> None:
    sp = space(tmp_path, [{"metric": "max_itl_ms", "max": 2000}])
    policy = Policy.of(sp)
    trials = h200_like()
    found = holdouts(trials, P99, sp, policy)
    picks = {r.concurrency: r.trial for r in recommend(trials, P99, [1, 4], policy)}
    assert found == [(picks[1], 1), (picks[4], 4)] and picks[1] != picks[4]
    assert draw_seed(sp) == sp.workload.seed + 1
    asked = numbered([*trials, *(drawn_small(trials[r], r, tier) for r, tier in found)])
    assert holdouts(asked, P99, sp, policy) == []  # each pick checked once
    only_c4 = space(tmp_path, [{"metric": "max_itl_ms", "max": 2000, "tiers": [4]}])
    assert holdouts(trials, P99, only_c4, Policy.of(only_c4)) == [(picks[4], 4)]
    unlimited = space(tmp_path, [])
    assert holdouts(trials, P99, unlimited, Policy.of(unlimited)) == []


def test_a_tier_gets_at_most_per_tier_launches_on_another_draw(tmp_path: Path) -> None:
    sp = space(tmp_path, [{"metric": "max_itl_ms", "max": 2000, "tiers": [4]}])
    trials = h200_like()
    spent = [drawn_small(trials[n], n, 4) for n in range(PER_TIER)]  # three configs, each once
    assert holdouts(numbered([*trials, *spent]), P99, sp, Policy.of(sp)) == []
    fewer = [drawn_small(trials[n], n, 4) for n in range(PER_TIER - 1)]
    assert holdouts(numbered([*trials, *fewer]), P99, sp, Policy.of(sp)) == [(2, 4)]
    again = [*fewer, drawn_small(trials[0], 0, 4)]  # a launch queued again is not another one
    assert holdouts(numbered([*trials, *again]), P99, sp, Policy.of(sp)) == [(2, 4)]


def test_a_pick_the_tiers_launches_on_another_draw_never_reached_says_so(tmp_path: Path) -> None:
    """c4's three launches on another draw went to configs that are not its pick now (each
    held, and the study moved on): the pick rests on the study's draw alone, and says so."""
    sp = space(tmp_path, [{"metric": "max_itl_ms", "max": 2000, "tiers": [4]}])
    trials = h200_like()
    slower = [{**trials[2].params, "max_num_seqs": s} for s in (4, 16)]
    base = trials[0]
    others = [
        optuna.trial.create_trial(
            params=p, distributions=base.distributions, values=[40.0, 90.0],
            user_attrs={**base.user_attrs, "baseline": False},
        )
        for p in slower
    ]  # fmt: skip
    study = numbered([*trials, *others])
    spent = [drawn_small(study[n], n, 4) for n in (0, 3, 4)]
    (_, c4) = recommend(numbered([*study, *spent]), P99, [1, 4], Policy.of(sp))
    assert c4.trial == 2 and c4.other_draws == []
    assert "the tier's 3 launches on another draw of the workload went to earlier picks " in (
        c4.choice
    )
    assert "(trials 0, 3, 4)" in c4.choice
    (_, fewer) = recommend(numbered([*study, *spent[:2]]), P99, [1, 4], Policy.of(sp))
    assert "study's draw alone" not in fewer.choice
    assert "not launched on another draw of the workload: its limits rest on the study's" in (
        fewer.choice
    )
    (c1, _) = recommend(numbered([*study, *spent[:2]]), P99, [1, 4], Policy.of(sp))
    assert "another draw" not in c1.choice  # c1 has no limit a draw moves


def drawn_small(root: FrozenTrial, number: int, tier: int) -> FrozenTrial:
    attrs = {**root.user_attrs, "confirm_of": number, "draw_seed": 4, "draw_for": tier}
    attrs.pop("baseline", None)
    return optuna.trial.create_trial(
        params=root.params, distributions=root.distributions, values=root.values, user_attrs=attrs
    )


def test_the_pick_says_what_it_measured_on_another_draw() -> None:
    trials = numbered([*explored(), drawn(2, BIG, 21.0, 1990), drawn(3, MID, 25.0, 1150)])
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.trial == 3 and rec.runs == [3]
    assert rec.other_draws == [{"trial": 5, "seed": 43, "max_itl_ms": 1150}]
    assert rec.metrics["max_itl_ms"] == 1100  # the study's own draw
    assert "on another draw of the workload (trial 5, seed 43: max_itl_ms 1,150)" in rec.choice
