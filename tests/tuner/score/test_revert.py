"""A pick keeps only the knobs whose effect at its tier is beyond the noise."""

from __future__ import annotations

import itertools
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from objectives.objective import get_objective
from tests.tuner.score.spaces import categorical, knob_space
from tuner.run.confirm import reversions
from tuner.score.eligible import Policy
from tuner.score.evidence import Measured, knob_notes
from tuner.score.pooling import configs
from tuner.score.recommend import recommend
from tuner.score.revert import Defaults, knob_effects
from tuner.space.schema import Space

P99 = get_objective("p99_tpot")
DIST = {
    "chunk": CategoricalDistribution([8192, 32768, 131072]),
    "noop": CategoricalDistribution(["1", "0"]),
    "seats": CategoricalDistribution([16, 256, 1024]),
}
DEFAULTS = Defaults({"chunk": 8192, "noop": "1", "seats": 1024}, frozenset({"seats"}))
POLICY = Policy(defaults=DEFAULTS)
CHUNK = {8192: 30.0, 32768: 24.0, 131072: 20.0}  # the only knob that acts


def trial(params: dict[str, Any], value: float, **attrs: Any) -> FrozenTrial:
    attrs.setdefault("tiers", {"1": {"p99_tpot_ms": value}})
    return optuna.trial.create_trial(
        params=params,
        distributions={k: DIST[k] for k in params},
        values=[value],
        user_attrs={"feasible": True, **attrs},
        state=TrialState.COMPLETE,
    )


def study() -> list[FrozenTrial]:
    """Every combination measured once with a little noise, the baseline twice; ``noop`` and
    ``seats`` (all seat caps at or above the tier's one user) change nothing."""
    out, wobble = [], itertools.cycle([1.0, 1.01, 0.99, 1.005])
    base = {"chunk": 8192, "noop": "1", "seats": 1024}
    out.append(trial(base, 30.0, baseline=True))
    out.append(trial(base, 31.0, confirm_of=0))  # about 2% run-to-run noise
    for chunk, noop, seats in itertools.product(CHUNK, ["1", "0"], [16, 256, 1024]):
        params = {"chunk": chunk, "noop": noop, "seats": seats}
        if params != base:
            out.append(trial(params, CHUNK[chunk] * next(wobble)))
    numbered = []
    for n, t in enumerate(out):
        t.number = n
        numbered.append(t)
    return numbered


def test_only_the_knob_that_acts_has_an_effect_beyond_the_noise() -> None:
    groups = list(configs(study()).values())
    pick = {"chunk": 131072, "noop": "0", "seats": 256}
    effects = knob_effects(groups, pick, P99, 1, DEFAULTS, 0.01)
    assert effects["chunk"].beyond_noise and effects["chunk"].change < -0.2
    assert not effects["noop"].beyond_noise
    assert "seats" not in effects  # 256 seats at one user act as the default 1024


def test_a_knob_that_does_nothing_is_left_at_its_default() -> None:
    trials = study()
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.params == {"chunk": 131072, "noop": "1", "seats": 1024}
    assert set(rec.effects) == {"chunk"} and rec.effects["chunk"]["beyond_noise"]
    (without,) = recommend(trials, P99, [1], Policy())  # the rule removed: noise picks knobs
    assert without.params != rec.params


def test_the_pick_is_launched_again_with_its_idle_knobs_at_their_defaults() -> None:
    space = Space.model_validate(_space())
    trials = [t for t in study() if t.params.get("noop") == "0" or t.number < 2]
    ((_, tier, params),) = reversions(trials, P99, space, POLICY)
    assert tier == 1 and params == {"chunk": 131072, "noop": "1", "seats": 1024}


def _space() -> dict[str, Any]:
    cat = categorical
    parameters = {
        "chunk": cat([8192, 32768, 131072], 8192, "--max-num-batched-tokens"),
        "noop": cat(["1", "0"], "1", "--noop"),
        "seats": cat([16, 256, 1024], 1024, "--max-num-seqs"),
    }
    return knob_space(parameters)


