"""Rank correlation for the benches that compare one ordering of configs with another."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Rank correlation, ties at their mean rank (NaN with fewer than 3 pairs)."""
    if len(a) < 3:
        return math.nan
    ra, rb = _ranks(np.asarray(a, float)), _ranks(np.asarray(b, float))
    if ra.std() == 0 or rb.std() == 0:
        return math.nan
    return float(np.corrcoef(ra, rb)[0, 1])


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="stable")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    for v in np.unique(x):  # ties share their mean rank
        ranks[x == v] = ranks[x == v].mean()
    return ranks
