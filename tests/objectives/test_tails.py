"""What a tail figure rests on: its count, and "max of N" where the percentile is the maximum."""

from __future__ import annotations

import numpy as np

from objectives.tails import percentile, rests_on, samples_key, tail_note, with_counts


def test_a_percentile_over_too_few_values_is_their_maximum() -> None:
    # Fewer than 100 values leave less than one above a p99 (10 for a p90).
    assert rests_on(99, 20) == "max of 20" and rests_on(99, 99) == "max of 99"
    assert rests_on(99, 100) == "n=100" and rests_on(99, 2500) == "n=2500"
    assert rests_on(90, 9) == "max of 9" and rests_on(90, 10) == "n=10"
    assert rests_on(99, 0) == "no values"
    values = np.arange(20.0)  # numpy's interpolated p99 of 20 values sits at the top one
    assert np.percentile(values, 99) > values[-2]


def test_each_figure_names_the_count_it_rests_on() -> None:
    assert samples_key("p99_tpot_ms") == "tpot_samples"
    assert samples_key("median_itl_ms") == "itl_samples"
    assert samples_key("output_throughput") is None and samples_key("p99_send_lag_ms") is None
    assert percentile("p90_ttft_ms") == 90 and percentile("median_ttft_ms") is None
    assert with_counts(["p99_tpot_ms", "median_tpot_ms", "output_throughput"]) == (
        "p99_tpot_ms",
        "median_tpot_ms",
        "output_throughput",
        "tpot_samples",
    )


def test_a_note_only_for_a_percentile_whose_count_is_known() -> None:
    metrics = {"tpot_samples": 60, "ttft_samples": 400.0}
    assert tail_note("p99_tpot_ms", metrics) == "max of 60"
    assert tail_note("p99_ttft_ms", metrics) == "n=400"
    assert tail_note("median_tpot_ms", metrics) is None
    assert tail_note("p99_itl_ms", metrics) is None  # a record from before counts were kept
