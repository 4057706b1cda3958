"""Objectives: which per-tier metric a study optimises, and in which direction.

``--objective`` names one (``p99_tpot``) or a list (``p99_tpot,p99_ttft``): the first is what
the study optimises and each tier's pick is best at; the others are what each tier's Pareto
front trades it against (output throughput when none is named).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from tuner.errors import TunerError


@dataclass(frozen=True)
class Objective:
    """A named objective reading one ``vllm bench serve`` key of a tier's metrics."""

    name: str
    key: str
    direction: Literal["minimize", "maximize"]
    unit: str
    description: str

    def better(self, a: float, b: float) -> bool:
        """Whether value ``a`` is strictly better than ``b``."""
        return a < b if self.direction == "minimize" else a > b

    @property
    def worst(self) -> float:
        """The value an infeasible trial reports, so samplers rank it last."""
        return float("inf") if self.direction == "minimize" else float("-inf")

    def gain(self, value: float, baseline: float) -> float:
        """Relative improvement over the baseline (positive is better), e.g. 0.25 = 25% better."""
        if baseline == 0:
            return 0.0
        change = (value - baseline) / abs(baseline)
        return -change if self.direction == "minimize" else change


def _min(name: str, key: str, unit: str, text: str) -> Objective:
    return Objective(name, key, "minimize", unit, text)


def _max(name: str, key: str, unit: str, text: str) -> Objective:
    return Objective(name, key, "maximize", unit, text)


OBJECTIVES: dict[str, Objective] = {
    o.name: o
    for o in (
        _min("p99_tpot", "p99_tpot_ms", "ms", "99th percentile time per output token"),
        _min("median_tpot", "median_tpot_ms", "ms", "median time per output token"),
        _min("mean_tpot", "mean_tpot_ms", "ms", "mean time per output token"),
        _min("p99_ttft", "p99_ttft_ms", "ms", "99th percentile time to first token"),
        _min("median_ttft", "median_ttft_ms", "ms", "median time to first token"),
        _min("p99_itl", "p99_itl_ms", "ms", "99th percentile inter-token latency"),
        _min("p99_e2el", "p99_e2el_ms", "ms", "99th percentile end-to-end latency"),
        _max("output_throughput", "output_throughput", "tok/s", "output tokens per second"),
        _max("total_token_throughput", "total_token_throughput", "tok/s", "prompt+output tok/s"),
        _max(
            "request_goodput", "request_goodput", "req/s", "requests meeting every SLO per second"
        ),
    )
}


def get_objective(name: str) -> Objective:
    """The objective called ``name``; an unknown name lists the valid ones."""
    try:
        return OBJECTIVES[name]
    except KeyError:
        valid = ", ".join(OBJECTIVES)
        raise TunerError(f"unknown objective {name!r}; valid objectives: {valid}") from None


def parse_objectives(text: str) -> tuple[Objective, tuple[Objective, ...]]:
    """The optimised objective and the ones its front trades against, from ``a`` or ``a,b``."""
    names = [n.strip() for n in text.split(",")]
    if not any(names) or not all(names):
        raise TunerError(f"--objective {text!r}: name one objective, or several with commas")
    objectives = [get_objective(n) for n in names]
    if len({o.key for o in objectives}) < len(objectives):
        raise TunerError(f"--objective {text!r}: an objective is named twice")
    return objectives[0], tuple(objectives[1:])


def front_axes(objective: Objective, against: tuple[Objective, ...] = ()) -> tuple[Objective, ...]:
    """What a tier's front trades: the objective against ``against``, else against output
    throughput (or P99 TPOT, when the objective is throughput itself)."""
    if against:
        return (objective, *against)
    other = "p99_tpot" if objective.key == "output_throughput" else "output_throughput"
    return (objective, OBJECTIVES[other])
