"""What the additive sampler's models learn from: values per trial and tier, and which count.

``Observed`` reads this study's finished trials for one target tier; ``design`` lays any such
table (this study's, or an earlier study's measurements given as a warm start's prior) out as
the rows and feature blocks ``tuner.samplers.surrogate.BayesLinear`` fits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from optuna.study import StudyDirection
from optuna.trial import FrozenTrial

from tuner.record.trial import TrialRecord


def learns_from(t: FrozenTrial) -> bool:
    """Whether a finished trial is one the samplers learn from: not a launch on another draw of
    the workload (``tuner.run.holdout``), which measured other traffic than every other trial."""
    return TrialRecord.of(t).draw_seed is None


class Observed:
    """The finished trials as the models see them, for one target tier: ``ok_at`` holds, per
    trial and tier, whether that value is one to learn from (``tiers`` names the tiers' keys in
    the trials' ``tier_ok`` user attr); ``ok`` is the target tier's column."""

    def __init__(
        self,
        trials: Sequence[FrozenTrial],
        directions: Sequence[StudyDirection],
        tier: int,
        tiers: Sequence[int] | None = None,
    ) -> None:
        self.trials, self.directions, self.tier = list(trials), list(directions), tier
        self.ok_at = np.array(
            [_ok_at(t, len(self.directions), tiers) for t in self.trials], dtype=bool
        ).reshape(len(self.trials), len(self.directions))
        self.ok = self.ok_at[:, tier]
        values = [t.values or [math.nan] * len(self.directions) for t in self.trials]
        table = np.array(values, dtype=float).reshape(self.ok_at.shape)
        self.y = targets(table, self.ok_at, self.directions)

    def best(self, k: int) -> list[FrozenTrial]:
        """The ``k`` best trials feasible at the target tier."""
        good = np.flatnonzero(self.ok)
        order = good[np.argsort(self.y[good, self.tier])]
        return [self.trials[j] for j in order[:k]]

    def stale(self) -> int:
        """Trials finished since the target tier's best feasible one (0 before any): how long
        the search has gone without improving this tier."""
        good = np.flatnonzero(self.ok)
        if not len(good):
            return 0
        return len(self.trials) - 1 - int(good[np.argmin(self.y[good, self.tier])])

    def design(self, main: np.ndarray, pairs: np.ndarray) -> tuple[list[np.ndarray], np.ndarray]:
        """Feature blocks and targets of these trials for the target tier (see ``design``)."""
        blocks, y, _ = design(main, pairs, self.y, self.ok_at, self.tier)
        return blocks, y

    def rows(self) -> tuple[np.ndarray, np.ndarray]:
        """The (trial, tier) of each row of ``design``, in its order."""
        return rows(self.ok_at, self.tier)


def targets(
    values: np.ndarray, ok_at: np.ndarray, directions: Sequence[StudyDirection]
) -> np.ndarray:
    """Per trial and tier what the objective model fits (``objective_targets``), NaN where the
    value is not one to learn from."""
    y = np.full(ok_at.shape, np.nan)
    for i, direction in enumerate(directions):
        rows = ok_at[:, i]
        y[rows, i] = objective_targets(values[rows, i], direction)
    return y


def rows(ok_at: np.ndarray, tier: int) -> tuple[np.ndarray, np.ndarray]:
    """The (trial, tier) pairs ``design`` makes rows of: every tier's learnable values when
    there are several tiers, the one tier's otherwise."""
    if ok_at.shape[1] == 1:
        return np.flatnonzero(ok_at[:, 0]), np.zeros(int(ok_at[:, 0].sum()), dtype=int)
    tiers, trials = np.nonzero(ok_at.T)
    return trials, tiers


def design(
    main: np.ndarray, pairs: np.ndarray, y: np.ndarray, ok_at: np.ndarray, tier: int
) -> tuple[list[np.ndarray], np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """Feature blocks, targets and (trial, tier) rows: one row per (trial, tier it was
    feasible at), each tier's targets centred; the target tier's rows also fill its own copy
    of the blocks (what sets that tier apart). One tier: its rows, its blocks, uncentred."""
    trial, at = rows(ok_at, tier)
    if ok_at.shape[1] == 1:
        return [main[trial], pairs[trial]], y[trial, 0], (trial, at)
    counts = np.maximum(ok_at.sum(axis=0), 1)
    centred = y - np.nansum(y, axis=0) / counts
    mine = (at == tier)[:, None]
    rows_main, rows_pairs = main[trial], pairs[trial]
    blocks = [rows_main, rows_pairs, rows_main * mine, rows_pairs * mine]
    return blocks, centred[trial, at], (trial, at)


def _ok_at(t: FrozenTrial, n: int, tiers: Sequence[int] | None) -> list[bool]:
    """Per tier, whether the trial's value there is one to learn from: finite, answering above
    the quality floor, and feasible at that tier (its own SLOs met, every request served) when
    the trial says so per tier, else feasible as a whole."""
    finite = [_finite(v) for v in (t.values or [None] * n)]
    r = TrialRecord.of(t)
    if r.lower_quality:  # answers below the quality floor: a failure at every tier
        return [False] * n
    if tiers is not None and r.tier_ok and len(tiers) == n:
        return [f and r.feasible_at(c) for f, c in zip(finite, tiers, strict=True)]
    whole = _feasible(t) and all(finite)
    return [whole] * n


def objective_targets(
    values: Sequence[float] | np.ndarray, direction: StudyDirection
) -> np.ndarray:
    """What the objective model fits, lower is better: the log of the value when all values
    are positive (step-time factors multiply), sign-flipped when maximising."""
    y = np.asarray(values, dtype=float)
    if np.all(y > 0):
        y = np.log(y)
    return y if direction == StudyDirection.MINIMIZE else -y


def _feasible(t: FrozenTrial) -> bool:
    return all(v <= 0 for v in t.constraints.values())


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(value)
