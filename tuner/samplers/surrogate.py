"""A Bayesian linear model of one tier's objective over engine configs, with pairwise terms.

Why this shape: an engine step's time is close to a product of per-knob factors (attention
kernels, MoE kernels, GEMM placement, speculative tokens) times scheduler effects that depend
on a few knobs together (token budget, prefill cap, max-num-seqs), so the *log* of a latency
or a throughput is close to a sum of one term per knob value plus a few pairwise terms. A
linear model over one-hot (and ordinal) features of each knob plus the products of features of
two different knobs, with a Gaussian prior that shrinks the pairwise weights harder than the
main ones, learns that shape from a dozen launches. The prior scales and the noise are chosen
per fit by the marginal likelihood over a small grid, so the model is as smooth as the data
allow. Posterior draws of the weights drive Thompson sampling in ``tuner.samplers.additive``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from optuna.distributions import BaseDistribution, CategoricalDistribution

# Prior variances per feature block (main, pairwise; then the same two blocks again for the
# target tier alone, scaled by rho) and the noise variance, for standardised targets.
# Pairwise variances are per product feature; there are many of them, so they stay small.
_GRID = [
    (a, b, rho, s)
    for a in (0.1, 0.5, 2.0)
    for b in (0.0, 0.005, 0.03)
    for rho in (0.1, 0.5)
    for s in (0.003, 0.03, 0.2)
]


def _variances(hyper: Sequence[float], blocks: int) -> list[float]:
    a, b, rho = hyper[:3]
    return [a, b, rho * a, rho * b][:blocks]


class Encoder:
    """Feature rows for parameter dicts over a fixed, flat search space (names sorted)."""

    def __init__(
        self, space: Mapping[str, BaseDistribution], unordered: frozenset[str] = frozenset()
    ) -> None:
        self.space = dict(sorted(space.items()))
        self.unordered = unordered  # numeric choices whose order is not the knob's
        self.widths = [len(self._param(name, d, None)) for name, d in self.space.items()]
        owner = np.repeat(np.arange(len(self.widths)), self.widths)
        i, j = np.triu_indices(len(owner), k=1)
        keep = owner[i] != owner[j]  # no products of two features of the same knob
        self.pairs = (i[keep], j[keep])

    @property
    def n_main(self) -> int:
        return sum(self.widths)

    def main(self, points: Sequence[Mapping[str, Any]]) -> np.ndarray:
        rows = [
            np.concatenate([self._param(n, d, p[n]) for n, d in self.space.items()]) for p in points
        ]
        return np.array(rows, dtype=float).reshape(len(points), self.n_main)

    def features(self, points: Sequence[Mapping[str, Any]]) -> list[np.ndarray]:
        """The two feature blocks of ``points``: main-effect columns, pairwise products."""
        m = self.main(points)
        return [m, m[:, self.pairs[0]] * m[:, self.pairs[1]]]

    def _param(self, name: str, dist: BaseDistribution, value: Any) -> np.ndarray:
        if isinstance(dist, CategoricalDistribution):
            return _categorical(dist, value, name not in self.unordered)
        return _numeric(dist, value)


def _categorical(dist: CategoricalDistribution, value: Any, ordered: bool = True) -> np.ndarray:
    """One-hot of the choice, plus its rank among the choices when they are all numbers in
    the knob's order (so 32768 sits between 8192 and 131072 and one launch teaches its
    neighbours)."""
    k = len(dist.choices)
    onehot = np.zeros(k)
    if value is not None:
        onehot[int(dist.to_internal_repr(value))] = 1.0
    if not ordered or not numeric_choices(dist.choices):
        return onehot
    ranks = sorted({float(c) for c in dist.choices})  # type: ignore[arg-type]
    rank = ranks.index(float(value)) / max(len(ranks) - 1, 1) if value is not None else 0.0
    return np.append(onehot, rank)


def numeric_choices(choices: Sequence[Any]) -> bool:
    return all(isinstance(c, int | float) and not isinstance(c, bool) for c in choices)


def _numeric(dist: Any, value: Any) -> np.ndarray:
    """Position u in [0, 1] (log scale when the distribution is), u squared, and whether the
    value is the low end (0 often means "off", which is not just a small value)."""
    if value is None:
        return np.zeros(3)
    u, low = position(dist, value)
    return np.array([u, u * u, float(low)])


def position(dist: Any, value: Any) -> tuple[float, bool]:
    """Where a numeric value sits in its range, 0..1 (log scale when the distribution is),
    and whether it is the low end."""
    low, high = float(dist.low), float(dist.high)
    if getattr(dist, "log", False):
        low, high, x = math.log(low), math.log(high), math.log(float(value))
    else:
        x = float(value)
    u = (x - low) / (high - low) if high > low else 0.0
    return u, value == dist.low


class BayesLinear:
    """Posterior of a linear model on standardised targets; see the module docstring.

    ``blocks`` are column blocks of one design matrix: main effects and pairwise products,
    optionally followed by the same two blocks again, filled only on rows of the target tier
    (so the other tiers' measurements teach what the tiers share, and the target's own
    measurements what sets it apart).
    """

    def __init__(
        self,
        blocks: Sequence[np.ndarray],
        y: np.ndarray,
        hyper: tuple[list[float], float] | None = None,
    ) -> None:
        """Fit to ``y``, with ``hyper`` (prior variances, noise) or the evidence's choice."""
        self.mu_y, self.sd_y = float(y.mean()), float(y.std()) or 1.0
        z = (y - self.mu_y) / self.sd_y
        variances, self.noise = hyper or _best_hyper(blocks, z)
        self.hyper = (variances, self.noise)
        prior = np.concatenate(
            [np.full(b.shape[1], v) for b, v in zip(blocks, variances, strict=True)]
        )
        self.cols = prior > 0  # a zero prior variance drops the column
        self.phi, self.prior = np.hstack(blocks)[:, self.cols], prior[self.cols]
        precision = self.phi.T @ self.phi / self.noise + np.diag(1.0 / self.prior)
        self.chol = np.linalg.cholesky(precision)
        self.mean = _cho_solve(self.chol, self.phi.T @ z / self.noise)

    def draw(self, rng: np.random.Generator) -> np.ndarray:
        """One weight vector from the posterior."""
        e = rng.standard_normal(self.mean.size)
        return self.mean + np.linalg.solve(self.chol.T, e)

    def sd(self, blocks: Sequence[np.ndarray]) -> np.ndarray:
        """Posterior standard deviation (original scale) at the given feature rows, computed
        in the dual (n x n) form because there are far fewer trials than features."""
        phi = np.hstack(blocks)[:, self.cols]
        gram = (self.phi * self.prior) @ self.phi.T + self.noise * np.eye(len(self.phi))
        k = (phi * self.prior) @ self.phi.T
        half = np.linalg.solve(np.linalg.cholesky(gram), k.T)
        var = (phi * phi) @ self.prior - (half * half).sum(0)
        return self.sd_y * np.sqrt(np.clip(var, 0.0, None))

    def predict(self, blocks: Sequence[np.ndarray], weights: np.ndarray) -> np.ndarray:
        """Targets (original scale) at the given feature rows under ``weights``."""
        return self.mu_y + self.sd_y * (np.hstack(blocks)[:, self.cols] @ weights)


