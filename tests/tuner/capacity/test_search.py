"""Bracketing, bisection and the settled boundary, against probes whose truth is known."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tuner.capacity.search import Bounds, Bracket, search, settle
from tuner.storage.capacity import Probe


class Threshold:
    """Holds up to ``limit``; ``flaky`` loads hold on the listed runs only (1-based)."""

    def __init__(self, limit: float, flaky: dict[float, set[int]] | None = None) -> None:
        self.limit, self.flaky = limit, flaky or {}
        self.loads: list[float] = []

    def __call__(self, load: float, phase: str) -> Probe:
        self.loads.append(load)
        ok = load <= self.limit
        if load in self.flaky:
            ok = self.loads.count(load) in self.flaky[load]
        return Probe(load, ok, 2 * int(load), phase, broke=[] if ok else ["p99_ttft_ms > 2000"])


def users(ceiling: float = 256, steps: int = 16, start: float = 1) -> Bounds:
    return Bounds(start, 1, ceiling, True, steps)


def test_doubles_then_bisects_to_neighbouring_integers() -> None:
    probe = Threshold(37)
    out = search(probe, users())
    assert (out.held, out.broke) == (37, 38) and out.exact(users())
    assert probe.loads[:7] == [1, 2, 4, 8, 16, 32, 64]  # doubled to the first break
    assert out.steps == len(probe.loads) <= 7 + 5  # then log2(64 - 32) halvings at most


@pytest.mark.parametrize(("limit", "held", "broke"), [(0, 0, 1), (300, 256, None), (1, 1, 2)])
def test_the_floor_and_the_ceiling_bound_the_answer(
    limit: float, held: float, broke: float | None
) -> None:
    out = search(Threshold(limit), users())
    assert (out.held, out.broke) == (held, broke) and out.exact(users())


def test_a_start_that_breaks_halves_down_to_one_that_holds() -> None:
    probe = Threshold(5)
    out = search(probe, users(start=40))
    assert probe.loads[:4] == [40, 20, 10, 5] and (out.held, out.broke) == (5, 6)


def test_the_step_budget_stops_the_search_and_says_so() -> None:
    out = search(Threshold(37), users(steps=8))
    assert out.steps == 8 and out.stopped and "step budget" in out.stopped
    assert out.held < 37 < (out.broke or 0) and not out.exact(users())


def test_a_rate_is_bisected_to_within_the_precision() -> None:
    bounds = Bounds(1.0, 1 / 64, 64.0, False, 20, precision=0.05)
    out = search(Threshold(3.3), bounds)
    assert out.broke is not None and out.held <= 3.3 < out.broke <= out.held * 1.05


def test_an_engine_that_dies_stops_the_search_where_it_died() -> None:
    def probe(load: float, phase: str) -> Probe:
        return Probe(load, load < 16, 1, phase, broke=["the engine died"], fatal=load >= 16)

    out = search(probe, users())
    assert (out.held, out.broke) == (8, 16) and out.stopped == "stopped at 16: the engine died"
    settle(probe, out, users(), repeats=3)
    assert [p.load for p in out.probes] == [1, 2, 4, 8, 16]  # nothing measured a dead engine


def settled(probe: Callable[[float, str], Probe], repeats: int = 3) -> Bracket:
    out = search(probe, users())
    settle(probe, out, users(), repeats)
    return out


def test_each_side_of_the_boundary_rests_on_its_repeats_alternated() -> None:
    out = settled(probe := Threshold(37))
    assert (out.held, out.broke) == (37, 38)
    assert out.runs(37) == (3, 3) and out.runs(38) == (0, 3)
    assert probe.loads[-4:] == [37, 38, 38, 37]


def test_a_lucky_run_below_the_boundary_moves_it_down() -> None:
    # 37 held in its search run only: most of its runs broke, so 36 is the answer.
    out = settled(Threshold(36, flaky={37: {1}}))
    assert (out.held, out.broke) == (36, 37)
    assert out.runs(36) == (3, 3) and out.runs(37) == (1, 3)


def test_an_unlucky_run_above_the_boundary_moves_it_up() -> None:
    # 38 broke in the search's run only, which stopped the bisection at 37; 39 is the truth.
    out = settled(Threshold(39, flaky={38: {2, 3}}))
    assert [p.load for p in out.probes if p.phase == "bisect"][-2:] == [38, 37]
    assert (out.held, out.broke) == (39, 40)
    assert out.runs(38) == (2, 3) and out.runs(39) == (3, 3) and out.runs(40) == (0, 3)


def test_a_break_far_below_the_boundary_is_searched_past() -> None:
    # One bad run at 2 (a busy machine) closed the bracket at 1; the truth is 20.
    out = settled(probe := Threshold(20, flaky={2: {2, 3}}))
    assert (out.held, out.broke) == (20, 21) and out.stopped is None
    assert [p.load for p in out.probes if p.phase == "gallop"][:5] == [3, 4, 6, 10, 18]
    assert out.runs(20)[0] >= 2 and out.runs(21)[0] <= 1 and len(probe.loads) < 40


def test_noise_wider_than_the_walks_is_said() -> None:
    coin = Threshold(0, flaky={n: {2, 3} for n in range(1, 300)})  # every load: 1 of 3 broke
    out = settled(coin)
    assert out.stopped and "noise is wider than a step" in out.stopped
