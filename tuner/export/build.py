"""Everything an export shows, as plain data: built once, then rendered into each file."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from functools import cached_property

from optuna.trial import FrozenTrial, TrialState

from tuner.export.configs import LaunchConfig, collect_secrets, launch_config
from tuner.export.importance import Importance, tier_importance
from tuner.export.secrets import Redactor
from tuner.record.trial import TrialRecord
from tuner.score.eligible import Policy
from tuner.score.recommend import TierRecommendation, recommend
from tuner.score.tiers import Tier, build_tiers
from tuner.storage.capacity import CapacityReport
from tuner.storage.study_data import StudyData


@dataclass
class Failure:
    """Why one trial produced no usable measurement."""

    trial: int
    state: str
    kind: str
    reason: str


@dataclass
class TierExport:
    tier: Tier
    launch: LaunchConfig | None
    data: StudyData = field(repr=False)

    @cached_property
    def importance(self) -> Importance:
        """What mattered at the tier, computed when a file shows it (the report alone)."""
        defaults = Policy.of(self.data.space).defaults
        return tier_importance(self.tier, self.data.trials, self.data.objective, defaults)

    @property
    def concurrency(self) -> int:
        return self.tier.concurrency


@dataclass
class Export:
    data: StudyData
    tiers: list[TierExport]
    baseline: LaunchConfig | None
    redactor: Redactor
    recommendations: list[TierRecommendation] = field(default_factory=list)  # per tier
    failures: list[Failure] = field(default_factory=list)
    capacity: CapacityReport | None = None  # capacity.json, when tune capacity has run

    def recommendation(self, concurrency: int) -> TierRecommendation | None:
        """The tier's recommendation: the one source of its pick, verdict and knob effects."""
        return next((r for r in self.recommendations if r.concurrency == concurrency), None)

    def failure_counts(self) -> dict[str, int]:
        return dict(Counter(f.kind for f in self.failures).most_common())


def build_export(data: StudyData, capacity: CapacityReport | None = None) -> Export:
    redactor = Redactor()
    collect_secrets(data.space, redactor)
    by_number = {t.number: t for t in data.trials}
    policy = Policy.of(data.space)
    recs = recommend(data.trials, data.objective, data.tiers, policy, data.against)
    tiers = build_tiers(data.trials, recs, data.objective, policy, data.against)
    out = []
    for tier in tiers:
        rec = tier.recommended
        trial = by_number[rec.trial] if rec else None
        launch = launch_config(data.space, trial, redactor, rec.params) if trial and rec else None
        out.append(TierExport(tier, launch, data))
    base = next((t for t in data.trials if TrialRecord.of(t).baseline), None)
    baseline = launch_config(data.space, base, redactor) if base is not None else None
    fails = failures(data.trials, redactor)
    return Export(data, out, baseline, redactor, recs, fails, capacity)


def failures(trials: list[FrozenTrial], redactor: Redactor) -> list[Failure]:
    """Infeasible and failed trials with their reason; copies of a failed launch say so."""
    out = []
    for t in trials:
        r = TrialRecord.of(t)
        if r.complete and r.feasible:
            continue
        if t.state in (TrialState.RUNNING, TrialState.WAITING):
            continue
        kind = str(r.failure_kind or ("infra" if t.state == TrialState.FAIL else ""))
        if r.interrupted:
            kind = "interrupted"
        reason = str(r.failure or "no reason recorded")
        if r.duplicate_of is not None:
            reason = f"same launch as trial {r.duplicate_of}: {reason}"
        out.append(Failure(t.number, t.state.name, kind or "unknown", redactor.scrub(reason)))
    return out
