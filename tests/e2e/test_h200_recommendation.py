"""README's study on the simulated engine recommends, at every tier, a config a serving
engineer would deploy: it meets the tier's SLOs, on another draw of the workload too, and does
not win by queueing users."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest

from bench.replay_picks import measure, replay_workload
from tuner.record.trial import TrialRecord
from tuner.run.study import RunOptions, run_study
from tuner.space import load_space

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

SPACE = Path(__file__).resolve().parents[2] / "search_spaces" / "minimax_h200.yaml"


def test_every_tier_is_served_within_its_slos_without_queueing(tmp_path: Path) -> None:
    opts = RunOptions(space_path=SPACE, launcher="sim", trials=40, results_dir=tmp_path)
    summary = run_study(opts, report=lambda _: None)
    space = load_space(SPACE)
    storage = f"sqlite:///{tmp_path}/{summary.name}/study.db"
    trials = optuna.load_study(study_name=summary.name, storage=storage).trials
    for rec in summary.recommendations:
        c = rec.concurrency
        assert rec.trial is not None, f"c{c}: no pick"
        for knob, note in rec.knobs.items():  # each kept knob has an effect measured apart
            alone = note["measured_by"] == "reversion" and not note.get("within_noise")
            told = note["measured_by"] == "regression" and not note.get("together")
            assert alone or told, f"c{c}: {knob}: {note['words']}"
        for run in rec.runs:  # every launch of the pick met the tier's SLOs
            assert TrialRecord.of(trials[run]).feasible_at(c), f"c{c}: trial {run}"
        drawn = [r for r in map(TrialRecord.of, trials) if r.draw_seed and r.root == rec.trial]
        assert all(r.feasible_at(c) for r in drawn), f"c{c}: not held on another draw"
        # Launched on another draw, or the tier's launches there went to earlier picks, said.
        assert drawn or "study's draw alone" in rec.choice, f"c{c}: never on another draw"
        for seed in (7, 8):  # draws the study never saw, answers of 300-900 tokens
            replay = measure(space, rec.params, replay_workload(space, seed, 0.5), c)
            assert not replay["violations"], f"c{c}, seed {seed}: {replay['violations']}"
        seats = rec.params.get("max_num_seqs", 1024)
        if seats < c:  # a seat limit under the tier: only within SLOs, and its users wait
            # no longer than where the fewest were held; the pick's line gives the proof
            assert any(s.applies_to(c) for s in space.slos)
            assert "within the tier's SLOs" in rec.choice, rec.choice
            proof = ("the fewest any eligible config held", "where every user was seated")
            assert any(p in rec.choice for p in proof) or "the fewest users were held" in (
                rec.choice
            ), rec.choice
