"""Bracketing and bisection of the largest load at which a probe still holds, then the boundary
settled against the noise.

The probe is the running engine measured at one load; this module only chooses loads. From
``start`` it doubles until a load breaks (or halves until one holds), then bisects between the
last load that held and the first that broke: to neighbouring integers for a concurrency, to
within ``precision`` for a request rate (bisected geometrically, as a rate has no natural
step). Each of those steps is one run, and near the boundary one run is a coin toss, so
``settle`` then measures each side until it rests on ``repeats`` runs and moves the boundary
one step while a side's majority disagrees with it: the answer held in most of its runs, and
the next step broke in most of its runs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from tuner.export.capacity import Probe

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
        out.stopped = f"the engine stopped serving at {load:g}: {result.broke[0]}"
    return result


def settle(probe: ProbeAt, out: Bracket, bounds: Bounds, repeats: int, walks: int = 3) -> None:
    """Each side of the boundary measured until it rests on ``repeats`` runs (alternated, so
    that drift in the machine's load hits both alike); a held side that most of its runs
    broke moves the boundary down a step, a broken side that most of its runs held moves it
    up, at most ``walks`` times. Nothing is measured once the engine died."""
    for _ in range(walks + 1):
        _top_up(probe, out, repeats)
        if out.dead:
            return
        held_ok, held_runs = out.runs(out.held) if out.held else (1, 1)
        broke_ok, broke_runs = out.runs(out.broke) if out.broke is not None else (0, 1)
        if 2 * held_ok <= held_runs:
            out.held, out.broke = _below(out.held, bounds), out.held
        elif 2 * broke_ok > broke_runs:
            assert out.broke is not None
            out.held, out.broke = out.broke, _above(out.broke, bounds)
        else:
            return
    out.stopped = f"the boundary still moved after {walks} steps: the noise is wider than a step"


def _top_up(probe: ProbeAt, out: Bracket, repeats: int) -> None:
    sides = [x for x in (out.held or None, out.broke) if x is not None]
    for i in range(repeats):
        for load in sides[::-1] if i % 2 else sides:
            if out.runs(load)[1] < repeats and not out.dead:
                out.probes.append(probe(load, "repeat"))


def _below(load: float, bounds: Bounds) -> float:
    """The step under ``load`` (0 below the floor: nothing held)."""
    step = load - 1 if bounds.integer else load / (1 + bounds.precision)
    return step if step >= bounds.floor else 0.0


def _above(load: float, bounds: Bounds) -> float | None:
    """The step over ``load`` (None above the ceiling: held at the bound)."""
    step = load + 1 if bounds.integer else load * (1 + bounds.precision)
    return step if step <= bounds.ceiling else None


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
