"""Bracketing and bisection of the largest load at which a probe still holds, then the boundary
settled against the noise.

The probe is the running engine measured at one load; this module only chooses loads. From
``start`` it doubles until a load breaks (or halves until one holds), then bisects between the
last load that held and the first that broke: to neighbouring integers for a concurrency, to
within ``precision`` for a request rate (bisected geometrically, as a rate has no natural
step). Each of those steps is one run, and near the boundary one run is a coin toss, so
``settle`` then measures each side until it rests on ``repeats`` runs and searches again from
a side whose majority disagrees with it: the answer held in most of its runs, and the next
step broke in most of its runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.storage.capacity import Probe

ProbeAt = Callable[[float, str], Probe]  # (load, phase) -> the measurement there


@dataclass(frozen=True)
class Bounds:
    """Where the search may go and how much it may spend."""

    start: float
    floor: float  # the least load tried: breaking there means capacity 0
    ceiling: float  # the most load tried: holding there means at least that much
    integer: bool  # a concurrency (neighbouring integers) or a rate (``precision``)
    max_steps: int
    precision: float = 0.05  # a rate stops once the first that broke is within 5% of the held


@dataclass
class Bracket:
    """The search's answer: the largest load that held and the least one that broke."""

    held: float = 0.0  # 0: even ``floor`` broke
    broke: float | None = None  # None: ``ceiling`` held
    steps: int = 0
    stopped: str | None = None  # why it ended before the bracket closed
    probes: list[Probe] = field(default_factory=list)  # every run, in order

    @property
    def dead(self) -> bool:
        return any(p.fatal for p in self.probes)

    def runs(self, load: float) -> tuple[int, int]:
        """Runs at ``load`` that held, and runs at it in all."""
        at = [p.ok for p in self.probes if p.load == load]
        return sum(at), len(at)

    def exact(self, bounds: Bounds) -> bool:
        """Whether nothing lies between ``held`` and ``broke`` that a further step could try."""
        if self.broke is None:
            return self.held >= bounds.ceiling
        if self.held <= 0:
            return self.broke <= bounds.floor
        return _close(self.held, self.broke, bounds)


def search(probe: ProbeAt, bounds: Bounds) -> Bracket:
    """Bracket, then bisect; never more than ``bounds.max_steps`` probes."""
    out = Bracket()
    first = _step(probe, bounds.start, "bracket", out, bounds)
    if first is not None:
        (_up if first.ok else _down)(probe, bounds, out)
    _bisect(probe, bounds, out)
    return out


def _up(probe: ProbeAt, bounds: Bounds, out: Bracket) -> None:
    load = out.held
    while out.broke is None and load < bounds.ceiling and out.stopped is None:
        load = min(_round(load * 2, bounds), bounds.ceiling)
        _step(probe, load, "bracket", out, bounds)


def _down(probe: ProbeAt, bounds: Bounds, out: Bracket) -> None:
    load = out.broke or bounds.start
    while out.held == 0 and load > bounds.floor and out.stopped is None:
        load = max(_round(load / 2, bounds), bounds.floor)
        _step(probe, load, "bracket", out, bounds)


def _bisect(probe: ProbeAt, bounds: Bounds, out: Bracket) -> None:
    while out.stopped is None and out.broke is not None and out.held > 0:
        if _close(out.held, out.broke, bounds):
            return
        _step(probe, _middle(out.held, out.broke, bounds), "bisect", out, bounds)


def _step(probe: ProbeAt, load: float, phase: str, out: Bracket, bounds: Bounds) -> Probe | None:
    if out.steps >= bounds.max_steps:
        out.stopped = f"the step budget ({bounds.max_steps} probes) was spent"
        return None
    out.steps += 1
    result = probe(load, phase)
    out.probes.append(result)
    if result.ok:
        out.held = max(out.held, load)
    else:
        out.broke = load if out.broke is None else min(out.broke, load)
    if result.fatal:
        out.stopped = f"stopped at {load:g}: {result.broke[0]}"
    return result


def settle(probe: ProbeAt, out: Bracket, bounds: Bounds, repeats: int, moves: int = 3) -> None:
    """Each side of the boundary measured until it rests on ``repeats`` runs (alternated, so
    that drift in the machine's load hits both alike). A side most of whose runs disagree
    with it moves the boundary: from there the load gallops away (one step, two, four...) to
    the first that does the opposite, the bracket is bisected again and its sides topped up,
    at most ``moves`` times. Nothing is measured once the engine stopped serving."""
    for moved in range(moves + 1):
        _top_up(probe, out, repeats)
        direction = 0 if out.stopped else _disagreement(out)
        if direction == 0:
            return
        if moved == moves:  # the sides stay as measured, and say how far they disagree
            break
        _gallop(probe, bounds, out, direction)
        _bisect(probe, bounds, out)
    out.stopped = f"the boundary still moved after {moves} moves: the noise is wider than a step"


def _top_up(probe: ProbeAt, out: Bracket, repeats: int) -> None:
    sides = [x for x in (out.held or None, out.broke) if x is not None]
    for i in range(repeats):
        for load in sides[::-1] if i % 2 else sides:
            if out.runs(load)[1] < repeats and not out.dead:
                out.probes.append(probe(load, "repeat"))


def _disagreement(out: Bracket) -> int:
    """-1: most runs of the side that held broke; +1: most of the side that broke held."""
    held_ok, held_runs = out.runs(out.held) if out.held else (1, 1)
    broke_ok, broke_runs = out.runs(out.broke) if out.broke is not None else (0, 1)
    if 2 * held_ok <= held_runs:
        return -1
    return 1 if 2 * broke_ok > broke_runs else 0


def _gallop(probe: ProbeAt, bounds: Bounds, out: Bracket, direction: int) -> None:
    base = out.held if direction < 0 else out.broke
    assert base is not None
    if direction < 0:
        out.held, out.broke = 0.0, base
    else:
        out.held, out.broke = base, None
    stride, last = 1, base
    while out.stopped is None and (out.held == 0 if direction < 0 else out.broke is None):
        load = min(max(_offset(base, direction * stride, bounds), bounds.floor), bounds.ceiling)
        if load == last:  # the floor or the ceiling, tried already
            return
        _step(probe, load, "gallop", out, bounds)
        stride, last = stride * 2, load


def _offset(base: float, steps: int, bounds: Bounds) -> float:
    """``steps`` steps from ``base``: integers for a concurrency, ``precision`` for a rate."""
    if bounds.integer:
        return base + steps
    return base * (1 + bounds.precision) ** steps


def _middle(low: float, high: float, bounds: Bounds) -> float:
    if bounds.integer:
        return float((int(low) + int(high)) // 2)
    return math.sqrt(low * high)


def _close(low: float, high: float, bounds: Bounds) -> bool:
    if bounds.integer:
        return high - low <= 1
    return high <= low * (1 + bounds.precision)


def _round(load: float, bounds: Bounds) -> float:
    return float(max(1, round(load))) if bounds.integer else load
