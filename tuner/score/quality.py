"""Whether a config answers as the baseline does: its agreement, its score, and the gate.

The one rule of the quality floor, read by the run loop (a trial below it is a failure the
sampler learns from) and by every export (it cannot be a pick; it is shown, marked). Each
launch is set against the baseline's first launch: its probe answers (``objectives.agreement``)
and, where the space runs a quality command, its score as a fraction of the baseline's. A
config's quality is its worst launch's, as its feasibility is.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from objectives.agreement import Agreement, agreement
from tuner.record.trial import TrialRecord
from tuner.score.pooling import Config
from tuner.space.schema import Space


@dataclass(frozen=True)
class Gate:
    """The space's floor, as scoring reads it (the default: recorded, never gating)."""

    on: bool = False
    floor: float = 0.95
    measure: str = "tokens"  # or "exact"; a command's score ratio when ``scored``
    scored: bool = False
    higher_is_better: bool = True

    @classmethod
    def of(cls, space: Space) -> Gate:
        q = space.quality
        cmd = q.command
        better = cmd.higher_is_better if cmd is not None else True
        return cls(space.quality_gated(), q.min_agreement, q.measure, cmd is not None, better)


@dataclass(frozen=True)
class Quality:
    """One launch (or a config's worst launch) against the baseline."""

    agreement: Agreement | None = None
    score: float | None = None
    baseline_score: float | None = None
    ratio: float | None = None  # score relative to the baseline's, 1 = as good
    value: float | None = None  # what the floor reads (None: not measured)
    below: bool = False

    def words(self) -> str:
        """``5/8 identical, 97.7% of tokens, ...; score 0.62 (0.80 of the baseline's)``."""
        parts = [self.agreement.words()] if self.agreement is not None else []
        if self.score is not None:
            of = f" ({self.ratio:.2f} of the baseline's)" if self.ratio is not None else ""
            parts.append(f"score {self.score:.4g}{of}")
        return "; ".join(parts) or "not measured"

    def to_json(self) -> dict[str, Any]:
        return {
            "agreement": self.agreement.to_json() if self.agreement is not None else None,
            "score": self.score,
            "baseline_score": self.baseline_score,
            "score_ratio": self.ratio,
            "lower_quality": self.below,
        }


def judge(
    answers: Sequence[Any] | None,
    score: float | None,
    reference: tuple[Sequence[Any] | None, float | None],
    gate: Gate,
) -> Quality:
    """One launch's answers and score against the baseline launch's (``reference``)."""
    base_answers, base_score = reference
    agreed = None if base_answers is None or answers is None else agreement(answers, base_answers)
    ratio = score_ratio(score, base_score, gate.higher_is_better)
    value = ratio if gate.scored else _measure(agreed, gate.measure)
    below = gate.on and value is not None and value < gate.floor
    return Quality(agreed, score, base_score, ratio, value, below)


def launch_quality(run: TrialRecord, reference: TrialRecord | None, gate: Gate) -> Quality:
    """``judge`` of a stored launch."""
    ref = (reference.answers, reference.quality_score) if reference is not None else (None, None)
    return judge(run.answers, run.quality_score, ref, gate)


def config_quality(c: Config, base: Config | None, gate: Gate) -> Quality:
    """A config's quality: its worst launch against the baseline's first launch."""
    reference = base.root if base is not None else None
    return worst([launch_quality(r, reference, gate) for r in c.runs])


def worst(qualities: Sequence[Quality]) -> Quality:
    """The launch that answers least like the baseline (the first unmeasured one if none is)."""
    measured = [q for q in qualities if q.value is not None]
    if not measured:
        return qualities[0] if qualities else Quality()
    return min(measured, key=lambda q: q.value if q.value is not None else 1.0)


def score_ratio(score: float | None, base: float | None, higher_is_better: bool) -> float | None:
    """``score`` as a fraction of the baseline's (for an error rate, the baseline's of it)."""
    if score is None or base is None:
        return None
    good, ref = (score, base) if higher_is_better else (base, score)
    if ref == 0:
        return 1.0 if good >= ref else 0.0
    return good / ref


def _measure(agreed: Agreement | None, measure: str) -> float | None:
    if agreed is None:
        return None
    return agreed.exact if measure == "exact" else agreed.tokens
