"""How far a launch's probe answers agree with the baseline's (``objectives.probes``).

Three figures, as a serving engineer reads them:

- ``exact``: the share of probes answered token for token like the baseline;
- ``first_diff``: the mean position (0-based) of the first token that differs, over the
  probes that differ (None when none does): a late divergence is a different word near the
  end, an early one a different answer;
- ``tokens``: the token agreement rate, the share of answer positions holding the same token
  (a shorter answer's missing positions count as differing).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Agreement:
    """A launch's answers against the baseline's."""

    probes: int
    identical: int
    tokens: float
    first_diff: float | None = None

    @property
    def exact(self) -> float:
        return self.identical / self.probes if self.probes else 1.0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "exact": self.exact}

    def words(self) -> str:
        """``5/8 identical, 97.7% of tokens, first difference at token 9.3``."""
        text = f"{self.identical}/{self.probes} identical, {self.tokens:.1%} of tokens"
        if self.first_diff is not None:
            text += f", first difference at token {self.first_diff:.1f}"
        return text


def agreement(answers: Sequence[Sequence[Any]], reference: Sequence[Sequence[Any]]) -> Agreement:
    """``answers`` against ``reference``, probe by probe (the shorter list decides how many)."""
    pairs = list(zip(answers, reference, strict=False))
    if not pairs:
        return Agreement(probes=0, identical=0, tokens=1.0)
    firsts = [first_difference(a, r) for a, r in pairs]
    diffs = [f for f in firsts if f is not None]
    same = sum(_same_at(a, r) for a, r in pairs)
    length = sum(max(len(a), len(r)) for a, r in pairs)
    return Agreement(
        probes=len(pairs),
        identical=len(pairs) - len(diffs),
        tokens=same / length if length else 1.0,
        first_diff=statistics.fmean(diffs) if diffs else None,
    )


def first_difference(answer: Sequence[Any], reference: Sequence[Any]) -> int | None:
    """The first position where the two differ (None: identical)."""
    for i, (a, r) in enumerate(zip(answer, reference, strict=False)):
        if a != r:
            return i
    return None if len(answer) == len(reference) else min(len(answer), len(reference))


def _same_at(answer: Sequence[Any], reference: Sequence[Any]) -> int:
    return sum(a == r for a, r in zip(answer, reference, strict=False))
