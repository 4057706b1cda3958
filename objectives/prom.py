"""Server-side counters per tier, from an engine's Prometheus ``/metrics`` text.

Snapshots are flat ``{name: value}`` dicts named as the server names its families (vLLM
``vllm:*``, llama.cpp ``llamacpp:*``), with a counter's ``_total`` suffix dropped, counters
summed over label sets (one per engine of a data-parallel server) and gauges reduced to their
largest label set. The same shape comes from a virtual engine's ``server_counters()``, so one
function turns a before / after pair (and gauge peaks sampled during the tier) into the tier's
figures. Figures a server does not expose are left out, not reported as zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client.parser import text_string_to_metric_families

# What a tier reports -> (numerator, denominator) counter deltas, first alias the server has.
_COUNTERS: dict[str, tuple[str, ...]] = {
    "num_preemptions": ("vllm:num_preemptions",),
    "prompt_tokens": ("vllm:prompt_tokens", "llamacpp:prompt_tokens"),
    "generation_tokens": ("vllm:generation_tokens", "llamacpp:tokens_predicted"),
}
_RATIOS: dict[str, tuple[str, str]] = {
    "prefix_cache_hit_rate": ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries"),
    "spec_decode_acceptance_rate": (
        "vllm:spec_decode_num_accepted_tokens",
        "vllm:spec_decode_num_draft_tokens",
    ),
}
_PEAKS: dict[str, tuple[str, ...]] = {
    "kv_cache_usage_peak": (
        "vllm:kv_cache_usage_perc",
        "vllm:gpu_cache_usage_perc",
        "llamacpp:kv_cache_usage_ratio",
    ),
    "num_requests_running_peak": ("vllm:num_requests_running", "llamacpp:requests_processing"),
    "num_requests_waiting_peak": ("vllm:num_requests_waiting", "llamacpp:requests_deferred"),
}
GAUGES = frozenset(name for names in _PEAKS.values() for name in names)


def parse(text: str) -> dict[str, float]:
    """A flat snapshot of a Prometheus text exposition (histogram buckets left out)."""
    out: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            name = sample.name
            if name.endswith(("_created", "_bucket")):
                continue
            if family.type == "counter" and name.endswith("_total"):
                name = name.removesuffix("_total")
            if family.type == "gauge":
                out[name] = max(out.get(name, sample.value), sample.value)
            else:
                out[name] = out.get(name, 0.0) + sample.value
    return out


def normalize(snapshot: Mapping[str, float]) -> dict[str, float]:
    """Drop a ``_total`` suffix so a virtual engine's names match parsed ones."""
    return {k.removesuffix("_total"): float(v) for k, v in snapshot.items()}


def tier_counters(
    before: Mapping[str, float],
    after: Mapping[str, float],
    peaks: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """The tier's figures from snapshots taken before and after it (and sampled gauge peaks)."""
    before, after = normalize(before), normalize(after)
    seen = dict(after)
    for name, value in (peaks or {}).items():
        seen[name] = max(seen.get(name, value), value)
    out: dict[str, float] = {}
    for key, names in _COUNTERS.items():
        counter = _first(names, after)
        if counter is not None:
            out[key] = after[counter] - before.get(counter, 0.0)
    for key, (num, den) in _RATIOS.items():
        if num in after and den in after:
            delta = after[den] - before.get(den, 0.0)
            if delta > 0:
                out[key] = (after[num] - before.get(num, 0.0)) / delta
    for key, names in _PEAKS.items():
        gauge = _first(names, seen)
        if gauge is not None:
            out[key] = seen[gauge]
    return out


def users_held(server: Mapping[str, float], concurrency: int) -> dict[str, float]:
    """``users_held``: how many of the tier's users the server never ran at once while
    requests waited (a seat or KV-cache limit queueing users, not a prefill budget that
    only delays some of them for a few steps). Left out when the server shows no gauges."""
    waiting = server.get("num_requests_waiting_peak")
    running = server.get("num_requests_running_peak")
    if waiting is None or running is None:
        return {}
    held = max(0.0, concurrency - running) if waiting > 0 else 0.0
    return {"users_held": held}


def gauge_peaks(samples: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """The largest value of each gauge over snapshots sampled during a tier."""
    out: dict[str, float] = {}
    for snap in samples:
        for name in GAUGES.intersection(snap):
            out[name] = max(out.get(name, snap[name]), snap[name])
    return out


def _first(names: tuple[str, ...], snapshot: Mapping[str, float]) -> str | None:
    return next((n for n in names if n in snapshot), None)
