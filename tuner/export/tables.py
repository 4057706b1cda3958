"""``trials.csv`` and ``pareto_c<N>.csv``: every parameter, every metric, every failure reason."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pandas as pd
from optuna.trial import FrozenTrial

from tuner.export.build import Export, TierExport
from tuner.record.trial import CONSTRAINT_KEYS, TrialRecord


def trials_frame(export: Export) -> pd.DataFrame:
    """One row per trial (``trials_table``) plus failure kind, constraints, lineage, command."""
    data = export.data
    # One snapshot for both: another worker may add a trial between two reads of the study.
    frame = trials_table(data.trials, data.tiers)
    if frame.empty:
        return frame
    by_number = {t.number: t for t in data.trials}
    extra = pd.DataFrame([_extra(by_number[int(n)], export) for n in frame["trial"]])
    frame["failure"] = frame["failure"].map(lambda s: export.redactor.scrub(str(s)))
    # One column per name: the lineage repeats confirm_of and duplicate_of.
    extra = extra.drop(columns=[c for c in extra.columns if c in frame.columns])
    return pd.concat([frame.reset_index(drop=True), extra], axis=1)


def trials_table(trials: Sequence[FrozenTrial], tiers: Sequence[int]) -> pd.DataFrame:
    """Every trial: state, params, failure reason and every per-tier metric (``c<N>_<key>``)."""
    rows = []
    for t in trials:
        r = TrialRecord.of(t)
        row: dict[str, Any] = {
            "trial": t.number,
            "state": t.state.name,
            "baseline": r.baseline,
            "feasible": r.complete and r.feasible,
            "failure": r.failure or "",
            "confirm_of": r.confirm_of,
            "duplicate_of": r.duplicate_of,
            "duration_s": t.duration.total_seconds() if t.duration else None,
        }
        row.update({f"param_{k}": v for k, v in t.params.items()})
        for tier in tiers:
            for key, value in r.tier(tier).items():
                if isinstance(value, int | float):
                    row[f"c{tier}_{key}"] = value
        rows.append(row)
    return pd.DataFrame(rows)


def _extra(t: FrozenTrial, export: Export) -> dict[str, Any]:
    r = TrialRecord.of(t)
    row: dict[str, Any] = r.lineage()
    row.update(
        {f"constraint_{k}": t.constraints.get(k) for k in CONSTRAINT_KEYS} if t.constraints else {}
    )
    for tier in export.data.tiers:
        reasons = r.tier(tier).get("failure_reasons") or {}
        if reasons:
            row[f"c{tier}_failure_reasons"] = "; ".join(
                f"{n}x {r}" for r, n in sorted(reasons.items())
            )
    row["datetime_start"] = t.datetime_start.isoformat() if t.datetime_start else None
    row["engine_command"] = export.redactor.scrub(str(r.engine_command or ""))
    return row


def pareto_frame(t: TierExport) -> pd.DataFrame:
    """The tier's Pareto front (p99 TPOT vs output throughput): parameters and every metric."""
    rows = []
    tier = t.tier
    rec = tier.recommended.trial if tier.recommended else None
    base = tier.baseline.trial if tier.baseline else None
    for p in tier.front_points():
        row: dict[str, Any] = {
            "trial": p.trial,
            "recommended": p.trial == rec,
            "baseline": p.trial == base,
            "confirmations": p.confirmations,
            "spread": p.spread,
        }
        row.update({f"param_{k}": v for k, v in p.params.items()})
        row.update(p.metrics)
        rows.append(row)
    return pd.DataFrame(rows)
