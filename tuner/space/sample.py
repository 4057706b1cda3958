"""From an Optuna trial to parameter values, and how far they are from the space's rules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import optuna

from tuner.space.params import Parameter, Scalar
from tuner.space.schema import Space


def suggest(trial: optuna.Trial, space: Space) -> dict[str, Scalar]:
    """Sample every parameter of ``space`` (a flat space: no conditional parameters)."""
    return {name: _suggest_one(trial, name, p) for name, p in space.parameters.items()}


def _suggest_one(trial: optuna.Trial, name: str, p: Parameter) -> Scalar:
    if p.type == "categorical":
        assert p.choices is not None
        value: Scalar = trial.suggest_categorical(name, p.choices)  # type: ignore[assignment]
        return value
    assert p.low is not None and p.high is not None
    if p.type == "int":
        step = int(p.step) if p.step is not None else 1
        return trial.suggest_int(name, int(p.low), int(p.high), step=step, log=p.log)
    return trial.suggest_float(name, p.low, p.high, step=p.step, log=p.log)


def config_key(values: Mapping[str, Any]) -> str:
    """One config's identity, whatever order its parameters were set in."""
    return repr(sorted(values.items()))


def violated_rules(space: Space, values: dict[str, Scalar]) -> list[str]:
    """The rule texts ``values`` break (checked before any launch, so they cost nothing)."""
    return [rule.text for rule in space.parsed_rules() if not rule.holds(values)]


def rules_violation(space: Space, values: dict[str, Scalar]) -> float:
    """How far ``values`` are from satisfying every rule (0 when they do), for the sampler."""
    return sum(rule.violation(values) for rule in space.parsed_rules())
