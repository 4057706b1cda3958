"""How many users one replica serves within the SLO, as plain data: ``capacity.json``.

``tune capacity`` (``tuner.capacity``) measures it on the running engine and writes it into the
study's results folder; ``tune show``, the recipe and the report read it back from there when
it is present. Each config holds every probe it ran (the load, whether the SLOs held, the
figures they were judged on), so what an answer rests on is in the file, not only the answer.

A load is a concurrency (users in flight, closed loop) or, in ``request_rate`` mode, a rate in
requests per second with at most ``in_flight`` requests in flight.
"""

from __future__ import annotations

import json
import math
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tuner.errors import StudyError
from tuner.storage.results import write_json

FILE = "capacity.json"
PARTIAL = "capacity.partial.json"  # an answer still being measured, or cut short
CONCURRENCY, REQUEST_RATE = "concurrency", "request_rate"
HELD_TO_BOUND = "held to the bound"  # bound_by of a config that held at the most load searched


@dataclass
class Probe:
    """One measurement at one load on a config's running engine."""

    load: float
    ok: bool
    requests: int
    phase: str  # bracket, bisect or repeat
    values: dict[str, float] = field(default_factory=dict)  # each SLO's figure, its count
    broke: list[str] = field(default_factory=list)  # why it did not hold, one line each
    violated: list[str] = field(default_factory=list)  # the SLO metrics it broke
    fatal: bool = False  # nothing at or after it measures the config: the search stops
    client_limited: bool = False  # the benchmark client, not the engine, limited it
    retries: int = 0  # runs the client limited before this one, measured again


@dataclass
class ConfigCapacity:
    """One config's answer: the largest load that held, and the least one that broke."""

    label: str  # c1,c4 (the tiers it is recommended for), defaults, or both
    tiers: list[int]
    params: dict[str, Any]
    baseline: bool = False
    trial: int | None = None  # the study's trial that first measured it
    capacity: float | None = None  # largest load that held (0: even the least broke)
    above: float | None = None  # least load that broke (None: none up to the bound)
    exact: bool = False  # above is the next step after capacity (c + 1, or within precision)
    bound_by: str = ""  # what broke at ``above``: an SLO metric, failed requests, the bound
    launches: int = 0
    probes: list[Probe] = field(default_factory=list)
    failure: str | None = None  # why it was not measured, or why the search stopped early

    def runs_at(self, load: float | None) -> list[Probe]:
        return [p for p in self.probes if load is not None and p.load == load]

    def held(self, load: float | None) -> tuple[int, int]:
        """Runs at ``load`` that held, and runs at it in all."""
        runs = self.runs_at(load)
        return sum(p.ok for p in runs), len(runs)

    def spread(self, load: float | None, metric: str) -> tuple[float, float, float] | None:
        """Median, min and max of ``metric`` over the runs at ``load`` (None: no value)."""
        values = [p.values[metric] for p in self.runs_at(load) if metric in p.values]
        if not values:
            return None
        return statistics.median(values), min(values), max(values)


@dataclass
class CapacityReport:
    """``tune capacity``'s answer for a study: every config it measured, under which SLOs."""

    study: str
    mode: str  # concurrency or request_rate
    slos: list[dict[str, Any]]  # the SLOs every probe was judged on (objectives.metrics.SLO)
    slo_tier: int  # the tier whose SLOs they are (the study's highest)
    max_load: float  # --max-users, or --max-rate in request_rate mode
    max_steps: int
    repeats: int
    measured_on: str  # the launcher kind
    trials: int  # finished trials the study held when it was measured
    in_flight: int | None = None  # request_rate mode: the cap on requests in flight
    created: float = 0.0
    configs: list[ConfigCapacity] = field(default_factory=list)

    @property
    def unit(self) -> str:
        return "users" if self.mode == CONCURRENCY else "req/s"

    def baseline(self) -> ConfigCapacity | None:
        return next((c for c in self.configs if c.baseline), None)

    def picks(self) -> list[ConfigCapacity]:
        """The recommended configs (a baseline that is also recommended is one of them)."""
        return [c for c in self.configs if c.tiers]

    def for_params(self, params: dict[str, Any]) -> ConfigCapacity | None:
        return next((c for c in self.configs if c.params == params), None)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CapacityReport:
        configs = [_config(c) for c in data.get("configs", [])]
        return cls(**{**data, "configs": configs})


def _config(data: dict[str, Any]) -> ConfigCapacity:
    return ConfigCapacity(**{**data, "probes": [Probe(**p) for p in data.get("probes", [])]})


def replicas(demand: float, capacity: float | None) -> int | None:
    """Replicas that serve ``demand`` at ``capacity`` each (None: no replica count does)."""
    if not capacity or capacity <= 0:
        return None
    return max(1, math.ceil(demand / capacity - 1e-9))


def ratio(pick: ConfigCapacity, base: ConfigCapacity | None) -> float | None:
    """How many times the baseline's capacity the pick's is (None: either has none)."""
    if base is None or not base.capacity or pick.capacity is None:
        return None
    return pick.capacity / base.capacity


def write_capacity(study_dir: Path, report: CapacityReport, complete: bool = True) -> Path:
    """The answer to ``capacity.json`` once ``complete``; till then the configs measured so far
    go to ``capacity.partial.json`` beside it, so that the previous complete answer is what
    ``tune show`` and the exports read until a new one replaces it whole."""
    path = study_dir / (FILE if complete else PARTIAL)
    write_json(path, report.to_json())
    if complete:
        (study_dir / PARTIAL).unlink(missing_ok=True)
    return path


def read_capacity(study_dir: Path) -> CapacityReport | None:
    """The study's ``capacity.json``, or None when ``tune capacity`` has not run for it."""
    path = study_dir / FILE
    if not path.is_file():
        return None
    try:
        return CapacityReport.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, TypeError, KeyError) as err:
        raise StudyError(
            f"{path} is not a capacity file tune wrote ({err}); delete it or run "
            "`tune capacity` again"
        ) from None


def point_capacity(report: CapacityReport | None, params: dict[str, Any]) -> dict[str, Any] | None:
    """What a recipe point says of its config's capacity (None: not measured)."""
    mine = report.for_params(params) if report is not None else None
    if report is None or mine is None or mine.capacity is None:
        return None
    base = report.baseline()
    held, runs = mine.held(mine.capacity)
    per = "users_per_replica" if report.mode == CONCURRENCY else "requests_per_s_per_replica"
    out: dict[str, Any] = {
        per: mine.capacity,
        "breaks_at": mine.above,
        "bound_by": mine.bound_by,
        "held_runs": f"{held} of {runs}",
        "slos": report.slos,
    }
    if base is not None and base.capacity is not None:
        out["baseline"] = base.capacity
        rate = ratio(mine, base)
        out["vs_baseline"] = None if rate is None else round(rate, 3)
    return out
