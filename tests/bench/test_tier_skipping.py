"""The tier-skipping bound: the tier time after a launch's first miss, and what a skip hides."""

from __future__ import annotations

import datetime as dt
from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from bench.tier_skipping import Hidden, main, study_saving, table_hidden
from tuner.errors import TunerError

T0 = dt.datetime(2026, 1, 1)


def _trial(tiers_s: dict[str, float], ok: dict[str, bool], startup: float = 100.0) -> Any:
    times = {"startup_s": startup, "ready": True, "warmup_s": 10.0, "tiers_s": tiers_s}
    return optuna.trial.create_trial(
        params={"x": 1},
        distributions={"x": CategoricalDistribution([1, 2])},
        values=[1.0],
        user_attrs={"times": times, "tier_ok": ok},
        state=TrialState.COMPLETE,
    )


def test_saving_counts_only_the_tiers_after_the_first_miss() -> None:
    tiers = {"1": 30.0, "8": 20.0, "40": 50.0}
    trials = [
        _trial(tiers, {"1": True, "8": True, "40": True}),  # 210 s, nothing to skip
        _trial(tiers, {"1": True, "8": False, "40": True}),  # 210 s, 50 s after the miss
        _trial(tiers, {"1": False, "8": False, "40": False}),  # 210 s, 70 s after the miss
    ]
    s = study_saving(trials)
    assert (s.launches, s.missed) == (3, 2)
    assert s.engine_s == pytest.approx(630.0) and s.after_miss_s == pytest.approx(120.0)
    assert s.share == pytest.approx(120.0 / 630.0)


def _rec(values: list[float], ok: list[bool] | None, kind: str | None = None) -> dict[str, Any]:
    slo = 0.0 if ok is None or all(ok) else 1.0
    return {"values": values, "constraints": {"slo": slo}, "kind": kind, "tier_ok": ok}


def test_hidden_counts_later_tiers_a_skip_would_have_thrown_away() -> None:
    """Config m misses c8 on one replicate and is the best at c40 on both: a skip after the
    miss hides that answer. A crash is nothing to skip; a miss at the top tier neither."""
    table = {}
    for r in ("a", "b"):
        table[f"{r}|good"] = _rec([10.0, 20.0, 40.0], [True, True, True])
        table[f"{r}|m"] = _rec([9.0, 30.0, 38.0], [True, r == "b", True])
        table[f"{r}|top"] = _rec([11.0, 21.0, 90.0], [True, True, False])
        table[f"{r}|crash"] = _rec([1e9] * 3, None, kind="crash")
    hidden = table_hidden(table, 0.03, maximize=False)
    assert hidden == Hidden(
        launches=4, missed=1, later_tiers=1, later_feasible=1, later_near_best=1
    )


def test_without_a_study_or_a_table_it_says_what_to_give() -> None:
    with pytest.raises(TunerError, match="give --study and --storage, or --table"):
        main([])
