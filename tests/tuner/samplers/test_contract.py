"""The sampler contract (``tuner.samplers``' docstring), run on every registered sampler.

The harness is the run loop's protocol without an engine: each config is scored by a fixed
landscape, a third of the space is infeasible (a constraint > 0), a rule-breaker is refused with
its rule constraint, and a repeat of a measured config is answered from the table.
"""

from __future__ import annotations

import importlib.util
from typing import Any

import optuna
import pytest

from tests.tuner.conftest import SMALL_SPACE
from tuner.record.trial import CONSTRAINT_KEYS
from tuner.samplers import SAMPLERS, make_sampler
from tuner.space.sample import rules_violation, suggest, violated_rules
from tuner.space.schema import Space

OURS = {"additive", "grid"}  # the samplers that promise no rule-breakers and no repeats
ASKS = 14
NAMES = [
    pytest.param(n, marks=pytest.mark.skipif(not importlib.util.find_spec("torch"), reason="torch"))
    if n == "gp"
    else n
    for n in SAMPLERS
]


def space() -> Space:
    return Space.model_validate(SMALL_SPACE)


def score(values: dict[str, Any], tier: int) -> tuple[float, bool]:
    """A smooth landscape per tier; configs with 4 seats and the largest budget are infeasible."""
    value = (
        10 + abs(values["max_num_seqs"] - 16 * tier) / 8 + values["max_num_batched_tokens"] / 1e4
    )
    return value, not (values["max_num_seqs"] == 4 and values["max_num_batched_tokens"] == 32768)


def search(name: str) -> list[dict[str, Any]]:
    """Proposals in order, each told the way the run loop tells it."""
    sp = space()
    tiers = list(sp.workload.tiers)
    study = optuna.create_study(
        directions=["minimize"] * len(tiers), sampler=make_sampler(name, sp)
    )
    measured: dict[tuple[Any, ...], list[float]] = {}
    proposals = []
    for _ in range(ASKS):
        trial = study.ask()
        values = suggest(trial, sp)
        proposals.append(values)
        constraints = dict.fromkeys(CONSTRAINT_KEYS, 0.0)
        if violated_rules(sp, values):
            constraints["rules"] = rules_violation(sp, values)
            out = [1e9] * len(tiers)
        else:
            scored = [score(values, t) for t in tiers]
            out = measured.setdefault(tuple(sorted(values.items())), [v for v, _ in scored])
            if not all(ok for _, ok in scored):
                constraints["slo"] = 1.0
        for key, v in constraints.items():
            trial.set_constraint(key, v)
        study.tell(trial, out)
    return proposals


@pytest.mark.parametrize("name", NAMES)
def test_the_same_seed_proposes_the_same_configs(name: str) -> None:
    assert search(name) == search(name)


@pytest.mark.parametrize("name", NAMES)
def test_it_keeps_proposing_within_the_space_after_infeasible_and_refused_trials(
    name: str,
) -> None:
    sp = space()
    proposals = search(name)
    assert len(proposals) == ASKS
    for values in proposals:
        for key, p in sp.parameters.items():
            assert values[key] in (p.choices or [])
    assert len({tuple(sorted(v.items())) for v in proposals}) >= 4  # it moves on


@pytest.mark.parametrize("name", sorted(OURS))
def test_ours_never_propose_a_rule_breaker_or_a_measured_config(name: str) -> None:
    sp = space()
    proposals = search(name)
    assert not [v for v in proposals if violated_rules(sp, v)]
    keys = [tuple(sorted(v.items())) for v in proposals]
    assert len(keys) == len(set(keys))


def test_every_sampler_of_ours_is_registered() -> None:
    assert set(SAMPLERS) >= OURS | {"tpe", "tpe-tiers", "random", "nsga2"}
