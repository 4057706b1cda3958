"""Scenario 2's workload readings: what each one sends, and the facts a draw is scored on."""

from __future__ import annotations

from collections import Counter
from types import ModuleType


def test_every_reading_sends_each_prompt_three_times_with_two_short_answers(
    s2r: ModuleType,
) -> None:
    for reading in s2r.readings():
        work = reading.workload(0)
        assert len(work) == 60
        assert set(Counter(r.prefix_key for r in work).values()) == {3}
        assert all(r.prefix_len == r.prompt_len and r.prompt_len >= 50_000 for r in work)
        short = 6 if reading.outputs == "per-prompt" else 2  # per prompt: all 3 sends
        assert sum(r.output_len < 8 for r in work) == short
        assert max(r.output_len for r in work) <= reading.cap


def test_orders_and_output_modes_differ_as_named(s2r: ModuleType) -> None:
    keys = {o: [r.prefix_key for r in s2r.Reading(o, "per-request", 1500).workload(0)]
            for o in s2r.ORDERS}  # fmt: skip
    assert keys["in-a-row"][:3] == ["doc0"] * 3
    assert keys["rounds"][:3] == ["doc0", "doc1", "doc2"]
    assert keys["shuffled"] != keys["in-a-row"] and sorted(keys["shuffled"]) == sorted(
        keys["rounds"]
    )
    greedy = s2r.Reading("in-a-row", "per-prompt", 1500).workload(0)
    assert all(
        len({r.output_len for r in greedy if r.prefix_key == f"doc{k}"}) == 1 for k in range(20)
    )


def test_a_draw_is_scored_on_the_published_facts(s2r: ModuleType) -> None:
    out = s2r.draw_outcome(s2r.Reading("in-a-row", "per-request", 1500), 0, 0)
    assert set(out) == {
        "c20 small best P99",
        "c4 large best median",
        "large P99 within 25%",
        "medium P99 within 25%",
        "all five figures",
    }
    assert all(isinstance(v, bool) for v in out.values())
    assert s2r.near(2271 * 1.1, 2271) and not s2r.near(2271 * 0.8, 2271)
    assert s2r.near(2271 * 0.8, 2271, s2r.P99_TOLERANCE)  # a P99's bar is 25 %