def test_a_knob_measured_to_hurt_is_not_kept() -> None:
    """noop=0 makes every config 10% slower: beyond the noise, but the wrong way."""
    wobble = itertools.cycle([1.0, 1.01, 0.99, 1.005])
    base = {"chunk": 8192, "noop": "1", "seats": 1024}
    out = [trial(base, 30.0, baseline=True), trial(base, 31.0, confirm_of=0)]
    for chunk, noop, seats in itertools.product(CHUNK, ["1", "0"], [16, 256, 1024]):
        p = {"chunk": chunk, "noop": noop, "seats": seats}
        if p != base:
            out.append(trial(p, CHUNK[chunk] * (1.10 if noop == "0" else 1.0) * next(wobble)))
    for n, t in enumerate(out):
        t.number = n
    pick = {"chunk": 131072, "noop": "0", "seats": 1024}
    effects = knob_effects(list(configs(out).values()), pick, P99, 1, DEFAULTS, 0.01)
    assert effects["noop"].change > 0.05  # measured: it slows every config
    assert not effects["noop"].beyond_noise
    assert effects["chunk"].beyond_noise


def test_defaults_within_the_noise_of_the_best_are_the_pick_and_its_line_says_why() -> None:
    base, best = {"chunk": 8192, "noop": "1", "seats": 1024}, {"chunk": 131072, "noop": "1"}
    trials = [
        trial(base, 30.0, baseline=True),
        trial(base, 39.0, confirm_of=0),  # a tier this noisy: one launch tells little
        trial({**best, "seats": 1024}, 26.0),
        trial({**best, "seats": 1024}, 34.0, confirm_of=2),
    ]
    for n, t in enumerate(trials):
        t.number = n
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.trial == 0
    assert "gives up" not in rec.choice, rec.choice
    assert rec.choice.startswith(
        "c1: trial 0 keeps the engine's defaults: the best measured, trial 2 (1 changed), was "
        "13.0% better on p99_tpot, within the noise ("
    ), rec.choice


def test_a_leader_is_reverted_at_each_tier_whose_idle_knobs_differ() -> None:
    """noop=0 helps at c20 only: at c1 both noop and seats are idle, at c20 seats alone."""
    leader = {"chunk": 131072, "noop": "0", "seats": 16}
    trials = []
    for chunk, noop, seats in itertools.product(CHUNK, ["1", "0"], [16, 256, 1024]):
        p = {"chunk": chunk, "noop": noop, "seats": seats}
        if chunk == 131072 and seats == 1024:
            continue  # the reversions to come: not sampled, so they are launched
        lead = 0.99 if p == leader else 1.0  # the one leader at both tiers
        c1, c20 = CHUNK[chunk] * lead, CHUNK[chunk] * 5 * (0.9 if noop == "0" else 1.0) * lead
        tiers = {"1": {"p99_tpot_ms": c1}, "20": {"p99_tpot_ms": c20}}
        base = p == {"chunk": 8192, "noop": "1", "seats": 1024}
        trials.append(trial(p, c1, tiers=tiers, baseline=base))
    for n, t in enumerate(trials):
        t.number = n
    base_n = next(t.number for t in trials if t.user_attrs.get("baseline"))
    again_0 = trial(dict(trials[base_n].params), 30.6, confirm_of=base_n, tiers=_both(30.6, 153))
    again_0.number = len(trials)
    trials.append(again_0)
    space = Space.model_validate(
        {**_space(), "workload": {**_space()["workload"], "tiers": [1, 20]}}
    )
    got = {tier: params for _, tier, params in reversions(trials, P99, space, POLICY)}
    assert got[1] == {**leader, "noop": "1", "seats": 1024}
    assert got[20] == {**leader, "seats": 1024}  # noop acts at c20: it stays
    root = next(t.number for t in trials if t.params == leader)
    done_at_1 = trial(got[1], 20.0, revert_of=root, revert_at=1, tiers=_both(20.0, 100.0))
    done_at_1.number = len(trials)  # launched for c1 only
    again = reversions([*trials, done_at_1], P99, space, POLICY)
    assert [(r, c) for r, c, _ in again] == [(root, 20)]
    older = trial(got[1], 20.0, revert_of=root, tiers=_both(20.0, 100.0))  # no tier recorded
    older.number = len(trials)
    assert reversions([*trials, older], P99, space, POLICY) == []


def _both(c1: float, c20: float) -> dict[str, dict[str, float]]:
    return {"1": {"p99_tpot_ms": c1}, "20": {"p99_tpot_ms": c20}}


def test_a_seat_cap_is_idle_only_where_the_default_is_too() -> None:
    """16 seats at 8 users acts like 1024 (no one held), but not like a default of 4, which
    holds four of the eight: there the cap is a change that acts."""
    assert DEFAULTS.changed({"seats": 16}, 8) == {}
    low = Defaults({"seats": 4}, frozenset({"seats"}))
    assert low.changed({"seats": 16}, 8) == {"seats": 16}
    assert low.deployed({"seats": 16}, 8) == {"seats": 16}
    assert low.changed({"seats": 16}, 2) == {} and low.deployed({"seats": 16}, 2) == {"seats": 4}


