"""Per-tier metrics from request records, defined exactly as ``vllm bench serve`` defines them.

TTFT, ITL (per chunk), E2EL and TPOT = (E2EL - TTFT) / (output_tokens - 1) for requests with
more than one output token; mean / median / std / p90 / p99 with numpy's defaults (linear
interpolation, population std); ITL over the flattened gaps of all requests; an empty list
counts as ``0`` as vLLM's ``np.mean(x or 0)`` does. Throughputs divide by the tier's duration.

One deliberate difference: a request that streamed but returned a token count other than the
one it asked for (``max_tokens`` + ``ignore_eos`` not honoured) is a failure with reason
``length not honoured`` instead of being averaged in, so every config is measured on the same
work. Failures are counted by reason; what a failure rate means is the objective's call.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from itertools import pairwise

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from objectives.gaps import GAP_KEYS, LONG_GAP_S, gap_metrics
from objectives.records import RequestRecord
from objectives.tails import tail_note

PERCENTILES = (90, 99)
LATENCIES = ("ttft", "tpot", "itl", "e2el")
STATS = ("mean", "median", "std", *(f"p{p}" for p in PERCENTILES))
LENGTH_NOT_HONOURED = "length not honoured"
COUNT_KEYS = ("completed", "failed", "total_input_tokens", "total_output_tokens")
RATE_KEYS = (
    "duration",
    "request_throughput",
    "request_goodput",
    "output_throughput",
    "total_token_throughput",
)
LATENCY_KEYS = tuple(f"{s}_{m}_ms" for m in LATENCIES for s in STATS)
# How many values each latency's figures rest on: completed requests for TTFT and E2EL, those
# with more than one output token for TPOT, inter-chunk gaps for ITL (objectives.tails).
SAMPLE_KEYS = tuple(f"{m}_samples" for m in LATENCIES)
# Stream smoothness (objectives.gaps): the longest gap, p99.9 ITL and gaps over a threshold.
METRIC_KEYS = (*COUNT_KEYS, *RATE_KEYS, *LATENCY_KEYS, *SAMPLE_KEYS, *GAP_KEYS)
# Set only with workload.steady_state (objectives.steady): requests the window holds, its length.
WINDOW_KEYS = ("steady_requests", "steady_window_s")
PER_REQUEST = ("ttft", "tpot", "e2el")  # what vllm's --goodput accepts, in ms


class SLO(BaseModel):
    """One service-level objective, from the ``slos:`` list of a space file.

    ``metric`` is either a per-request latency (``ttft``, ``tpot``, ``e2el``; in ms, as
    ``vllm bench serve --goodput``): a request is good when it meets every such SLO, which
    defines ``request_goodput``; or a per-tier key (``p99_ttft_ms``, ``output_throughput``...)
    that the tier's value must respect.
    """

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)  # a nan bound never fires

    metric: str = Field(description="ttft / tpot / e2el (per request, ms) or a per-tier key.")
    max: float | None = Field(None, description="Upper bound (ms for latencies).")
    min: float | None = Field(None, description="Lower bound (e.g. for output_throughput).")
    tiers: list[int] | None = Field(
        None, description="Concurrency tiers it applies to; all tiers when left out."
    )

    @model_validator(mode="after")
    def _check(self) -> SLO:
        if self.metric not in (*PER_REQUEST, *METRIC_KEYS, *WINDOW_KEYS):
            raise ValueError(
                f"slos[].metric {self.metric!r} is not one of {', '.join(PER_REQUEST)} "
                f"or a per-tier key such as p99_ttft_ms, output_throughput"
            )
        if self.max is None and self.min is None:
            raise ValueError(f"slos[] on {self.metric!r} needs max or min")
        if self.metric in PER_REQUEST and self.min is not None:
            raise ValueError(f"slos[] on per-request {self.metric!r} takes max only")
        return self

    @property
    def per_request(self) -> bool:
        return self.metric in PER_REQUEST

    def applies_to(self, concurrency: int) -> bool:
        return self.tiers is None or concurrency in self.tiers

    def violated_by(self, value: float) -> bool:
        too_high = self.max is not None and value > self.max
        return too_high or (self.min is not None and value < self.min)


def failure_reason(rec: RequestRecord) -> str | None:
    """Why a record does not count as completed (None when it does)."""
    if not rec.success:
        return rec.error or "unknown error"
    if rec.output_len > 0 and rec.output_tokens != rec.output_len:
        return LENGTH_NOT_HONOURED
    return None


def completed(records: Iterable[RequestRecord]) -> list[RequestRecord]:
    """The records that count as completed (``failure_reason`` is None), in order."""
    return [r for r in records if failure_reason(r) is None]


def count_failures(records: Sequence[RequestRecord]) -> dict[str, int]:
    """Failed requests by reason (``HTTP 400: <message>``, ``timeout``...), as merged."""
    reasons = (failure_reason(r) for r in records)
    return merge_failures([{r: 1} for r in reasons if r is not None])


def merge_failures(counts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Failure counts added up; reasons that differ only in numbers after their first ``: ``
    count under the first one seen, so ``HTTP 400: Token id 31991 is out of vocabulary`` and
    ``... 31987 ...`` are one line that still shows a server message verbatim."""
    merged: dict[str, int] = {}
    first: dict[str, str] = {}
    for part in counts:
        for reason, n in part.items():
            label = first.setdefault(_shape(reason), reason)
            merged[label] = merged.get(label, 0) + n
    return merged


