"""Racing a tier: stop measuring a launch once it is out of contention there.

Every launch of a study sends a tier the same prompts in the same order, so request ``i`` of a
launch and request ``i`` of the tier's incumbent (the best launch measured there in full) are a
pair. As a launch's requests complete, the pairs are tested (Wilcoxon signed-rank, one-sided,
normal approximation with ties): once the launch's requests are slower than the incumbent's by
more than ``margin`` with confidence ``1 - alpha``, and its objective over the requests it has
served is already worse than the incumbent's by that margin (``out_of_contention``), the tier
stops. The rest of its requests would only make a loser's figure exact (F-Race, irace and
SMAC's intensification race configurations the same way).

A tier also stops as soon as it has missed an SLO on a longest figure (``CEILINGS``): once one
request met a 2.5 s gap, the tier's longest gap is past a 2 s limit whatever the rest do, and a
tier that missed an SLO is never a pick there. No test is needed for that: a maximum only grows.

A tier stopped so rests on fewer requests than the space asks for: ``decided_after`` records
how many, and scoring never makes such a tier a pick or a front point (``tuner.score``).

Only latencies a request has on its own race (``SERIES``): a throughput is the whole tier's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise

import numpy as np

from objectives.metrics import failure_reason
from objectives.records import RequestRecord

# The per-request series an objective's key is a statistic of (seconds, request order).
SERIES = {"tpot": "tpot", "itl": "tpot", "ttft": "ttft", "e2el": "e2el"}
END = "end"  # seconds from the tier's first send until the request ended
# SLO metrics that are a tier's maximum over its requests, and the per-request series (seconds)
# whose maximum they are: a tier with one request past the limit has missed the SLO.
CEILINGS = {"max_itl_ms": "max_gap"}


def series_of(key: str) -> str | None:
    """The per-request series behind an objective key (``p99_tpot_ms``: ``tpot``), or None
    when the key is the tier's as a whole (a throughput), which cannot be raced."""
    parts = key.split("_")
    return SERIES.get(parts[1]) if len(parts) == 3 and parts[2] == "ms" else None


def statistic(key: str, values: Sequence[float]) -> float:
    """The objective's statistic (``p99``, ``median``, ``mean``) of per-request seconds, in
    ms, as ``objectives.metrics`` computes it."""
    stat = key.split("_")[0]
    if not values:
        return math.nan
    if stat == "median":
        return float(np.median(values)) * 1000
    if stat == "mean":
        return float(np.mean(values)) * 1000
    return float(np.percentile(values, float(stat.lstrip("p")))) * 1000


@dataclass(frozen=True)
class RaceRule:
    """When a launch is out of contention at a tier: the stated confidence and the margin."""

    alpha: float = 0.01  # the chance a launch still in contention is stopped, per test
    margin: float = 0.03  # how much slower than the incumbent counts as out of contention
    min_pairs: int = 10  # no test on fewer pairs: a signed-rank test needs some to say anything


@dataclass(frozen=True)
class Race:
    """One launch's race: the objective key, and per tier the incumbent's per-request values
    (request order; None where its request failed)."""

    key: str
    incumbents: Mapping[int, Sequence[float | None]] = field(default_factory=dict)
    rule: RaceRule = RaceRule()
    # Per tier, the largest value each series of ``CEILINGS`` may reach (seconds): its SLO.
    ceilings: Mapping[int, Mapping[str, float]] = field(default_factory=dict)

    def stop_after(self, tier: int, series: Mapping[str, Sequence[float | None]]) -> int | None:
        """After how many completed requests (in the order they ended) the tier is decided,
        or None: measured in full. ``series`` is the launch's per-request series."""
        ends = series[END]
        order = sorted(range(len(ends)), key=lambda i: _end(ends, i))
        for n, i in enumerate(order[:-1], start=1):
            if self.over_ceiling(tier, {k: v[i] for k, v in series.items() if i < len(v)}):
                return n
        return self._contest(tier, series, order)

    def _contest(
        self, tier: int, series: Mapping[str, Sequence[float | None]], order: Sequence[int]
    ) -> int | None:
        incumbent, name = self.incumbents.get(tier), series_of(self.key)
        if incumbent is None or name is None or name not in series:
            return None
        for n in range(self.rule.min_pairs, len(order)):
            if self.out_of_contention(order[:n], series[name], incumbent):
                return n
        return None

    def over_ceiling(self, tier: int, request: Mapping[str, float | None]) -> bool:
        """Whether one request's figures already put the tier past an SLO on its maximum."""
        for name, limit in self.ceilings.get(tier, {}).items():
            value = request.get(name)
            if value is not None and value > limit:
                return True
        return False

    def out_of_contention(
        self,
        done: Sequence[int],
        values: Sequence[float | None],
        incumbent: Sequence[float | None],
    ) -> bool:
        """Whether the requests ``done`` show the launch worse than the incumbent by more than
        the margin: by the paired test, and by the objective. A median or mean is compared
        over the same requests; a tail (p90, p99) against the incumbent's whole tier, since a
        tail grows as requests are added and the incumbent's may lie in requests not yet
        sent: the launch's tail so far must already be beyond it."""
        pairs = [(a, b) for i in done if (a := values[i]) is not None and (b := _at(incumbent, i))]
        if len(pairs) < self.rule.min_pairs:
            return False
        scale = 1 + self.rule.margin
        if signed_rank_p([a - scale * b for a, b in pairs]) >= self.rule.alpha:
            return False
        mine = statistic(self.key, [a for a, _ in pairs])
        if self.key.startswith("p"):
            theirs = statistic(self.key, [v for v in incumbent if v is not None])
        else:
            theirs = statistic(self.key, [b for _, b in pairs])
        return mine > scale * theirs