def _best_hyper(blocks: Sequence[np.ndarray], z: np.ndarray) -> tuple[list[float], float]:
    """The prior variances and noise with the highest log marginal likelihood of ``z``."""
    scores, options = _scored(blocks, z[:, None])
    return options[int(np.argmax(scores[:, 0]))]


def best_target(
    blocks: Sequence[np.ndarray], targets: Sequence[np.ndarray]
) -> tuple[int, tuple[list[float], float]]:
    """Which of several targets of the same rows the model explains best, with the prior
    variances and noise it best does it with: the highest log marginal likelihood of each
    target on its own standardised scale, plus that scale's log Jacobian (-n log sd) so that
    targets of different spread compare as densities of the same rows."""
    y = np.stack(targets, axis=1)
    sd = y.std(axis=0)
    sd = np.where(sd > 0, sd, 1.0)
    scores, hypers = _scored(blocks, (y - y.mean(axis=0)) / sd)
    total = scores - y.shape[0] * np.log(sd)[None, :]
    best, which = np.unravel_index(int(np.argmax(total)), total.shape)
    return int(which), hypers[int(best)]


def _scored(
    blocks: Sequence[np.ndarray], z: np.ndarray
) -> tuple[np.ndarray, list[tuple[list[float], float]]]:
    """Log marginal likelihood of each column of ``z`` (options x columns) under each option
    of the grid, and those options."""
    evidence = _Evidence(blocks, z)
    options = sorted({(*_variances(h, len(blocks)), h[-1]) for h in _GRID})
    scores = np.array([evidence(list(o[:-1]), o[-1]) for o in options])
    return scores, [(list(o[:-1]), o[-1]) for o in options]