def _shape(reason: str) -> str:
    head, sep, message = reason.partition(": ")
    return head + sep + re.sub(r"\d+", "#", message)


def compute_metrics(
    records: Sequence[RequestRecord],
    duration_s: float,
    slos: Sequence[SLO] = (),
    long_gap_s: float = LONG_GAP_S,
) -> dict[str, float | int]:
    """The ``vllm bench serve`` result keys of one tier (latencies in ms, rates per second),
    and its smoothness figures (``objectives.gaps``, gaps over ``long_gap_s`` counted).

    ``slos`` are the per-request SLOs of this tier (others are ignored here); with none,
    ``request_goodput`` equals ``request_throughput`` as every completed request is good.
    """
    good = completed(records)
    ttfts = [_ttft(r) for r in good]
    e2els = [_e2el(r) for r in good]
    n_in = sum(map(input_tokens, good))
    n_out = sum(r.output_tokens for r in good)
    n_good = sum(meets_slos(r, slos) for r in good)
    out: dict[str, float | int] = {
        "completed": len(good),
        "failed": len(records) - len(good),
        "total_input_tokens": n_in,
        "total_output_tokens": n_out,
        "duration": float(duration_s),
        "request_throughput": rate(len(good), duration_s),
        "request_goodput": rate(n_good, duration_s),
        "output_throughput": rate(n_out, duration_s),
        "total_token_throughput": rate(n_in + n_out, duration_s),
    }
    series = {"ttft": ttfts, "tpot": tpots(good), "itl": itls(good), "e2el": e2els}
    out.update(latency_metrics(series))
    out.update(gap_metrics(good, long_gap_s))
    return out


def latency_metrics(series: Mapping[str, Sequence[float]]) -> dict[str, float | int]:
    """Each latency's statistics (ms), then how many values each rests on (``*_samples``)."""
    out: dict[str, float | int] = {}
    for name, seconds in series.items():
        out.update(_stats(name, seconds))
    out.update({f"{name}_samples": len(seconds) for name, seconds in series.items()})
    return out


def tpots(records: Iterable[RequestRecord]) -> list[float]:
    """TPOT of each request with more than one output token, in seconds.

    vLLM keeps the 0.0 TPOT of a 1-token request for goodput only, not for the statistics."""
    return [t for r in records if (t := _tpot(r)) is not None]


def itls(records: Iterable[RequestRecord]) -> list[float]:
    """Every gap between successive chunks of every request, flattened, in seconds."""
    return [b - a for r in records for a, b in pairwise(r.chunk_times)]


def input_tokens(r: RequestRecord) -> int:
    """The server's count, as vllm bench serve takes it; the dataset's estimate where none came."""
    return r.prompt_tokens if r.prompt_tokens else r.prompt_len


def _ttft(r: RequestRecord) -> float:
    return r.chunk_times[0] - r.send_time


def _e2el(r: RequestRecord) -> float:
    return r.chunk_times[-1] - r.send_time


def _tpot(r: RequestRecord) -> float | None:
    if r.output_tokens <= 1:
        return None
    return (_e2el(r) - _ttft(r)) / (r.output_tokens - 1)


def meets_slos(r: RequestRecord, slos: Sequence[SLO]) -> bool:
    """Whether a completed request meets every per-request SLO (it counts toward goodput)."""
    values = {"ttft": _ttft(r), "tpot": _tpot(r) or 0.0, "e2el": _e2el(r)}
    return not any(s.violated_by(values[s.metric] * 1000) for s in slos if s.per_request)


def rate(count: float, duration_s: float) -> float:
    return count / duration_s if duration_s > 0 else 0.0


def _stats(name: str, seconds: Sequence[float]) -> dict[str, float]:
    arr = np.asarray(seconds if seconds else [0.0], dtype=float) * 1000.0
    out = {
        f"mean_{name}_ms": float(np.mean(arr)),
        f"median_{name}_ms": float(np.median(arr)),
        f"std_{name}_ms": float(np.std(arr)),
    }
    for p in PERCENTILES:
        out[f"p{p}_{name}_ms"] = float(np.percentile(arr, p))
    return out


def slo_violations(
    metrics: dict[str, float | int], slos: Sequence[SLO], concurrency: int
) -> list[str]:
    """Per-tier SLOs this tier breaks, as readable lines (``p99_ttft_ms 812 (n=250) > 500.0``)."""
    out = []
    for s in slos:
        if s.per_request or not s.applies_to(concurrency):
            continue
        if s.metric not in metrics:  # left out (a short steady window): no figure meets it
            out.append(f"{s.metric} not measured")
            continue
        value = float(metrics[s.metric])
        if s.violated_by(value):
            bound = f"> {s.max}" if s.max is not None and value > s.max else f"< {s.min}"
            note = tail_note(s.metric, metrics)
            out.append(f"{s.metric} {value:.4g}{f' ({note})' if note else ''} {bound}")
    return out
