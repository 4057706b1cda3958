"""Every knob a pick keeps has an effect measured on its own: one no measurement credits is
launched apart, and a knob silenced by another's 'off' value is no change at all."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial

from tests.tuner.score.spaces import categorical, knob_space
from tests.tuner.score.test_revert import DEFAULTS, DIST, P99, POLICY, trial
from tuner.run.prune import prunings
from tuner.score.eligible import Policy
from tuner.score.evidence import tries, unproven
from tuner.score.recommend import recommend
from tuner.score.revert import Defaults
from tuner.space import load_space
from tuner.space.render import silenced_by
from tuner.space.schema import Space

H200 = Path(__file__).resolve().parents[3] / "search_spaces" / "minimax_h200.yaml"

BASE = {"chunk": 8192, "noop": "1", "seats": 1024}
LEAD = {"chunk": 131072, "noop": "0", "seats": 1024}


def numbered(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    for n, t in enumerate(trials):
        t.number = n
    return trials


def sparse() -> list[FrozenTrial]:
    """The leader changes chunk (it acts) and noop (it does nothing), and no launch changed noop
    without chunk's largest value: the fit has noop within the noise, no launch tried the leader
    without it, and the baseline is measured twice (about 1% run-to-run noise)."""
    return numbered(
        [
            trial(BASE, 30.0, baseline=True),
            trial(BASE, 30.4, confirm_of=0),
            trial({**BASE, "chunk": 32768}, 24.0),
            trial({**BASE, "noop": "0"}, 30.2),
            trial(LEAD, 20.0),
        ]
    )


def test_a_kept_knob_no_launch_tried_apart_is_launched_without_it() -> None:
    trials = sparse()
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.params == LEAD and rec.knobs["noop"]["measured_by"] == "unmeasured"
    assert unproven(rec.knobs) == ["noop"]
    confirm, launches = prunings(trials, P99, [1], POLICY)
    assert confirm == []
    assert launches == [(4, 1, ("noop",), {**LEAD, "noop": "1"})]


def test_a_knob_measured_apart_to_do_nothing_goes_back_to_its_default() -> None:
    trials = numbered([*sparse(), trial({**LEAD, "noop": "1"}, 20.1, revert_of=4, revert_at=1,
                                        revert_knob="noop")])  # fmt: skip
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.trial == 5 and rec.params == {**LEAD, "noop": "1"}
    assert set(rec.knobs) == {"chunk"}
    assert prunings(trials, P99, [1], POLICY) == ([], [])


def twins() -> list[FrozenTrial]:
    """No launch changed noop without chunk's largest value, or that value without noop: the
    fit splits one joint gain between the two, and neither is measured on its own."""
    return numbered(
        [
            trial(BASE, 30.0, baseline=True),
            trial(BASE, 30.4, confirm_of=0),
            trial({**BASE, "chunk": 32768}, 24.0),
            trial(LEAD, 20.0),
        ]
    )


def test_knobs_only_ever_changed_together_are_each_launched_apart() -> None:
    (rec,) = recommend(twins(), P99, [1], POLICY)
    assert {k: n["together"] for k, n in rec.knobs.items()} == {"chunk": ["noop"],
                                                                "noop": ["chunk"]}  # fmt: skip
    _, launches = prunings(twins(), P99, [1], POLICY)
    assert launches == [(3, 1, ("chunk",), {**LEAD, "chunk": 8192})]


def test_a_knob_measured_apart_to_matter_stays_and_says_by_how_much() -> None:
    trials = numbered([*twins(), trial({**LEAD, "noop": "1"}, 23.0, revert_of=3, revert_at=1,
                                       revert_knob="noop")])  # fmt: skip
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.trial == 3 and rec.params == LEAD
    note = rec.knobs["noop"]
    assert note["measured_by"] == "reversion" and note["trial"] == 4
    assert note["words"] == "reverting it measured +15.0% worse p99_tpot (trial 4 against trial 3)"
    assert "noop" not in unproven(rec.knobs)


def test_a_knob_whose_launch_apart_preempted_stays_and_says_so() -> None:
    # Level on the objective, but the engine preempted without it where the pick did not: it
    # ranks after the pick whatever its figures, and the knob is what keeps the engine whole.
    storm = trial({**LEAD, "noop": "1"}, 20.1, revert_of=4, revert_at=1, revert_knob="noop",
                  tiers={"1": {"p99_tpot_ms": 20.1, "server": {"num_preemptions": 3}}})  # fmt: skip
    (rec,) = recommend(numbered([*sparse(), storm]), P99, [1], POLICY)
    assert rec.trial == 4 and rec.params == LEAD
    note = rec.knobs["noop"]
    assert note["measured_by"] == "reversion" and not note.get("within_noise")
    assert (
        note["words"]
        == "without it the engine preempted requests at this tier (trial 5 against trial 4)"
    )
    assert "noop" not in unproven(rec.knobs)


def test_a_pick_whose_tier_noise_is_unknown_is_confirmed_before_anything_is_judged() -> None:
    trials = numbered([t for t in sparse() if t.number != 1])  # the baseline launched once
    (rec,) = recommend(trials, P99, [1], POLICY)
    assert rec.noise_cv is None and unproven(rec.knobs)
    confirm, launches = prunings(trials, P99, [1], POLICY)
    assert [t.number for t in confirm] == [rec.trial] and launches == []


def test_knobs_within_the_noise_go_back_together_first_then_each_alone() -> None:
    notes = {
        "a": {"measured_by": "unmeasured", "change": -0.02},
        "b": {"measured_by": "unmeasured", "change": 0.01},
        "c": {"measured_by": "regression", "change": -0.1, "together": ["d"]},
        "d": {"measured_by": "regression", "change": -0.1, "together": ["c"]},
        "e": {"measured_by": "regression", "change": -0.2},
        "f": {"measured_by": "untested", "change": None, "forbidden": True},
        "g": {"measured_by": "unmeasured", "change": None},  # cannot act at the tier
    }
    assert tries(notes) == [("b", "a"), ("b",), ("a",), ("c",), ("d",)]


def test_a_knob_another_ones_off_value_leaves_out_of_the_launch_is_no_change() -> None:
    space = load_space(H200)
    quiet = silenced_by(space)
    assert quiet == {"spec_method": (("num_speculative_tokens", 0),)}
    d = Defaults({"spec_method": "ngram", "num_speculative_tokens": 0}, silenced=quiet)
    off = {"spec_method": "suffix", "num_speculative_tokens": 0}
    assert d.changed(off) == {} and d.canonical(off) == {**off, "spec_method": "ngram"}
    assert d.deployed(off, 4) == {"spec_method": "ngram", "num_speculative_tokens": 0}
    on = {"spec_method": "suffix", "num_speculative_tokens": 3}
    assert d.changed(on) == on
    # the renderer's own test of 'off': 0.0 drops the flag as 0 does, "0" and False do not
    float_off = {"spec_method": "suffix", "num_speculative_tokens": 0.0}
    assert d.canonical(float_off)["spec_method"] == "ngram"
    for other in ("0", False):
        assert (
            d.canonical({"spec_method": "suffix", "num_speculative_tokens": other})["spec_method"]
            == "suffix"
        )


@pytest.mark.parametrize("drafts", [0, 2])
def test_the_pick_lists_a_draft_method_only_where_speculation_is_on(drafts: int) -> None:
    """Two launches that differ in a silenced knob alone are one config to the recipe."""
    defaults = Defaults({**DEFAULTS.values, "method": "ngram", "drafts": 0}, DEFAULTS.seat_caps,
                        {"method": (("drafts", 0),)})  # fmt: skip
    policy = Policy(defaults=defaults)
    base: dict[str, Any] = {**BASE, "method": "ngram", "drafts": 0}
    pick = {**base, "chunk": 131072, "method": "suffix", "drafts": drafts}
    trials = numbered(
        [
            spec_trial(base, 30.0, baseline=True),
            spec_trial(base, 30.4, confirm_of=0),
            spec_trial(pick, 20.0),
            spec_trial({**pick, "chunk": 32768}, 24.0),
        ]
    )
    (rec,) = recommend(trials, P99, [1], policy)
    assert ("method" in rec.knobs) == bool(drafts), rec.knobs
    assert rec.params["method"] == ("suffix" if drafts else "ngram")


def spec_trial(params: dict[str, Any], value: float, **attrs: Any) -> FrozenTrial:
    """``trial`` with the draft knobs among its distributions."""
    t = trial({k: v for k, v in params.items() if k in DIST}, value, **attrs)
    extra = {"method": CategoricalDistribution(["ngram", "suffix"]),
             "drafts": CategoricalDistribution([0, 2])}  # fmt: skip
    return optuna.trial.create_trial(
        params=params, distributions={**{k: DIST[k] for k in DIST}, **extra},
        values=t.values, user_attrs=t.user_attrs, state=t.state,
    )  # fmt: skip


def test_a_kept_knob_the_rules_keep_from_its_default_alone_says_so_and_is_not_launched() -> None:
    parameters = {
        "chunk": categorical([8192, 32768, 131072], 8192, "--max-num-batched-tokens"),
        "noop": categorical(["1", "0"], "1", "--noop"),
        "seats": categorical([16, 256, 1024], 1024, "--max-num-seqs"),
    }
    space = Space.model_validate(knob_space(parameters, ['if chunk == 131072 then noop == "0"']))
    policy = Policy(defaults=DEFAULTS, rules=tuple(space.parsed_rules()))
    (rec,) = recommend(sparse(), P99, [1], policy)
    note = rec.knobs["noop"]
    assert note["forbidden"] and note["words"].endswith(
        "the space's rules forbid reverting it alone"
    )
    assert unproven(rec.knobs) == []
    assert prunings(sparse(), P99, [1], policy) == ([], [])


def test_a_tier_has_at_most_as_many_launches_apart_as_the_space_has_knobs() -> None:
    spent = [
        trial({**LEAD, "chunk": chunk, "seats": seats}, 40.0, revert_of=4, revert_at=1,
              revert_knob="seats")
        for chunk, seats in ((8192, 16), (32768, 16), (32768, 256))
    ]  # fmt: skip
    trials = numbered([*sparse(), *spent])
    assert prunings(trials, P99, [1], POLICY) == ([], [])
    assert prunings(trials[:-1], P99, [1], POLICY)[1]  # two of three spent: one more to go
