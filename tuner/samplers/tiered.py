"""A sampler that looks for one tier's best config per trial, taking the tiers in turn.

A study has one objective per concurrency tier, and users want the best config of each tier,
not a Pareto front: the front of five tiers is most of the configs tried, so a multi-objective
sampler spreads its trials thin. This sampler hands trial ``n`` to a single-objective sampler
(TPE by default) that sees every finished trial with one value, its value at tier
``n mod tiers``, and its constraints unchanged (infeasible trials stay infeasible). Every trial
teaches every tier; each tier gets every ``tiers``-th proposal.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import optuna
from optuna.distributions import BaseDistribution
from optuna.trial import FrozenTrial, TrialState

from tuner.samplers.observed import learns_from

InnerFactory = Callable[[], optuna.samplers.BaseSampler]


class TierTurnSampler(optuna.samplers.BaseSampler):
    """Single-objective search on the tiers in turn; see the module docstring."""

    def __init__(self, inner: optuna.samplers.BaseSampler) -> None:
        self.inner = inner
        self._views: dict[int, tuple[optuna.Study, FrozenTrial]] = {}

    def _view(self, study: optuna.Study, trial: FrozenTrial) -> tuple[optuna.Study, FrozenTrial]:
        """An in-memory single-objective copy of ``study`` for the tier ``trial`` serves, and
        the copy's own running trial standing in for ``trial``."""
        if trial.number in self._views:
            return self._views[trial.number]
        tier = trial.number % len(study.directions)
        view = optuna.create_study(direction=study.directions[tier], sampler=self.inner)
        done = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        view.add_trials([_one_value(t, tier) for t in done if learns_from(t)])
        stand_in = view.ask()
        pair = (view, view._storage.get_trial(stand_in._trial_id))
        self._views = {trial.number: pair}  # one trial at a time: drop older views
        return pair

    def infer_relative_search_space(
        self, study: optuna.Study, trial: FrozenTrial
    ) -> dict[str, BaseDistribution]:
        return self.inner.infer_relative_search_space(*self._view(study, trial))

    def sample_relative(
        self, study: optuna.Study, trial: FrozenTrial, search_space: dict[str, BaseDistribution]
    ) -> dict[str, Any]:
        return self.inner.sample_relative(*self._view(study, trial), search_space)

    def sample_independent(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        param_name: str,
        param_distribution: BaseDistribution,
    ) -> Any:
        view, stand_in = self._view(study, trial)
        return self.inner.sample_independent(view, stand_in, param_name, param_distribution)

    def before_trial(self, study: optuna.Study, trial: FrozenTrial) -> None:
        self._views.pop(trial.number, None)

    def after_trial(
        self,
        study: optuna.Study,
        trial: FrozenTrial,
        state: TrialState,
        values: Sequence[float] | None,
    ) -> None:
        self._views.pop(trial.number, None)

    def reseed_rng(self) -> None:
        self.inner.reseed_rng()


def _one_value(trial: FrozenTrial, tier: int) -> FrozenTrial:
    return optuna.trial.create_trial(
        params=trial.params,
        distributions=trial.distributions,
        value=trial.values[tier],
        user_attrs={},
        system_attrs=dict(trial.system_attrs),
    )
