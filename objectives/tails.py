"""How many values a tail figure rests on, and when a percentile is only the slowest value.

A p-th percentile says that (100 - p)% of the values lie above it. Over fewer than
100 / (100 - p) values (100 for a p99, 10 for a p90) that share is less than one value, and
numpy's interpolated percentile lies between the two largest: the figure tells what the slowest
request did, not what one request in a hundred does. Wherever a p90 or p99 is shown, its count
is shown beside it (``n=250``), and ``max of 20`` below that bound.

Counts are the ``*_samples`` keys of a tier's metrics (``objectives.metrics.SAMPLE_KEYS``);
this module imports nothing of the metrics, so they can note their own SLO lines.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

# A latency figure's key and the count beside it: p99_tpot_ms rests on tpot_samples. The
# metrics own which latencies exist; a figure whose count a tier lacks simply gets no note.
# The longest value (max_itl_ms) and a fractional percentile (p99.9_itl_ms) rest on it too.
_FIGURE = re.compile(r"(?:mean|median|std|max|p(\d+(?:\.\d+)?))_([a-z0-9]+)_ms")
_SAMPLES = "_samples"


def samples_key(key: str) -> str | None:
    """The count a latency figure rests on: ``p99_tpot_ms`` -> ``tpot_samples``; else None."""
    m = _FIGURE.fullmatch(key)
    return f"{m[2]}{_SAMPLES}" if m else None


def percentile(key: str) -> float | None:
    """``p99_tpot_ms`` -> 99, ``p99.9_itl_ms`` -> 99.9; None for a figure that is not one."""
    m = _FIGURE.fullmatch(key)
    return float(m[1]) if m and m[1] else None


def is_count(key: str) -> bool:
    """Whether a metric counts the values a figure rests on (pooled as the fewest of any
    launch, not averaged: a pooled p99 is no surer than its thinnest launch)."""
    return key.endswith(_SAMPLES)


def is_maximum(p: float, n: int) -> bool:
    """Whether the p-th percentile of ``n`` values has less than one value above it."""
    return n * (100 - p) < 100 - 1e-9  # 1000 values hold exactly one above their p99.9


def rests_on(p: float, n: int) -> str:
    """``max of 20`` where the p-th percentile is the maximum of its values, else ``n=250``."""
    if n <= 0:
        return "no values"
    return f"max of {n}" if is_maximum(p, n) else f"n={n}"


def tail_note(key: str, metrics: Mapping[str, Any]) -> str | None:
    """What a shown percentile rests on (``max of 20``); None for other figures or no count."""
    p, count = percentile(key), samples_key(key)
    n = metrics.get(count) if count else None
    if p is None or not isinstance(n, int | float):
        return None
    return rests_on(p, int(n))


def with_counts(keys: Iterable[str]) -> tuple[str, ...]:
    """``keys`` followed by the count each latency figure among them rests on."""
    keys = tuple(keys)
    counts = (c for k in keys if (c := samples_key(k)) is not None)
    return tuple(dict.fromkeys((*keys, *counts)))
