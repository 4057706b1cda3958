"""Which Optuna sampler proposes the next config, by name (``tune run --sampler NAME``).

Every sampler here sees one objective per concurrency tier and the constraint values the loop
sets on every trial (rules, engine, failed_requests, slo; feasible when all are <= 0), so it
searches for each tier's best feasible config rather than one blended score. The default was
chosen by measurement: ``python -m bench.sample_efficiency --methods ...`` compares them on the
simulated engine; the figures behind the choice are in ``bench/README.md``.
"""

from __future__ import annotations

from collections.abc import Callable

import optuna

from tuner.errors import StudyError
from tuner.samplers.additive import AdditiveSampler
from tuner.samplers.grid import GridWalkSampler
from tuner.samplers.prior import Prior
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


def _additive(space: Space, prior: Prior | None = None) -> optuna.samplers.BaseSampler:
    return AdditiveSampler(
        seed=space.study.seed,
        allowed=lambda point: not violated_rules(space, point),
        tiers=space.workload.tiers,
        unordered=frozenset(n for n, p in space.parameters.items() if not p.ordered),
        prior=prior,
    )


def _gp(space: Space) -> optuna.samplers.BaseSampler:
    try:
        import scipy  # noqa: F401  (GPSampler needs both; tell the user before the study starts)
        import torch  # noqa: F401
    except ImportError as err:
        raise StudyError(
            f"--sampler gp needs torch and scipy ({err.name} is missing): pip install -e '.[gp]'"
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
# The samplers that learn from a warm start's measurements; the others run its queued configs
# first (every sampler does: they are in the study's queue) and then search as from cold.
LEARNS_PRIOR: dict[str, Callable[[Space, Prior], optuna.samplers.BaseSampler]] = {
    "additive": _additive
}


def check_sampler(name: str) -> str:
    """``name`` if it is a known sampler; otherwise one line listing the valid ones."""
    if name not in SAMPLERS:
        raise StudyError(f"unknown sampler {name!r}; valid samplers: {', '.join(SAMPLERS)}")
    return name


def make_sampler(
    name: str, space: Space, prior: Prior | None = None
) -> optuna.samplers.BaseSampler:
    """A fresh sampler called ``name`` for ``space``, seeded with the space's study seed, that
    learns from ``prior`` (a warm start's earlier measurements) if it is one that can."""
    if prior is not None and name in LEARNS_PRIOR:
        return LEARNS_PRIOR[name](space, prior)
    return SAMPLERS[check_sampler(name)](space)
