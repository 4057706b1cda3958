"""``/metrics`` in Prometheus text format, with vLLM's metric names and help texts."""

from __future__ import annotations

from collections.abc import Mapping

_HELP = {
    "vllm:num_preemptions": "Cumulative number of preemption from the engine.",
    "vllm:prefix_cache_queries": "Prefix cache queries, in terms of number of queried tokens.",
    "vllm:prefix_cache_hits": "Prefix cache hits, in terms of number of cached tokens.",
    "vllm:prompt_tokens": "Number of prefill tokens processed.",
    "vllm:generation_tokens": "Number of generation tokens processed.",
    "vllm:request_success": "Count of successfully processed requests.",
    "vllm:spec_decode_num_drafts": "Number of spec decoding drafts.",
    "vllm:spec_decode_num_draft_tokens": "Number of draft tokens.",
    "vllm:spec_decode_num_accepted_tokens": "Number of accepted tokens.",
    "vllm:kv_cache_usage_perc": "KV-cache usage. 1 means 100 percent usage.",
    "vllm:num_requests_running": "Number of requests in model execution batches.",
    "vllm:num_requests_waiting": "Number of requests waiting to be processed.",
}
GAUGES = {"vllm:kv_cache_usage_perc", "vllm:num_requests_running", "vllm:num_requests_waiting"}


def prometheus_text(values: Mapping[str, float], model: str) -> str:
    """One family per value: counters get vLLM's ``_total`` suffix, gauges stay as named."""
    labels = f'{{engine="0",model_name="{model}"}}'
    lines = []
    for name, value in values.items():
        kind = "gauge" if name in GAUGES else "counter"
        full = name if kind == "gauge" else f"{name}_total"
        lines.append(f"# HELP {full} {_HELP.get(name, name)}")
        lines.append(f"# TYPE {full} {kind}")
        lines.append(f"{full}{labels} {float(value)}")
    return "\n".join(lines) + "\n"
