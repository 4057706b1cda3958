"""A study races its tiers: losers stop early, the baseline, confirmations and picks do not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution

from objectives.objective import get_objective
from tests.tuner.conftest import write_yaml
from tuner.record.trial import TrialRecord
from tuner.run.race import race_for
from tuner.run.study import RunOptions, run_study
from tuner.space.load import load_space


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


DEFAULTS = {"max_num_batched_tokens": 8192, "max_num_seqs": 64, "long_prefill_token_threshold": 0}


def _measured(study: optuna.Study, tiers: dict[int, dict[str, Any]], **attrs: Any) -> None:
    """A finished launch: per tier its P99 TPOT, 16 requests' TPOTs (s) and server figures."""
    user_attrs: dict[str, Any] = {"feasible": True, **attrs, "tiers": {}, "requests": {}}
    for tier, t in tiers.items():
        user_attrs["tiers"][str(tier)] = {"p99_tpot_ms": t["tpot"], "server": t.get("server", {})}
        user_attrs["requests"][str(tier)] = [t["tpot"] / 1000] * 16
    study.add_trial(
        optuna.trial.create_trial(
            params=DEFAULTS,
            distributions={k: CategoricalDistribution([v]) for k, v in DEFAULTS.items()},
            values=[t["tpot"] for t in tiers.values()],
            user_attrs=user_attrs,
            state=optuna.trial.TrialState.COMPLETE,
        )
    )


def test_a_pick_that_held_users_is_no_yardstick_for_the_race(
    space_file: Path, small_space: dict[str, Any]
) -> None:
    """A seat limit of 2 at 4 users gives the lowest TPOT there by making 2 wait: a launch that
    seats all 4 is slower per token and may still win c4 by its P99 TTFT, so c4 is not raced
    on the objective against such a pick (c1, whose pick seated its user, is)."""
    small_space["slos"] = [{"metric": "p99_ttft_ms", "max": 60000}]
    space = load_space(write_yaml(space_file, small_space))
    study = optuna.create_study(directions=["minimize", "minimize"])
    held = {"users_held": 2.0}
    _measured(study, {1: {"tpot": 10.0}, 4: {"tpot": 12.0, "server": held}}, baseline=True)
    race = race_for(space, get_objective("p99_tpot"), study.get_trials())
    assert race is not None and set(race.incumbents) == {1}
