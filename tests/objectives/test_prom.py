from __future__ import annotations

import pytest

from objectives import prom
from objectives.prom import users_held

VLLM = """# HELP vllm:num_preemptions_total Cumulative preemptions.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{engine="0",model_name="m"} 3.0
vllm:num_preemptions_total{engine="1",model_name="m"} 2.0
vllm:num_preemptions_created{engine="0",model_name="m"} 1.7e9
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{engine="0"} 1000.0
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{engine="0"} 250.0
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0"} 0.25
vllm:kv_cache_usage_perc{engine="1"} 0.75
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total 30
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total 40
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1"} 1.0
vllm:time_to_first_token_seconds_bucket{le="+Inf"} 2.0
vllm:time_to_first_token_seconds_count 2.0
vllm:time_to_first_token_seconds_sum 0.3
"""

LLAMA = """# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 120
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total 64
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 3
"""


def test_parse_sums_counters_and_keeps_largest_gauge() -> None:
    snap = prom.parse(VLLM)
    assert snap["vllm:num_preemptions"] == 5.0
    assert snap["vllm:kv_cache_usage_perc"] == 0.75
    assert snap["vllm:time_to_first_token_seconds_count"] == 2.0
    assert not any(k.endswith(("_created", "_bucket")) for k in snap)


def test_tier_counters_from_before_and_after() -> None:
    before = prom.parse(VLLM)
    after = dict(before)
    after.update(
        {
            "vllm:num_preemptions": 9.0,
            "vllm:prefix_cache_queries": 1400.0,
            "vllm:prefix_cache_hits": 550.0,
            "vllm:kv_cache_usage_perc": 0.1,
            "vllm:spec_decode_num_accepted_tokens": 60.0,
            "vllm:spec_decode_num_draft_tokens": 80.0,
        }
    )
    peaks = prom.gauge_peaks([{"vllm:kv_cache_usage_perc": 0.5}, {"vllm:kv_cache_usage_perc": 0.9}])
    got = prom.tier_counters(before, after, peaks)
    assert got == {
        "num_preemptions": 4.0,
        "prefix_cache_hit_rate": pytest.approx(0.75),
        "spec_decode_acceptance_rate": pytest.approx(0.75),
        "kv_cache_usage_peak": 0.9,
    }


def test_llama_cpp_names_and_absent_figures() -> None:
    after = prom.parse(LLAMA)
    got = prom.tier_counters({"llamacpp:prompt_tokens": 20.0}, after)
    assert got == {
        "prompt_tokens": 100.0,
        "generation_tokens": 64.0,
        "num_requests_running_peak": 3.0,
    }


def test_virtual_names_with_total_suffix_match() -> None:
    got = prom.tier_counters(
        {"vllm:prefix_cache_queries_total": 0.0},
        {"vllm:prefix_cache_queries_total": 10.0, "vllm:prefix_cache_hits_total": 5.0},
    )
    assert got == {"prefix_cache_hit_rate": 0.5}


def test_no_queries_means_no_hit_rate() -> None:
    assert (
        prom.tier_counters({}, {"vllm:prefix_cache_queries": 0.0, "vllm:prefix_cache_hits": 0.0})
        == {}
    )


def test_users_held_counts_users_that_never_got_a_seat_while_others_waited() -> None:
    seats = {"num_requests_waiting_peak": 12.0, "num_requests_running_peak": 4.0}
    budget = {"num_requests_waiting_peak": 12.0, "num_requests_running_peak": 16.0}
    idle = {"num_requests_waiting_peak": 0.0, "num_requests_running_peak": 3.0}
    assert users_held(seats, 16) == {"users_held": 12.0}
    assert users_held(budget, 16) == {"users_held": 0.0}  # waited for prefill, all ran at once
    assert users_held(idle, 16) == {"users_held": 0.0}  # fewer users came than the tier allows
    assert users_held({"num_preemptions": 3.0}, 16) == {}  # no gauges: nothing is claimed