def _at(values: Sequence[float | None], i: int) -> float | None:
    return values[i] if i < len(values) else None


def _end(ends: Sequence[float | None], i: int) -> float:
    end = ends[i] if i < len(ends) else None
    return math.inf if end is None else end


def signed_rank_p(diffs: Sequence[float]) -> float:
    """One-sided p-value of Wilcoxon's signed-rank test that the differences lie above 0
    (normal approximation, zeros dropped, tied ranks averaged and their variance corrected)."""
    d = np.asarray([x for x in diffs if x != 0.0], dtype=float)
    n = len(d)
    if n == 0:
        return 1.0
    ranks = _average_ranks(np.abs(d))
    w_plus = float(ranks[d > 0].sum())
    mean = n * (n + 1) / 4
    _, counts = np.unique(np.abs(d), return_counts=True)
    var = n * (n + 1) * (2 * n + 1) / 24 - float((counts**3 - counts).sum()) / 48
    if var <= 0:
        return 1.0
    z = (w_plus - mean - 0.5) / math.sqrt(var)  # continuity-corrected
    return 0.5 * math.erfc(z / math.sqrt(2))


def _average_ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(1, len(x) + 1)
    for value in np.unique(x):
        tied = x == value
        ranks[tied] = ranks[tied].mean()
    return ranks


def request_series(records: Sequence[RequestRecord]) -> dict[str, list[float | None]]:
    """Each request's TTFT, TPOT, E2EL, longest gap between two chunks and end (seconds,
    request order; None where it failed or has no such figure): what a later launch is paired
    against, and what a ceiling is held to."""
    start = min((r.send_time for r in records), default=0.0)
    out: dict[str, list[float | None]] = {"ttft": [], "tpot": [], "e2el": [], "max_gap": []}
    out[END] = []
    for r in records:
        ok = failure_reason(r) is None
        ttft, e2el = (r.ttft, r.e2el) if ok else (None, None)
        out["ttft"].append(ttft)
        out["e2el"].append(e2el)
        out["tpot"].append(_tpot(ttft, e2el, r.output_tokens))
        gaps = [b - a for a, b in pairwise(r.chunk_times)]
        out["max_gap"].append(max(gaps) if ok and gaps else None)
        out[END].append(r.chunk_times[-1] - start if r.chunk_times else None)
    return out


def _tpot(ttft: float | None, e2el: float | None, tokens: int) -> float | None:
    if ttft is None or e2el is None or tokens <= 1:
        return None
    return (e2el - ttft) / (tokens - 1)


def decided_records(
    records: Sequence[RequestRecord], series: Mapping[str, Sequence[float | None]], n: int
) -> tuple[list[RequestRecord], float]:
    """The first ``n`` requests to end (request order) and the tier's seconds until the last
    of them ended: what a tier stopped after ``n`` completions measured and cost. Requests
    still in flight then are cancelled, and none of the rest is sent."""
    first, seconds = first_ended(series[END], n)
    return [records[i] for i in first], seconds


def first_ended(ends: Sequence[float | None], n: int) -> tuple[list[int], float]:
    """The indices of the first ``n`` requests to end, in request order, and when the last
    of them ended."""
    first = sorted(sorted(range(len(ends)), key=lambda i: _end(ends, i))[:n])
    return first, max(_end(ends, i) for i in first)


class Watch:
    """A race followed as a live tier's requests end (over HTTP): ``done`` says when the
    tier is decided."""

    def __init__(self, race: Race, tier: int, n: int) -> None:
        self.race, self.tier = race, tier
        self.values: list[float | None] = [None] * n
        self.done_at: list[int] = []
        self.decided_after: int | None = None

    def done(self, i: int, record: RequestRecord) -> bool:
        if self.decided_after is not None:
            return True
        row = {k: v[0] for k, v in request_series([record]).items()}
        self.done_at.append(i)
        incumbent, name = self.race.incumbents.get(self.tier), series_of(self.race.key)
        if name is not None:
            self.values[i] = row[name]
        if self.race.over_ceiling(self.tier, row) or (
            incumbent is not None
            and name is not None
            and self.race.out_of_contention(self.done_at, self.values, incumbent)
        ):
            self.decided_after = len(self.done_at)
        return self.decided_after is not None
