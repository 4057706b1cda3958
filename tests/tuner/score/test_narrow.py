"""Knobs that look idle together but measured worse put back together are tried one at a time.

The table: ``chunk`` acts strongly, ``mode=b`` is 3.2% faster, ``noop`` does nothing. The search
only ever changed ``mode`` and ``noop`` together, so the regression splits the 3.2% between
them and calls neither beyond the noise; putting both back measures 3.3% worse, beyond it.
"""

from __future__ import annotations

import itertools
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from objectives.objective import get_objective
from tests.tuner.score.spaces import categorical, knob_space
from tuner.record.trial import TrialRecord
from tuner.run.confirm import narrowings, reversions
from tuner.score.eligible import Policy
from tuner.score.pooling import configs
from tuner.score.recommend import TierRecommendation, recommend
from tuner.score.revert import Defaults, knob_effects
from tuner.space.schema import Space

P99 = get_objective("p99_tpot")
DIST = {
    "chunk": CategoricalDistribution([8192, 32768, 131072]),
    "mode": CategoricalDistribution(["a", "b"]),
    "noop": CategoricalDistribution(["1", "0"]),
    "seats": CategoricalDistribution([256, 16]),
}
DEFAULTS = Defaults({"chunk": 8192, "mode": "a", "noop": "1"})
POLICY = Policy(defaults=DEFAULTS)
CHUNK = {8192: 30.0, 32768: 24.0, 131072: 20.0}
PICK = {"chunk": 131072, "mode": "b", "noop": "0"}
WANTED = {"chunk": 131072, "mode": "b", "noop": "1"}  # only the knobs that act


def truth(params: dict[str, Any]) -> float:
    return CHUNK[params["chunk"]] * (0.968 if params["mode"] == "b" else 1.0)


def trial(number: int, params: dict[str, Any], value: float, **attrs: Any) -> FrozenTrial:
    t = optuna.trial.create_trial(
        params=params,
        distributions={k: DIST[k] for k in params},
        values=[value],
        user_attrs={"tiers": {"1": {"p99_tpot_ms": value}}, "feasible": True, **attrs},
        state=TrialState.COMPLETE,
    )
    t.number = number
    return t


def explored() -> list[FrozenTrial]:
    """The search and its confirmations: ``mode`` and ``noop`` always changed together; the
    baseline launched twice (about 1% run-to-run noise), the pick twice."""
    out = [trial(0, {"chunk": 8192, "mode": "a", "noop": "1"}, 30.0, baseline=True)]
    out.append(trial(1, dict(out[0].params), 30.42, confirm_of=0))
    for chunk, (mode, noop) in itertools.product(CHUNK, [("a", "1"), ("b", "0")]):
        params = {"chunk": chunk, "mode": mode, "noop": noop}
        if chunk != 8192 or mode != "a":
            out.append(trial(len(out), params, truth(params)))
    pick = next(t for t in out if t.params == PICK)
    out.append(trial(len(out), PICK, truth(PICK) * 1.004, confirm_of=pick.number))
    return out


def confirm_rounds(
    trials: list[FrozenTrial],
    policy: Policy = POLICY,
    apart: bool = True,
    rounds: int = 9,
    space: Space | None = None,
) -> list[FrozenTrial]:
    """``tuner.run.confirm``'s rounds on the table: each queued config launched and measured
    (``apart=False``: the knobs put back all together only)."""
    space = space or Space.model_validate(_space())
    for _ in range(rounds):
        back = reversions(trials, P99, space, policy)
        queued = [(p, {"revert_of": r, "revert_at": c}) for r, c, p in back]
        if apart:
            steps = narrowings(trials, P99, space, policy)
            queued += [(p, {"revert_of": r, "revert_knob": k}) for r, k, p in steps]
        for params, attrs in queued:
            trials = [*trials, trial(len(trials), params, truth(params), **attrs)]
    return trials


def pick(trials: list[FrozenTrial], policy: Policy = POLICY) -> TierRecommendation:
    (rec,) = recommend(trials, P99, [1], policy)
    return rec


def test_the_regression_cannot_tell_the_two_knobs_apart() -> None:
    groups = list(configs(explored()).values())
    effects = knob_effects(groups, PICK, P99, 1, DEFAULTS, 0.01)
    assert effects["chunk"].beyond_noise
    assert not effects["mode"].beyond_noise and not effects["noop"].beyond_noise


def test_the_knob_that_matters_stays_and_the_idle_one_goes_back() -> None:
    trials = confirm_rounds(explored())
    rec = pick(trials)
    assert rec.params == WANTED
    mode = rec.knobs["mode"]
    assert mode["measured_by"] == "reversion" and mode["change"] > 0.02
    assert mode["words"].startswith("reverting it measured +3.")
    assert rec.knobs["chunk"]["measured_by"] == "regression"
    launched = [t for t in trials if t.user_attrs.get("revert_knob")]
    assert len(launched) <= 2  # at most one launch per knob put back together
    assert rec.trial in {t.number for t in trials}  # the pick is itself a measured config


