"""What ``tune bench`` prints: one row per tier in vLLM's names, then each failure in full.

Each p99 is followed by the count it rests on (``objectives.tails``): ``812.3 (max of 20)``
where fewer than 100 values leave it the slowest request, else ``812.3 (n=250)``. A figure a
tier left out (a steady-state window too short to measure) reads ``-``.
"""

from __future__ import annotations

from collections.abc import Mapping

from rich.table import Table
from rich.text import Text

from objectives.result import TierResult
from objectives.tails import tail_note

COLUMNS = (
    "conc",
    "ok",
    "failed",
    "req/s",
    "out tok/s",
    "TTFT p50",
    "TTFT p99",
    "TPOT p50",
    "TPOT p99",
    "ITL p99",
    "flags",
)
LATENCIES = ("median_ttft_ms", "p99_ttft_ms", "median_tpot_ms", "p99_tpot_ms", "p99_itl_ms")


def summary_rows(results: list[TierResult]) -> list[list[str]]:
    """The table's cells, one row per tier, as plain text."""
    return [_row(r) for r in results]


def summary_table(results: list[TierResult]) -> Table:
    """One row per tier, the figures users compare, in vLLM's names."""
    table = Table(title="tune bench")
    for col in COLUMNS:
        table.add_column(col, justify="right" if col != "flags" else "left")
    for row in summary_rows(results):
        table.add_row(*row[:-1], Text(row[-1]))  # server messages are not rich markup
    return table


def failure_lines(results: list[TierResult]) -> list[str]:
    """Each tier's failure reasons in full (the table's flags column wraps them)."""
    return [
        f"c{r.concurrency}: {n} failed: {reason}"
        for r in results
        for reason, n in r.failures.items()
    ]


def note_lines(results: list[TierResult]) -> list[str]:
    """Why a tier left figures out (a steady-state window too short to measure)."""
    return [f"c{r.concurrency}: {note}" for r in results for note in r.notes]


def _row(r: TierResult) -> list[str]:
    m = r.metrics
    flags = [f"{k}: {v}" for k, v in r.failures.items()]
    if r.client_saturated:
        flags.insert(0, "CLIENT-SATURATED")
    return [
        str(r.concurrency),
        str(m["completed"]),
        str(m["failed"]),
        _num(m, "request_throughput", ".2f"),
        _num(m, "output_throughput", ".1f"),
        *(_num(m, k, ".1f") for k in LATENCIES),
        ", ".join(flags),
    ]


def _num(m: Mapping[str, float | int], key: str, fmt: str) -> str:
    if key not in m:
        return "-"
    note = tail_note(key, m)
    return format(m[key], fmt) + (f" ({note})" if note else "")
