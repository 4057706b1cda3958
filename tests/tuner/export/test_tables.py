"""trials.csv and pareto_c<N>.csv: every trial, parameter, metric and failure reason."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from tests.tuner.export.conftest import CONFIGS, TIERS
from tuner.export import export_study
from tuner.export.tables import trials_frame


def test_trials_csv_has_every_trial_param_metric_and_reason(hand_results: Path) -> None:
    out = hand_results / "hand"
    export_study("hand", None, None, hand_results)
    table = pd.read_csv(out / "trials.csv")
    assert list(table["trial"]) == list(range(len(CONFIGS) + 5))
    assert not any(str(c).endswith(".1") for c in table.columns)  # no name twice
    assert {"confirm_of", "revert_of", "revert_at", "revert_knob"} <= set(table.columns)
    for col in ("param_max_num_seqs", "c1_p99_tpot_ms", "c4_output_throughput", "engine_command"):
        assert col in table
    for col in ("failure_kind", "constraint_slo", "duplicate_of", "datetime_start"):
        assert col in table
    failed = table.set_index("trial")
    n = len(CONFIGS)
    assert failed.loc[n + 1, "failure_kind"] == "oom"
    assert "out of memory" in failed.loc[n + 1, "failure"]
    assert failed.loc[n + 3, "state"] == "FAIL"
    assert failed.loc[n + 4, "duplicate_of"] == 1
    assert failed.loc[n + 2, "constraint_slo"] == 7.5
    assert "--max-num-seqs" in failed.loc[0, "engine_command"]


def test_pareto_csv_per_tier_holds_the_front(hand_results: Path, tmp_path: Path) -> None:
    out = tmp_path / "elsewhere"
    result = export_study("hand", None, out, hand_results)
    assert result.out_dir == out and not (hand_results / "hand" / "report.html").exists()
    assert result.export is not None
    for t in result.export.tiers:
        front = pd.read_csv(out / f"pareto_c{t.concurrency}.csv")
        assert list(front["trial"]) == t.tier.front
        assert front["recommended"].sum() == 1
        rec = front[front["recommended"]].iloc[0]
        assert t.tier.recommended is not None and rec["trial"] == t.tier.recommended.trial
        assert {"param_max_num_batched_tokens", "p99_tpot_ms", "output_throughput"} <= set(front)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        ["recipe.yaml", "commands.md", "trials.csv", "report.html"]
        + ["recommendations.txt", "recommendations.json"]
        + [f"pareto_c{c}.csv" for c in TIERS]
    )


def test_a_trial_added_while_exporting_is_left_for_the_next_export(hand_results: Path) -> None:
    """Another worker may start a trial between the export's read and its table: the table
    is built from the one snapshot the export read, not from a second read of the study."""
    result = export_study("hand", None, None, hand_results)
    assert result.export is not None
    snapshot = len(result.export.data.trials)
    result.export.data.study.enqueue_trial({"max_num_seqs": 64})
    result.export.data.study.ask()  # a RUNNING trial the snapshot has not seen
    frame = trials_frame(result.export)
    assert list(frame["trial"]) == list(range(snapshot))
