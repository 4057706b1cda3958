"""The client watching itself: when was a tier limited by the client rather than the server?

A probe task measures event-loop delay, and each open-loop send is compared with its scheduled
time. When those lags are large enough to distort the timestamps, the tier is marked
``client_saturated``: the client, not the server, limited it. Only timestamps of streams that
produced tokens can be distorted, so only they are judged: lag and CPU are counted while such a
stream was in flight, send lag for such requests, and a tier where no stream produced a token
(every request refused at once) is never client-saturated. A closed loop of instant refusals
keeps the client busy, but it measures nothing.
"""

from __future__ import annotations

import asyncio
import resource
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from time import perf_counter

import numpy as np

from objectives.records import RequestRecord

# The client limits a tier when it is busy nearly all the time (CPU of this process over the
# tier's wall time), when open-loop sends miss their schedule, or when its event loop runs so
# late that chunks merge: reads carry the kernel's receive time, so a delay shorter than the gap
# between two chunks costs nothing, but at half the tier's median ITL (5 ms at least) in its
# p99, one read in a hundred is close to swallowing the next chunk and the ITL tail moves.
SATURATED_CPU_SHARE = 0.85
# CPU share is judged over at least this much streaming: over a few milliseconds (an engine
# that died after its first tokens) it is one burst of parsing, which distorts no timestamp.
SATURATED_CPU_MIN_S = 0.5
SATURATED_SEND_LAG_MS = 50.0  # p99
SATURATED_GAP_SHARE = 0.5  # p99 loop lag over median ITL
SATURATED_LAG_FLOOR_MS = 5.0
_PROBE_S = 0.005


@dataclass
class ClientLag:
    """What the client measured about itself during one tier (``drive``: only while a stream
    that produced tokens was in flight; ``wall_s`` is how long that was)."""

    loop_lag_s: list[float] = field(default_factory=list)
    send_lag_s: list[float] = field(default_factory=list)
    cpu_s: float = 0.0
    wall_s: float = 0.0
    workers: int = 1  # client processes the figures come from
    # Page faults the event loop's thread waited on the disk for: a loop that is late with
    # little CPU was kept off its core, or waited for pages the kernel had taken back.
    major_faults: int = 0
    # The machine's CPU time its hypervisor gave to other guests over the tier (``Steal``):
    # a virtual CPU taken away wakes the loop late whatever runs on this machine.
    steal_share: float = 0.0

    def summary(self) -> dict[str, float]:
        busy = self.cpu_s / (self.wall_s * self.workers) if self.wall_s else 0.0
        out: dict[str, float] = {"cpu_share": busy, "workers": float(self.workers)}
        out["counted_s"] = self.wall_s
        out["major_faults"] = float(self.major_faults)
        out["steal_share"] = self.steal_share
        for name, values in (("loop_lag", self.loop_lag_s), ("send_lag", self.send_lag_s)):
            arr = np.asarray(values or [0.0]) * 1000
            out[f"p50_{name}_ms"] = float(np.percentile(arr, 50))
            out[f"p99_{name}_ms"] = float(np.percentile(arr, 99))
            out[f"max_{name}_ms"] = float(arr.max())
        return out

    def saturated(self, median_itl_ms: float = 0.0, lag_limit_ms: float | None = None) -> bool:
        """Whether the client, not the server, limited a tier whose median ITL was this.

        ``lag_limit_ms`` (a workload's ``client_lag_limit_ms``) replaces the gap-based limit on
        the p99 loop lag.
        """
        s = self.summary()
        late = lag_limit_ms or max(SATURATED_LAG_FLOOR_MS, SATURATED_GAP_SHARE * median_itl_ms)
        busy = s["cpu_share"] > SATURATED_CPU_SHARE and self.wall_s >= SATURATED_CPU_MIN_S
        return busy or s["p99_send_lag_ms"] > SATURATED_SEND_LAG_MS or s["p99_loop_lag_ms"] > late


# Wake time, loop lag, CPU s, wall s and major page faults since the last sample.
Sample = tuple[float, float, float, float, int]
# The event loop's own thread, where the kernel can tell threads apart.
_WHO = getattr(resource, "RUSAGE_THREAD", resource.RUSAGE_SELF)


class Steal:
    """The share of this machine's CPU time stolen by its hypervisor from ``__init__`` until
    ``share()`` (0.0 off Linux, and on a host of its own, whose kernel counts no steal)."""

    def __init__(self) -> None:
        self._start = _cpu_times()

    def share(self) -> float:
        now = _cpu_times()
        total = sum(now) - sum(self._start)
        stolen = now[7] - self._start[7] if len(now) > 7 and len(self._start) > 7 else 0
        return stolen / total if total > 0 else 0.0


def _cpu_times() -> list[int]:
    # /proc/stat's first line: user nice system idle iowait irq softirq steal ..., in ticks.
    try:
        with open("/proc/stat") as f:
            return [int(x) for x in f.readline().split()[1:]]
    except (OSError, ValueError):
        return []


def _faults() -> int:
    return resource.getrusage(_WHO).ru_majflt


async def probe_loop(out: list[Sample]) -> None:
    """Append a ``Sample`` every few milliseconds until cancelled."""
    # A sleeper that wakes late measures how long other callbacks held the event loop; the
    # CPU time of each interval lets CPU share be counted over chosen intervals only.
    t, cpu, faults = perf_counter(), time.process_time(), _faults()
    while True:
        await asyncio.sleep(_PROBE_S)
        now, cpu_now, faults_now = perf_counter(), time.process_time(), _faults()
        lag = max(0.0, now - t - _PROBE_S)
        out.append((now, lag, cpu_now - cpu, now - t, faults_now - faults))
        t, cpu, faults = now, cpu_now, faults_now


def counted_lag(
    records: Sequence[RequestRecord | None],
    samples: Sequence[Sample],
    send_lag: Mapping[int, float],
) -> ClientLag:
    """The client's figures over the intervals when a stream that produced tokens was in
    flight (``records`` and ``send_lag`` by request index: only such requests' sends count)."""
    streamed = [r for r in records if r is not None and r.chunk_times]
    starts, ends = _token_spans(streamed)
    kept = [s for s in samples if _overlaps(s[0] - s[3], s[0], starts, ends)]
    return ClientLag(
        loop_lag_s=[s[1] for s in kept],
        send_lag_s=[v for i, v in send_lag.items() if (r := records[i]) and r.chunk_times],
        cpu_s=float(sum(s[2] for s in kept)),
        wall_s=float(sum(s[3] for s in kept)),
        major_faults=sum(s[4] for s in kept),
    )


def _token_spans(streamed: Sequence[RequestRecord]) -> tuple[np.ndarray, np.ndarray]:
    # Send to last chunk of every stream that produced tokens, merged into disjoint spans.
    spans = sorted((r.send_time, r.chunk_times[-1]) for r in streamed)
    merged: list[list[float]] = []
    for a, b in spans:
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    arr = np.asarray(merged, dtype=float).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def _overlaps(a: float, b: float, starts: np.ndarray, ends: np.ndarray) -> bool:
    i = int(np.searchsorted(starts, b, side="right")) - 1
    return i >= 0 and ends[i] >= a


def client_limited(
    records: Sequence[RequestRecord], lag: ClientLag, median_itl_ms: float, limit: float | None
) -> bool:
    """``lag.saturated``, but never for a tier where no stream produced a token."""
    return any(r.chunk_times for r in records) and lag.saturated(median_itl_ms, limit)
