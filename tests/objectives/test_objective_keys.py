"""Every objective a study can optimise reads a key that ``compute_metrics`` produces.

An objective naming a key the metrics never hold would make every trial of such a study read
nothing; this catches it on a handful of synthetic records, whichever objective is added.
"""

from __future__ import annotations

import math

import pytest

from objectives.metrics import compute_metrics
from objectives.objective import OBJECTIVES
from objectives.records import RequestRecord


def records() -> list[RequestRecord]:
    # Streams of different lengths and pace, plus one failure, so no statistic is degenerate.
    out = []
    for i in range(5):
        send = 0.1 * i
        chunks = [send + 0.05 + 0.01 * (i + 1) * k for k in range(4 + i)]
        out.append(RequestRecord(20 + i, len(chunks), send, chunks, len(chunks), success=True))
    out.append(RequestRecord(20, 4, 0.2, success=False, error="HTTP 500: boom"))
    return out


@pytest.mark.parametrize("name", list(OBJECTIVES))
def test_objective_key_is_a_computed_metric(name: str) -> None:
    metrics = compute_metrics(records(), duration_s=1.0)
    key = OBJECTIVES[name].key
    assert key in metrics, f"objective {name!r} reads {key!r}, which compute_metrics never sets"
    assert math.isfinite(metrics[key])