class _Evidence:
    """log N(z | 0, Phi Lambda Phi' + s I) up to a constant, for each column of ``z`` and any
    prior variance per block and noise s, in whichever of the dual (rows) or primal (columns)
    forms is smaller. The products that do not depend on the variances are computed once, on
    first need, and every column shares each factorisation."""

    def __init__(self, blocks: Sequence[np.ndarray], z: np.ndarray) -> None:
        self.blocks, self.z = list(blocks), z
        self.block_of = np.repeat(np.arange(len(self.blocks)), [b.shape[1] for b in self.blocks])
        self._grams: list[np.ndarray] = []  # B B' per block (dual form)
        self._cross: tuple[np.ndarray, np.ndarray] | None = None  # Phi'Phi, Phi'z (primal)

    def __call__(self, variances: list[float], s: float) -> np.ndarray:
        prior = np.asarray(variances, dtype=float)[self.block_of]
        keep = prior > 0  # a zero prior variance drops the column
        n = self.z.shape[0]
        if n <= int(keep.sum()):
            return self._dual(variances, s)
        if self._cross is None:
            phi = np.hstack(self.blocks)
            self._cross = (phi.T @ phi, phi.T @ self.z)
        gram, proj = self._cross[0][np.ix_(keep, keep)] / s, self._cross[1][keep] / s
        prior = prior[keep]
        chol = np.linalg.cholesky(np.diag(1.0 / prior) + gram)
        quad = (self.z * self.z).sum(0) / s - (proj * _cho_solve(chol, proj)).sum(0)
        logdet = 2 * np.log(np.diag(chol)).sum() + np.log(prior).sum() + n * math.log(s)
        return -0.5 * quad - 0.5 * logdet

    def _dual(self, variances: list[float], s: float) -> np.ndarray:
        if not self._grams:
            self._grams = [b @ b.T for b in self.blocks]
        cov = s * np.eye(self.z.shape[0])
        for v, gram in zip(variances, self._grams, strict=True):
            cov = cov + v * gram if v > 0 else cov
        chol = np.linalg.cholesky(cov)
        quad = (self.z * _cho_solve(chol, self.z)).sum(0)
        return -0.5 * quad - np.log(np.diag(chol)).sum()


def _cho_solve(chol: np.ndarray, rhs: np.ndarray) -> np.ndarray:
    return np.linalg.solve(chol.T, np.linalg.solve(chol, rhs))


def product_size(values: Mapping[str, Sequence[Any]]) -> int:
    return math.prod(len(v) for v in values.values())


def enumerate_points(values: Mapping[str, Sequence[Any]]) -> list[dict[str, Any]]:
    names = list(values)
    return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values.values())]
