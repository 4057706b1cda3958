"""A warm start's prior: an earlier study's measurements, as the additive sampler learns from them.

The earlier study ran the same space on another engine (the simulated one, an older release, a
neighbouring model), so its values say something about this engine but are not its values.
The model of this engine's target (the log value, per tier, centred) at a config ``x`` is

    y(x) = weight * f(x) + g(x) + noise

where ``f`` is the earlier study's own fit (``BayesLinear`` on its measurements, on this
sampler's features: a knob the earlier study lacked, or a value of it with no counterpart
here, is no feature of ``f``, so such knobs are learnt as in a cold start) and ``g`` is the
usual additive model, here of what differs. That is the cold model with its weights' prior
mean moved from 0 to ``weight`` times the earlier fit's: "this engine is the earlier one plus
a difference", the difference under the usual prior.

``weight`` (0, 1/2 or 1) is chosen with ``g``'s prior scales and noise, by the marginal
likelihood of this engine's own measurements alone (``surrogate.best_target``), so the earlier
measurements never vote on how far they are trusted. Rows of earlier measurements given a
weight below 1 in the fit would have to be kept out of the evidence that weighs them, and a
fixed weight would need a schedule; here weight 0 is exactly the cold fit.

Why the prior washes out as this engine's own launches arrive: ``g`` is fitted to them, so
where this engine has measured its data win whatever the weight, and ``f`` only fills in where
it has not; and launches that contradict ``f`` (a kernel that was fast there and is slow here)
lower the evidence for a weight above 0 until the fit is the cold one. The earlier
measurements are never this engine's: they are no trials of the study, and the best configs,
trust regions, failure models and the early launch of every kernel read this study's trials
only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from optuna.study import StudyDirection

from tuner.samplers.observed import design, targets
from tuner.samplers.surrogate import BayesLinear, Encoder, best_target

WEIGHTS = (0.0, 0.5, 1.0)  # how much of the earlier fit the evidence may keep
Hyper = tuple[list[float], float]  # prior variances per block, noise
Features = list[np.ndarray]  # the encoder's main and pairwise blocks of some configs


@dataclass(frozen=True)
class Prior:
    """An earlier study's measurements in this study's terms: each config's values in this
    space (None where it has none), and per config and tier of this study the objective value
    (NaN where the earlier launch was infeasible, or did not measure it)."""

    source: str  # the earlier study's name
    points: tuple[Mapping[str, Any], ...]
    values: np.ndarray  # (len(points), tiers of this study)


class PriorFit:
    """The earlier study's fit per tier of this study, on the sampler's features, made once
    per encoder (the search space's knobs) and tier."""

    def __init__(self, prior: Prior) -> None:
        self.prior = prior
        self._fits: dict[tuple[tuple[str, ...], int], BayesLinear | None] = {}

    def predict(
        self, enc: Encoder, directions: Sequence[StudyDirection], tier: int, rows: Features
    ) -> np.ndarray:
        """``f`` at the feature rows, for the given tier (0 where the prior has too little)."""
        model = self._fit(enc, directions, tier)
        if model is None:
            return np.zeros(len(rows[0]))
        return model.predict([*rows, *rows] if len(directions) > 1 else rows, model.mean)

    def at_rows(
        self,
        enc: Encoder,
        directions: Sequence[StudyDirection],
        trials: Features,
        rows: tuple[np.ndarray, np.ndarray],
    ) -> np.ndarray:
        """``f`` at each (trial, tier) row of a design (``Observed.rows``), given the trials'
        features, centred per tier as the design's targets are."""
        trial, tier = rows
        out = np.zeros(len(trial))
        for k in np.unique(tier):
            at = tier == k
            f = self.predict(enc, directions, int(k), [b[trial[at]] for b in trials])
            out[at] = f - f.mean() if len(directions) > 1 else f
        return out

    def _fit(
        self, enc: Encoder, directions: Sequence[StudyDirection], tier: int
    ) -> BayesLinear | None:
        key = (tuple(enc.space), tier)
        if key not in self._fits:
            self._fits[key] = self._new_fit(enc, directions, tier)
        return self._fits[key]

    def _new_fit(
        self, enc: Encoder, directions: Sequence[StudyDirection], tier: int
    ) -> BayesLinear | None:
        values = self.prior.values
        if values.ndim != 2 or values.shape[1] != len(directions):
            return None  # measured at other tiers than this study has: nothing to say
        ok_at = np.isfinite(values)
        if ok_at[:, tier].sum() < 2:
            return None
        main, pairs = enc.features([{n: p.get(n) for n in enc.space} for p in self.prior.points])
        y = targets(values, ok_at, directions)
        blocks, t, _ = design(main, pairs, y, ok_at, tier)
        return BayesLinear(blocks, t)


def fit_with_prior(
    blocks: Sequence[np.ndarray],
    y: np.ndarray,
    offset: np.ndarray,
    chosen: tuple[float, Hyper] | None,
) -> tuple[BayesLinear, float]:
    """The model of ``y - weight * offset`` and its weight: ``chosen`` (weight, prior scales
    and noise) when given, else the evidence's choice among ``WEIGHTS`` (see the module
    docstring); without an offset, the cold fit."""
    if chosen is None and not offset.any():
        return BayesLinear(blocks, y), 0.0
    if chosen is None:
        which, hyper = best_target(blocks, [y - w * offset for w in WEIGHTS])
        chosen = (WEIGHTS[which], hyper)
    weight, hyper = chosen
    return BayesLinear(blocks, y - weight * offset, hyper=hyper), weight
