"""Stream smoothness: the longest wait a user had mid-answer, and how often waits were long.

A P99 ITL over tens of thousands of gaps hides a few hundred multi-second stalls (one large
prefill step holds every decode of its batch), and a TPOT averages a stall over the whole
answer. A user reading a stream sees the stall itself, so each tier also records:

- ``max_itl_ms``: the longest gap between two chunks of any request;
- ``p99.9_itl_ms``: the 99.9th percentile of the gaps (``vllm bench serve
  --metric-percentiles 99.9`` names it so); both rest on ``itl_samples`` gaps, and below
  1,000 gaps the p99.9 is the longest one (``objectives.tails``);
- ``long_gaps``: gaps longer than the workload's ``long_gap_s`` (default 1 s), all requests
  together; ``max_long_gaps``: the most one request met; ``long_gap_requests``: requests that
  met at least one; the three rest on ``completed`` requests.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np

from objectives.records import RequestRecord

LONG_GAP_S = 1.0  # the default: a second without a token reads as a stall, not a slow stream
GAP_KEYS = ("max_itl_ms", "p99.9_itl_ms", "long_gaps", "max_long_gaps", "long_gap_requests")


def gap_metrics(records: Sequence[RequestRecord], long_gap_s: float) -> dict[str, float | int]:
    """The smoothness figures of ``records`` (the completed requests of a tier or window)."""
    per_request = [[b - a for a, b in pairwise(r.chunk_times)] for r in records]
    gaps = np.asarray([g for req in per_request for g in req] or [0.0], dtype=float) * 1000.0
    long_counts = [sum(g > long_gap_s for g in req) for req in per_request]
    return {
        "max_itl_ms": float(gaps.max()),
        "p99.9_itl_ms": float(np.percentile(gaps, 99.9)),
        "long_gaps": int(sum(long_counts)),
        "max_long_gaps": int(max(long_counts, default=0)),
        "long_gap_requests": int(sum(n > 0 for n in long_counts)),
    }
