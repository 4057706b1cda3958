"""A study races its tiers: losers stop early, the baseline, confirmations and picks do not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna

from tests.tuner.conftest import write_yaml
from tuner.record.trial import TrialRecord
from tuner.run.study import RunOptions, run_study


def run(space_file: Path, small_space: dict[str, Any], tmp_path: Path, **study: Any) -> Any:
    small_space["workload"]["num_prompts"] = 24  # enough pairs for the signed-rank test
    small_space["study"].update(study)
    write_yaml(space_file, small_space)
    opts = RunOptions(space_path=space_file, results_dir=tmp_path / "results", trials=8)
    summary = run_study(opts, report=lambda _: None)
    url = f"sqlite:///{tmp_path / 'results' / 'small' / 'study.db'}"
    trials = optuna.load_study(study_name="small", storage=url).trials
    return summary, [TrialRecord.of(t) for t in trials if TrialRecord.of(t).is_measurement]


def test_the_baseline_confirmations_and_picks_are_measured_in_full(
    space_file: Path, small_space: dict[str, Any], tmp_path: Path
) -> None:
    summary, records = run(space_file, small_space, tmp_path)
    tiers = small_space["workload"]["tiers"]
    assert any(r.decided_after(c) is not None for r in records for c in tiers)  # it raced
    for r in records:
        if r.baseline or r.confirm_of is not None:
            assert all(r.measured_in_full(c) for c in tiers), r.number
    by_number = {r.number: r for r in records}
    for rec in summary.recommendations:
        assert rec.runs and all(by_number[n].measured_in_full(rec.concurrency) for n in rec.runs)


def test_race_false_measures_every_tier_in_full(
    space_file: Path, small_space: dict[str, Any], tmp_path: Path
) -> None:
    _, records = run(space_file, small_space, tmp_path, race=False)
    assert all(r.measured_in_full(c) for r in records for c in small_space["workload"]["tiers"])


def test_a_tier_past_the_spaces_longest_gap_limit_stops_early_and_is_no_pick(
    space_file: Path, small_space: dict[str, Any], tmp_path: Path
) -> None:
    """Every launch but the baseline (in full) stops each tier at the first request whose
    longest gap passed the space's max_itl_ms limit, far below what any config gives."""
    small_space["slos"] = [{"metric": "max_itl_ms", "max": 0.001}]
    summary, records = run(space_file, small_space, tmp_path)
    tiers = small_space["workload"]["tiers"]
    raced = [r for r in records if not r.baseline and r.confirm_of is None]
    assert raced and all(r.decided_after(c) == 1 for r in raced for c in tiers)
    assert all(rec.trial is None for rec in summary.recommendations)
