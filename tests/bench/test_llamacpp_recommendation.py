"""The llama.cpp recommendation bench's table: who wins beyond the spread, and who held users."""

from __future__ import annotations

from bench.llamacpp_recommendation import Samples, compare, interleaved, report
from objectives.objective import get_objective


def test_a_win_needs_the_whole_range_better_and_higher_throughput_is_better() -> None:
    assert compare("p99_tpot_ms", [9.0, 10.0], [11.0, 12.0]).endswith(
        "recommended better beyond spread"
    )
    assert compare("p99_tpot_ms", [9.0, 11.5], [11.0, 12.0]).endswith("within spread")
    assert compare("output_throughput", [300.0, 310.0], [340.0, 350.0]).endswith(
        "default better beyond spread"
    )


def test_report_names_the_users_each_server_held_back() -> None:
    """The defaults' 4 slots at 8 users: their TPOT covers the seated users only, so the table
    says how many each server held next to it."""
    rec = Samples("recommended", {"parallel": 8})
    base = Samples("default", {"parallel": -1})
    rec.values = {
        "p99_tpot_ms": [15.0, 16.0],
        "median_ttft_ms": [210.0, 220.0],
        "users_held": [0.0, 0.0],
    }
    base.values = {
        "p99_tpot_ms": [11.0, 12.0],
        "median_ttft_ms": [300.0, 320.0],
        "users_held": [4.0, 4.0],
    }
    text = report(rec, base, 8, get_objective("p99_tpot"))
    assert "users held of 8: recommended 0 [0 - 0], default 4 [4 - 4]" in text
    ttft = next(line for line in text.splitlines() if line.startswith("median_ttft_ms"))
    assert ttft.endswith("recommended better beyond spread")


def test_runs_alternate_which_config_goes_first() -> None:
    a, b = Samples("a", {}), Samples("b", {})
    assert [s.label for s in interleaved(3, a, b)] == ["a", "b", "b", "a", "a", "b"]
