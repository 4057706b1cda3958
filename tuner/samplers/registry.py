"""Which Optuna sampler proposes the next config, by name (``tune run --sampler NAME``).

Every sampler here sees one objective per concurrency tier and the constraint values the loop
sets on every trial (rules, engine, failed_requests, slo; feasible when all are <= 0), so it
searches for each tier's best feasible config rather than one blended score. The default was
chosen by measurement: ``python bench/sample_efficiency.py --methods ...`` compares them on the
simulated engine. Median launches to come within 3% of each tier's best (c1/c4/c8/c20/c40,
budget 100, discretised minimax_h200 space, 1728 distinct launches; a launch counts at a tier
where it served every request and met that tier's SLOs, as the recommendations read it: 1512
launches at c1/c4/c8/c40, 307 at c20; each config's true value the mean of 4 engine seeds):
additive 12/13/19/15/15.5 over 20 seeds, against random's 23/>100/59/72.5/68. Against the
earlier truth (a launch counted nowhere once it missed an SLO at one tier, 307 everywhere):
additive 12.5/13/19/15/15.5, random 36/>100/59/72.5/68. Per-tier feasibility inside the
sampler (its failure models, its fit or both) was slower: the c20 TTFT misses, 69% of the
launches, steer every tier away from slow kernels. Mean launches over seeds 0-39 at budget
40 (not reached counted as 50): 9.5/15.3/19.7/18.6/18.5, every tier 21.6; on the earlier truth
12.4 at c1, the rest the same; there, without the escape for a stalled tier and with half the
proposals optimistic, 12.4/15.8/21.3/18.2/18.2, every tier 22.5; with Thompson draws two knobs
from the best, 13.3/19.6/23.0/20.7/20.3. Earlier, against a one-seed truth (10 seeds):
additive 14/38/25/24/18.5, tpe-tiers 22.5/32/36.5/25/28.5, tpe (multi-objective)
18.5/45/41/33.5/36.5, nsga2 44/84/>100/75.5/73, random 41.5/>100/>100/>100/>100, grid >100
everywhere; a linear failure model alone (no noisy-OR) was slower to c1. On an earlier
simulator revision gp-tiers (torch) was no better than tpe-tiers at ~10x the proposal cost.
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from tuner.errors import StudyError
from tuner.samplers.additive import AdditiveSampler
from tuner.samplers.grid import GridWalkSampler
from tuner.samplers.tiered import TierTurnSampler
from tuner.space.params import Scalar
from tuner.space.sample import violated_rules
from tuner.space.schema import Space

SamplerFactory = Callable[[Space], optuna.samplers.BaseSampler]
STARTUP_TRIALS = 8  # random configs before the model-based samplers take over


def _tpe(space: Space) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(
        multivariate=True,
        constant_liar=True,
        seed=space.study.seed,
        n_startup_trials=STARTUP_TRIALS,
    )


def _tpe_tiers(space: Space) -> optuna.samplers.BaseSampler:
    inner = optuna.samplers.TPESampler(
        multivariate=True, seed=space.study.seed, n_startup_trials=STARTUP_TRIALS
    )
    return TierTurnSampler(inner)


def _additive(space: Space) -> optuna.samplers.BaseSampler:
    return AdditiveSampler(
        seed=space.study.seed,
        allowed=lambda point: not violated_rules(space, point),
        tiers=space.workload.tiers,
    )


def _gp(space: Space) -> optuna.samplers.BaseSampler:
    try:
        import torch  # noqa: F401  (GPSampler needs it; tell the user before the study starts)
    except ImportError:
        raise StudyError(
            "--sampler gp needs torch: pip install 'tune[gp]' (or torch==2.13.0, CPU wheel)"
        ) from None
    return optuna.samplers.GPSampler(seed=space.study.seed, n_startup_trials=STARTUP_TRIALS)


def _nsga2(space: Space) -> optuna.samplers.BaseSampler:
    return optuna.samplers.NSGAIISampler(seed=space.study.seed, population_size=STARTUP_TRIALS * 2)


def _random(space: Space) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=space.study.seed)


def _grid(space: Space) -> optuna.samplers.BaseSampler:
    """Every combination once, nested loops like vLLM's auto_tune; needs finite value sets."""
    return GridWalkSampler(
        grid_values(space), space.study.seed, lambda point: not violated_rules(space, point)
    )


def grid_values(space: Space) -> dict[str, list[Scalar]]:
    """The values of each parameter a grid walks: its choices, or low..high by step."""
    grid: dict[str, list[Scalar]] = {}
    for name, p in space.parameters.items():
        if p.choices is not None:
            grid[name] = list(p.choices)
        elif p.step is not None and p.low is not None and p.high is not None and not p.log:
            count = round((p.high - p.low) / p.step) + 1
            values: list[Scalar] = [p.low + i * p.step for i in range(count)]
            grid[name] = [int(v) for v in values] if p.type == "int" else values
        elif p.type == "int" and p.low is not None and p.high is not None and not p.log:
            grid[name] = list(range(int(p.low), int(p.high) + 1))
        else:
            raise StudyError(
                f"--sampler grid: parameters.{name} has no finite set of values "
                "(give it choices, or a step without log)"
            )
    return grid


SAMPLERS: dict[str, SamplerFactory] = {
    "tpe": _tpe,
    "tpe-tiers": _tpe_tiers,
    "additive": _additive,
    "gp": _gp,
    "nsga2": _nsga2,
    "random": _random,
    "grid": _grid,
}
DEFAULT_SAMPLER = "additive"


def check_sampler(name: str) -> str:
    """``name`` if it is a known sampler; otherwise one line listing the valid ones."""
    if name not in SAMPLERS:
        raise StudyError(f"unknown sampler {name!r}; valid samplers: {', '.join(SAMPLERS)}")
    return name


def make_sampler(name: str, space: Space) -> optuna.samplers.BaseSampler:
    """A fresh sampler called ``name`` for ``space``, seeded with the space's study seed."""
    return SAMPLERS[check_sampler(name)](space)
