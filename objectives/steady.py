"""The steady-state window of a tier: the stretch when all its streams were in flight.

A closed-loop tier opens with a ramp-up wave, its first ``concurrency`` requests sent at once
and prefilled behind each other, and closes with a drain: after the last arrival no stream is
refilled, and the last requests decode in an ever lighter batch. Both waves make TPOT, ITL and
throughput differ from the load the tier is named after, the more so the fewer requests a tier
sends. With ``workload.steady_state`` on, those figures cover the window between the waves:

- it opens at the first arrival after the ramp-up wave (arrival ``concurrency`` + 1) and
  closes at the last arrival, when the drain begins;
- TPOT and ITL are those of the completed requests sent after the ramp-up wave that finished
  before the drain: the requests the window holds (``steady_requests``);
- throughputs count what was prefilled, streamed or completed inside the window, by any
  request, over its length (``steady_window_s``): a request straddling an edge kept a stream
  busy inside it, and leaving its share out would understate the load the window carried.

TTFT, E2EL, token totals, the tier's duration and failures still cover the whole tier. A window
holding fewer requests than the tier has streams has not seen each stream turn over once: its
figures are left out and a note says why, rather than a figure made from a handful of requests.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from objectives.gaps import GAP_KEYS, LONG_GAP_S, gap_metrics
from objectives.metrics import (
    SLO,
    STATS,
    completed,
    input_tokens,
    itls,
    latency_metrics,
    meets_slos,
    rate,
    tpots,
)
from objectives.records import RequestRecord

_SERIES = ("tpot", "itl")
_RATES = ("request_throughput", "request_goodput", "output_throughput", "total_token_throughput")
# What the window replaces; everything else in a tier's metrics covers every request.
WINDOWED = (
    *_RATES,
    *(f"{s}_{m}_ms" for m in _SERIES for s in STATS),
    *(f"{m}_samples" for m in _SERIES),
    *GAP_KEYS,  # over the same gaps as the window's ITL, so they rest on its itl_samples
)


@dataclass(frozen=True)
class Window:
    """From the first arrival after the ramp-up wave to the last arrival (seconds)."""

    start: float = 0.0
    end: float = 0.0
    held: list[RequestRecord] = field(default_factory=list)  # completed, wholly inside

    @property
    def length(self) -> float:
        return max(0.0, self.end - self.start)

    def holds(self, t: float) -> bool:
        return self.start <= t <= self.end


def steady_window(records: Sequence[RequestRecord], concurrency: int) -> Window:
    """The window between a tier's ramp-up wave and its drain (empty when there is none)."""
    sent = sorted(records, key=lambda r: r.send_time)  # failed requests held a stream too
    if len(sent) <= concurrency:
        return Window()
    start, end = sent[concurrency].send_time, sent[-1].send_time
    held = [r for r in completed(sent[concurrency:]) if r.chunk_times[-1] <= end]
    return Window(start, end, held)


def windowed(
    metrics: Mapping[str, float | int],
    records: Sequence[RequestRecord],
    concurrency: int,
    slos: Sequence[SLO],
    long_gap_s: float = LONG_GAP_S,
) -> tuple[dict[str, float | int], list[str]]:
    """``metrics`` with TPOT, ITL and throughputs over the steady window, and any note."""
    w = steady_window(records, concurrency)
    out = {**metrics, "steady_requests": len(w.held), "steady_window_s": w.length}
    if len(w.held) < concurrency:
        return {k: v for k, v in out.items() if k not in WINDOWED}, [_short(w, concurrency)]
    out.update(latency_metrics({"tpot": tpots(w.held), "itl": itls(w.held)}))
    out.update(gap_metrics(w.held, long_gap_s))
    out.update(_rates(completed(records), w, slos))
    return out, []


def _rates(good: Sequence[RequestRecord], w: Window, slos: Sequence[SLO]) -> dict[str, float]:
    ended = [r for r in good if w.holds(r.chunk_times[-1])]
    prefilled = sum(input_tokens(r) for r in good if w.holds(r.chunk_times[0]))
    streamed = sum(_streamed(r, w) for r in good)
    return {
        "request_throughput": rate(len(ended), w.length),
        "request_goodput": rate(sum(meets_slos(r, slos) for r in ended), w.length),
        "output_throughput": rate(streamed, w.length),
        "total_token_throughput": rate(prefilled + streamed, w.length),
    }


def _streamed(r: RequestRecord, w: Window) -> float:
    # Tokens per chunk as the request averaged them: a chunk carries several with speculation.
    inside = sum(map(w.holds, r.chunk_times))
    return r.output_tokens * inside / len(r.chunk_times)


def _short(w: Window, concurrency: int) -> str:
    return (
        f"steady-state window holds {len(w.held)} requests, fewer than the tier's "
        f"{concurrency} streams: TPOT, ITL and throughputs not measured (a closed loop leaves "
        f"about num_prompts - 2 x concurrency between ramp-up and drain; send at least "
        f"{3 * concurrency})"
    )