def test_knobs_always_changed_together_are_said_to_be_estimated_together() -> None:
    """Where every config that set chunk=131072 also set noop=0, the fit cannot tell the two
    apart: each note says so instead of claiming the joint gain for each knob alone."""
    paired = [t for t in study() if (t.params["chunk"] == 131072) == (t.params["noop"] == "0")]
    groups = list(configs(paired).values())
    pick = {"chunk": 131072, "noop": "0", "seats": 1024}
    effects = knob_effects(groups, pick, P99, 1, DEFAULTS, 0.01)
    assert effects["chunk"].together == ("noop",) and effects["noop"].together == ("chunk",)
    notes = knob_notes(pick, Measured(effects, None, {}, 0, 0.01), P99, DEFAULTS)
    beyond = [k for k in ("chunk", "noop") if notes[k]["measured_by"] == "regression"]
    assert beyond, notes
    for k in beyond:
        assert "not told apart" in notes[k]["words"] and notes[k]["together"]
    apart = knob_effects(list(configs(study()).values()), pick, P99, 1, DEFAULTS, 0.01)
    assert apart["chunk"].together == () and apart["noop"].together == ()


def test_a_config_level_with_both_the_leader_and_the_defaults_is_not_the_pick() -> None:
    """noop=0 alone measures within the noise of the leader (chunk and noop) and of the
    baseline, while the leader beats the baseline beyond it: "within the noise" does not chain,
    so the change nothing credits is not deployed in place of the leader."""
    base = {"chunk": 8192, "noop": "1", "seats": 1024}
    trials = [
        trial(base, 28.0, baseline=True),
        trial(base, 32.0, confirm_of=0),  # about 9% run-to-run noise
        trial({"chunk": 131072, "noop": "0", "seats": 1024}, 20.0),
        trial({"chunk": 8192, "noop": "0", "seats": 1024}, 25.0),
    ]
    for n, t in enumerate(trials):
        t.number = n
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.trial == 2 and rec.verdict == "better", (rec.trial, rec.verdict, rec.choice)


def test_a_baseline_left_out_for_its_throughput_is_beaten_on_throughput() -> None:
    """The baseline gives up capacity (below the floor): noop=0 alone, level with it on
    p99_tpot, earns its change with a throughput gain beyond the noise."""
    base = {"chunk": 8192, "noop": "1", "seats": 1024}
    trials = numbered(
        [
            at_c1(base, 28.0, {"output_throughput": 100.0}, baseline=True),
            at_c1(base, 32.0, {"output_throughput": 102.0}, confirm_of=0),
            at_c1({**base, "chunk": 131072, "noop": "0"}, 20.0, {"output_throughput": 150.0}),
            at_c1({**base, "noop": "0"}, 25.0, {"output_throughput": 140.0}),
        ]
    )
    floor = Policy(throughput_floor=0.8, defaults=DEFAULTS)
    (rec,) = recommend(trials, P99, [1], floor)
    assert rec.trial == 3, (rec.trial, rec.choice)


def test_a_config_that_preempted_does_not_stand_in_for_a_leader_that_did_not() -> None:
    """The leader with noop=0 put back measures within the noise on p99_tpot, but its engine
    preempted requests where the leader's did not: a ranking that puts preemption last does
    not let fewer changes bring it back (a recomputed prefill is a stall the tier's
    percentiles may not show yet)."""
    base = {"chunk": 8192, "noop": "1", "seats": 1024}
    big = {**base, "chunk": 131072}

    def study(preempted: float) -> list[FrozenTrial]:
        calm = {"server": {"num_preemptions": 0}}
        return numbered(
            [
                at_c1(base, 30.0, calm, baseline=True),
                at_c1(base, 30.3, calm, confirm_of=0),
                at_c1({**big, "noop": "0"}, 20.0, calm),
                at_c1(big, 20.1, {"server": {"num_preemptions": preempted}}),
            ]
        )

    (rec,) = recommend(study(2), P99, [1], POLICY)
    assert rec.trial == 2, (rec.trial, rec.choice)
    (rec,) = recommend(study(0), P99, [1], POLICY)
    assert rec.trial == 3, (rec.trial, rec.choice)


def at_c1(params: dict[str, Any], p99: float, figures: dict[str, Any], **attrs: Any) -> FrozenTrial:
    """A launch with its c1 figures beside its p99 TPOT."""
    return trial(params, p99, tiers={"1": {"p99_tpot_ms": p99, **figures}}, **attrs)


def numbered(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    for n, t in enumerate(trials):
        t.number = n
    return trials
