"""One tier's records turned into its ``TierResult``: the same code for HTTP and virtual time."""

from __future__ import annotations

from collections.abc import Sequence

from objectives import prom
from objectives.metrics import SLO, compute_metrics, count_failures, slo_violations
from objectives.records import RequestRecord
from objectives.result import TierResult
from objectives.steady import windowed
from objectives.workload import WorkloadSpec


def tier_duration(records: Sequence[RequestRecord]) -> float:
    """Last completion minus first send; a failed request ends at its last chunk or send."""
    if not records:
        return 0.0
    start = min(r.send_time for r in records)
    end = max(r.chunk_times[-1] if r.chunk_times else r.send_time for r in records)
    return max(0.0, end - start)


def tier_result(
    records: Sequence[RequestRecord],
    concurrency: int,
    workload: WorkloadSpec,
    slos: Sequence[SLO],
    server: dict[str, float],
    client: dict[str, float] | None = None,
    client_saturated: bool = False,
    duration_s: float | None = None,
) -> TierResult:
    """One tier's result from its records, by the one metrics function; with
    ``workload.steady_state``, TPOT, ITL and throughputs over its steady window only."""
    mine = [s for s in slos if s.applies_to(concurrency)]
    duration = tier_duration(records) if duration_s is None else duration_s
    metrics = compute_metrics(records, duration, mine, workload.long_gap_s)
    notes: list[str] = []
    if workload.steady_state:
        metrics, notes = windowed(metrics, records, concurrency, mine, workload.long_gap_s)
    return TierResult(
        concurrency=concurrency,
        metrics=metrics,
        failures=count_failures(records),
        server={**server, **prom.users_held(server, concurrency)},
        client_saturated=client_saturated,
        client=client or {},
        slo_violations=slo_violations(metrics, mine, concurrency),
        request_rate=workload.request_rate,
        burstiness=workload.burstiness,
        notes=notes,
    )
