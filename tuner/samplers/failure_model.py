"""Which configs fail: a noisy-OR model over knob values and pairs of knob values.

Why this shape: a launch fails (refused, out of memory, crash under load, SLO missed) when it
holds at least one bad ingredient: a backend the hardware lacks, a token budget too small for
the TTFT SLO, a MoE kernel that crashes with a big budget. Each ingredient (one knob's value,
or the values of two knobs together) has its own chance ``p`` of being bad, and a config fails
unless none of its ingredients is bad: ``P(fail) = 1 - prod(1 - p)``. A success clears every
ingredient it holds; a failure is blamed on its ingredients in proportion to how suspect they
already are (expectation-maximisation), so a new value tried next to a known-bad one is hardly
blamed, while one that failed next to cleared values is. A linear model of the 0/1 outcome has
no such explaining-away: it spreads every failure over all the values present.

Numeric knobs count by range: the low end (often "off") and three equal parts of the rest.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution

from tuner.samplers.surrogate import position

PRIOR_MAIN = 0.1  # chance that one knob value, never tried, is bad
PRIOR_PAIR = 0.01  # ... that a combination of two values is bad while each alone is fine
PRIOR_WEIGHT = 0.1  # how many launches the prior counts for: little, so one success clears
EM_ROUNDS = 40
RANGE_PARTS = 3  # a numeric knob's buckets: its low end, then this many equal parts


class Ingredients:
    """Each config as the ids of its ingredients: one per knob, one per pair of knobs."""

    def __init__(self, space: Mapping[str, BaseDistribution]) -> None:
        self.space = dict(sorted(space.items()))
        sizes = [_buckets(d) for d in self.space.values()]
        self.main_at = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(int)
        pairs = [(k, m) for k in range(len(sizes)) for m in range(k + 1, len(sizes))]
        self.pairs = np.array(pairs, dtype=int).reshape(len(pairs), 2)
        widths = [sizes[k] * sizes[m] for k, m in pairs]
        start = sum(sizes)
        self.pair_at = start + np.concatenate([[0], np.cumsum(widths)[:-1]]).astype(int)
        self.sizes = np.array(sizes, dtype=int)
        self.n = start + sum(widths)
        self.prior = np.where(np.arange(self.n) < start, PRIOR_MAIN, PRIOR_PAIR)

    def ids(self, points: Sequence[Mapping[str, Any]]) -> np.ndarray:
        """(configs, ingredients) integer ids."""
        b = np.array(
            [[_bucket(d, p[name]) for name, d in self.space.items()] for p in points], dtype=int
        ).reshape(len(points), len(self.space))
        k, m = self.pairs[:, 0], self.pairs[:, 1]
        pair_ids = self.pair_at + b[:, k] * self.sizes[m] + b[:, m]
        return np.hstack([self.main_at + b, pair_ids])


class FailureModel:
    """Noisy-OR posterior over ingredients, fitted to configs and whether each failed."""

    def __init__(self, ingredients: Ingredients, ids: np.ndarray, failed: np.ndarray) -> None:
        self.ingredients = ingredients
        n = ingredients.n
        self.count = np.bincount(ids.ravel(), minlength=n).astype(float)
        self.blame = np.zeros(n)
        self.p = ingredients.prior.copy()
        bad = ids[failed]
        for _ in range(EM_ROUNDS if len(bad) else 1):  # no failure: one round clears
            self.blame = self._expected_blame(bad)
            self.p = self._posterior_mean()

    def _expected_blame(self, bad: np.ndarray) -> np.ndarray:
        """E-step: for each failure, the chance each of its ingredients was bad, given that at
        least one was."""
        p = self.p[bad]
        fail = 1.0 - np.prod(1.0 - p, axis=1, keepdims=True)
        share = p / np.maximum(fail, 1e-12)
        return np.bincount(bad.ravel(), weights=share.ravel(), minlength=self.ingredients.n)

    def _posterior_mean(self) -> np.ndarray:
        prior = self.ingredients.prior
        return (self.blame + PRIOR_WEIGHT * prior) / (self.count + PRIOR_WEIGHT)

    def risk(self, ids: np.ndarray, p: np.ndarray | None = None) -> np.ndarray:
        """P(fail) of each config (rows of ingredient ids)."""
        q = self.p if p is None else p
        return 1.0 - np.prod(1.0 - q[ids], axis=1)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One draw of every ingredient's chance of being bad (Beta around the fit)."""
        prior = self.ingredients.prior
        a = self.blame + PRIOR_WEIGHT * prior
        b = np.maximum(self.count - self.blame, 0.0) + PRIOR_WEIGHT * (1.0 - prior)
        return rng.beta(a, b)


def _buckets(dist: BaseDistribution) -> int:
    if isinstance(dist, CategoricalDistribution):
        return len(dist.choices)
    return 1 + RANGE_PARTS


def _bucket(dist: BaseDistribution, value: Any) -> int:
    if isinstance(dist, CategoricalDistribution):
        return int(dist.to_internal_repr(value))
    u, low = position(dist, value)
    return 0 if low else 1 + min(int(u * RANGE_PARTS), RANGE_PARTS - 1)
