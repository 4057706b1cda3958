"""A config of another space in this one: what a warm start queues and learns from.

An earlier study may have tuned other knobs, or the same knob over other values (an older
engine's token budgets, a kernel this release dropped). ``translate`` gives each parameter of
this space the earlier value where it has one: the value itself when this parameter takes it,
else the nearest it takes (a number moved onto this space's choices, range and step), else
nothing (a kernel this space does not list has no nearest). ``queued`` fills what is missing
with this space's defaults, since a knob the earlier study did not tune ran at the engine's
own default there too, and refuses a config this space's rules forbid.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from tuner.space.params import Parameter, Scalar
from tuner.space.sample import violated_rules
from tuner.space.schema import Space


def translate(params: Mapping[str, Any], space: Space) -> dict[str, Scalar | None]:
    """Each of this space's parameters: the earlier value, or the nearest one this parameter
    takes; None where the earlier config lacks it or its value has no counterpart here."""
    return {
        name: nearest(p, params[name]) if name in params else None
        for name, p in space.parameters.items()
    }


def queued(params: Mapping[str, Any], space: Space) -> dict[str, Scalar] | None:
    """The earlier config as a launch of this space: translated, its gaps at this space's
    defaults; None when that breaks one of this space's rules."""
    defaults = space.defaults()
    point = {n: defaults[n] if v is None else v for n, v in translate(params, space).items()}
    return None if violated_rules(space, point) else point


def nearest(p: Parameter, value: Any) -> Scalar | None:
    """``value`` when ``p`` takes it, else the nearest value ``p`` takes (numbers only:
    on a log scale among positive choices, where 8192 is nearer 16384 than 1024), else None."""
    if p.choices is not None:
        return _choice(p.choices, value)
    return _in_range(p, float(value)) if _number(value) else None


def _choice(choices: list[Scalar], value: Any) -> Scalar | None:
    same = [c for c in choices if _equal(c, value)]
    numbers = [c for c in choices if _number(c)]
    if same or not _number(value) or not numbers:
        return same[0] if same else None
    return min(numbers, key=lambda c: _gap(float(c), float(value)))


def _in_range(p: Parameter, x: float) -> Scalar:
    assert p.low is not None and p.high is not None
    if p.step is not None:
        x = p.low + round((x - p.low) / p.step) * p.step
    x = min(max(x, p.low), p.high)
    return round(x) if p.type == "int" else x


def _gap(a: float, b: float) -> float:
    if a > 0 and b > 0:
        return abs(math.log(a) - math.log(b))
    return abs(a - b)


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _equal(choice: Scalar, value: Any) -> bool:
    if _number(choice) and _number(value):
        return math.isclose(float(choice), float(value))
    return type(choice) is type(value) and choice == value
