"""A grid walk: every combination of the parameters' values once, in nested-loop order.

This is how vLLM's ``benchmarks/auto_tune`` script searches (nested loops over lists of values,
the last one turning fastest), kept as a sampler so a small space can be covered exhaustively
and so the sample-efficiency bench has the walk to compare against. Each parameter's values are
visited in an order drawn from the seed. Combinations a trial already holds (the baseline, a
re-queued config) and combinations ``valid`` refuses (the space's rules) are skipped; once every
combination is taken, the walk starts over, and the study answers repeats from its cache.

Optuna's own ``GridSampler`` does not fit here: it does not count enqueued trials (the baseline)
as visited and fails on them when one grid point is left.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

Point = dict[str, Any]


class GridWalkSampler(optuna.samplers.BaseSampler):
    """Walks ``grid`` in nested-loop order; see the module docstring."""

    def __init__(
        self,
        grid: Mapping[str, Sequence[Any]],
        seed: int | None = None,
        valid: Callable[[Point], bool] | None = None,
    ) -> None:
        rng = np.random.default_rng(seed)
        self.names = list(grid)
        self.values = [[grid[n][i] for i in rng.permutation(len(grid[n]))] for n in self.names]
        self.valid = valid or (lambda _: True)
        self._points: dict[int, Point] = {}

    def points(self) -> Iterator[Point]:
        for combo in itertools.product(*self.values):
            point = dict(zip(self.names, combo, strict=True))
            if self.valid(point):
                yield point

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return {}

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return {}

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        if trial.number not in self._points:
            self._points[trial.number] = self._next(study, trial.number)
        return self._points[trial.number][param_name]

    def _next(self, study: optuna.Study, number: int) -> Point:
        states = (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING)
        taken = {
            _key(t.params, self.names)
            for t in study.get_trials(deepcopy=False, states=states)
            if t.number != number
        }
        for point in self.points():
            if _key(point, self.names) not in taken:
                return point
        every = list(self.points())  # all taken: start over, repeats cost no launch
        return every[number % len(every)] if every else {}

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self._points.pop(trial.number, None)


def _key(params: Mapping[str, Any], names: Sequence[str]) -> tuple[Any, ...]:
    return tuple(params.get(n) for n in names)