def test_the_trials_table_tells_reversions_from_the_search() -> None:
    trials = confirm_rounds(explored())
    lineage = [TrialRecord.of(t).lineage() for t in trials]
    first = next(t.number for t in trials if t.params == PICK)
    alone = [row for row in lineage if row["revert_of"] is not None]
    # The knobs together were measured in the search already: only the tries of one knob.
    assert alone and {row["revert_knob"] for row in alone} <= {"mode", "noop"}
    assert all(row["revert_of"] == first and row["confirm_of"] is None for row in alone)


def test_without_trying_them_apart_both_knobs_stay() -> None:
    """The group reversion alone keeps the knob that does nothing: the narrowing is needed."""
    rec = pick(confirm_rounds(explored(), apart=False))
    assert rec.params == PICK
    assert rec.knobs["noop"]["measured_by"] == "untested"
    assert rec.knobs["noop"]["words"].startswith("kept untested: reverting it together with mode")


def test_a_knob_whose_reversion_a_rule_forbids_is_kept_untested() -> None:
    space = Space.model_validate(_space(['if mode == "b" then noop == "0"']))
    policy = Policy.of(space)  # putting noop back alone breaks the rule, both together do not
    rec = pick(confirm_rounds(explored(), policy, space=space), policy)
    assert rec.params == PICK
    assert rec.knobs["mode"]["measured_by"] == "reversion"
    assert "the space's rules forbid reverting it alone" in rec.knobs["noop"]["words"]


def test_an_unmeasured_step_says_the_budget_ran_out() -> None:
    """Stopped after the group reversion (the time spent): each knob says it was not tried."""
    trials = confirm_rounds(explored(), apart=False, rounds=1)
    space = Space.model_validate(_space())
    (nxt,) = narrowings(trials, P99, space, POLICY)
    assert nxt[1] == "mode" and nxt[2] == {**PICK, "mode": "a"}  # smallest |effect|, a tie
    for knob in ("mode", "noop"):
        assert "not measured apart" in pick(trials).knobs[knob]["words"]


def test_a_seat_cap_no_user_reaches_goes_back_with_no_launch() -> None:
    """A cap of 16 running requests changed along with ``mode`` and ``noop`` cannot act with one
    user: the walk puts it back untried, and the pick carries it at the default."""
    space = Space.model_validate(_space(seats=True))
    policy = Policy.of(space)
    trials = [_seated(t) for t in explored()]
    trials = confirm_rounds(trials, policy, space=space)
    rec = pick(trials, policy)
    assert rec.params == {**WANTED, "seats": 256}
    # The later steps built on the seat cap put back, so the pick is measured as deployed.
    assert trials[rec.trial].params == rec.params and rec.idle == {}
    assert "seats" not in rec.knobs and set(rec.knobs) == {"chunk", "mode"}
    tried = [t.user_attrs["revert_knob"] for t in trials if t.user_attrs.get("revert_knob")]
    assert "seats" not in tried and len(tried) <= 2


def test_a_reversion_of_idle_seats_alone_is_not_launched() -> None:
    """Only the seat cap would go back at c1: the same engine at that tier, so no launch."""
    space = Space.model_validate(_space(seats=True))
    policy = Policy.of(space)
    trials = [_seated(t) for t in explored()]
    trials = [*trials, trial(len(trials), {**WANTED, "seats": 16}, truth(WANTED) * 0.999)]
    trials.append(trial(len(trials), {**WANTED, "seats": 16}, truth(WANTED), confirm_of=7))
    assert reversions(trials, P99, space, policy) == []
    rec = pick(trials, policy)
    assert rec.params["seats"] == 256 and rec.idle == {"seats": 16}
    assert "ran with seats=16, which cannot act with 1 user" in rec.choice


def _seated(t: FrozenTrial) -> FrozenTrial:
    """``t`` with a seat cap of 16 wherever it changed ``mode``, 256 (the default) elsewhere."""
    seats = 16 if t.params["mode"] == "b" else 256
    return trial(t.number, {**t.params, "seats": seats}, t.values[0], **t.user_attrs)


def _space(rules: list[str] | None = None, seats: bool = False) -> dict[str, Any]:
    cat = categorical
    parameters = {
        "chunk": cat([8192, 32768, 131072], 8192, "--max-num-batched-tokens"),
        "mode": cat(["a", "b"], "a", "--mode"),
        "noop": cat(["1", "0"], "1", "--noop"),
        **({"seats": cat([256, 16], 256, "--max-num-seqs")} if seats else {}),
    }
    return knob_space(parameters, rules)


def test_a_step_one_launch_with_a_measured_config_is_found_not_launched_again() -> None:
    """``noop`` says nothing while ``mode`` is 'a' (as a draft method with zero draft tokens):
    the step that puts ``mode`` back is the group reversion's launch, so the walk finds it
    measured; a launch of it would be answered from the duplicate cache, which no walk sees."""
    silenced = Defaults(DEFAULTS.values, silenced={"noop": (("mode", "a"),)})
    policy = Policy(defaults=silenced)
    trials = confirm_rounds(explored(), policy)
    rec = pick(trials, policy)
    assert rec.params == WANTED
    assert rec.knobs["mode"]["measured_by"] == "reversion"
    tried = [t.user_attrs["revert_knob"] for t in trials if t.user_attrs.get("revert_knob")]
    assert tried == ["noop"]
