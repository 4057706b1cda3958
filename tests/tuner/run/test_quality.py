"""Quality checks at a trial's end: the command's score, and the gate the sampler learns from."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml

from objectives.endpoint import Endpoint
from tests.tuner.conftest import SMALL_SPACE
from tuner.errors import InfraError, SpaceError
from tuner.record.trial import TrialOutcome, TrialRecord
from tuner.run.quality import gate_outcome, read_score, run_command
from tuner.run.study import RunOptions, run_study
from tuner.score.quality import Gate
from tuner.space.load import load_space
from tuner.space.quality import QualityCommand

ENDPOINT = Endpoint(model="tiny", base_url="http://127.0.0.1:1234/")


def test_the_score_is_the_patterns_last_match_else_the_last_number() -> None:
    out = "acc: 0.50\nsome log 12\nacc: 0.75 (stderr 0.01)\n"
    assert read_score(out, r"acc: ([0-9.]+)") == 0.75
    assert read_score(out, None) == 0.01
    assert read_score("nothing here", None) is None
    assert read_score(out, r"f1: ([0-9.]+)") is None


def test_the_command_is_given_the_url_and_model(tmp_path: Path) -> None:
    script = "import os, sys; print(sys.argv[1], os.environ['TUNE_QUALITY_MODEL']); print('0.5')"
    cmd = QualityCommand(argv=[sys.executable, "-c", script, "{url}/v1"])
    assert run_command(cmd, ENDPOINT, tmp_path) == 0.5
    shown = QualityCommand(argv=[sys.executable, "-c", script, "{url}/v1"], score=r":(\d+)/v1 tiny")
    assert run_command(shown, ENDPOINT, tmp_path) == 1234.0  # the port, read back from argv


@pytest.mark.parametrize(
    ("argv", "match"),
    [
        ([sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], "exited 3: boom"),
        ([sys.executable, "-c", "print('no score')"], "printed no number"),
        (["/nonexistent/eval"], "quality command /nonexistent/eval"),
    ],
)
def test_a_command_that_fails_stops_the_trial_as_infrastructure(
    tmp_path: Path, argv: list[str], match: str
) -> None:
    with pytest.raises(InfraError, match=match):
        run_command(QualityCommand(argv=argv), ENDPOINT, tmp_path)


def test_a_score_pattern_without_a_group_is_refused_with_its_path(tmp_path: Path) -> None:
    data = {**SMALL_SPACE, "quality": {"command": {"argv": ["eval"], "score": "acc: [0-9.]+"}}}
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(SpaceError, match=r"quality\.command\.score.*needs a group"):
        load_space(path)


def _stored(answers: Any, baseline: bool) -> optuna.trial.FrozenTrial:
    attrs = {"answers": answers, "baseline": baseline, "tiers": {}, "feasible": True}
    return optuna.trial.create_trial(values=[1.0], user_attrs=attrs)


def test_below_the_floor_is_a_constraint_and_a_reason() -> None:
    base = _stored([[1, 2, 3, 4]], baseline=True)
    out = TrialOutcome(values=[1.0], answers=[[1, 2, 9, 9]])
    gate_outcome(out, [base], Gate(on=True, floor=0.9), baseline=False)
    assert out.constraints["quality"] == pytest.approx(0.4) and not out.feasible
    assert out.failure_kind == "quality"
    assert out.failure is not None and out.failure.startswith("lower quality: 0/1 identical")
    kept = TrialOutcome(values=[1.0], answers=[[1, 2, 9, 9]])
    gate_outcome(kept, [base], Gate(on=False, floor=0.9), baseline=False)
    assert kept.constraints["quality"] == 0.0 and kept.failure is None


def test_before_the_baseline_answered_nothing_is_judged() -> None:
    out = TrialOutcome(values=[1.0], answers=[[1, 2, 9, 9]])
    gate_outcome(out, [], Gate(on=True, floor=0.9), baseline=False)
    assert out.constraints["quality"] == 0.0
    own = TrialOutcome(values=[1.0], answers=[[1, 2, 9, 9]])
    gate_outcome(own, [], Gate(on=True, floor=1.0), baseline=True)  # agrees with itself
    assert own.constraints["quality"] == 0.0


def _kv_space(tmp_path: Path, floor: float) -> Path:
    data: dict[str, Any] = yaml.safe_load(yaml.safe_dump(SMALL_SPACE))
    data["parameters"] = {
        "kv_cache_dtype": {
            "type": "categorical",
            "choices": ["auto", "fp8"],
            "default": "auto",
            "unset": "auto",
            "flag": "--kv-cache-dtype",
        }
    }
    data["rules"] = []
    data["quality"] = {"min_agreement": floor}
    path = tmp_path / f"kv{int(floor * 100)}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def _study(tmp_path: Path, floor: float) -> tuple[list[Any], list[TrialRecord]]:
    space = _kv_space(tmp_path, floor)
    opts = RunOptions(
        space_path=space, results_dir=tmp_path / "r", trials=2, confirm=0, sampler="grid"
    )
    recs = run_study(opts, report=lambda _: None).recommendations
    url = f"sqlite:///{tmp_path}/r/{space.stem}/study.db"
    study = optuna.load_study(study_name=space.stem, storage=url)
    return recs, [TrialRecord.of(t) for t in study.get_trials()]


def test_a_simulated_fp8_kv_cache_is_gated_on_its_answers(tmp_path: Path) -> None:
    recs, trials = _study(tmp_path, floor=0.95)
    fp8 = next(t for t in trials if t.params.get("kv_cache_dtype") == "fp8")
    assert fp8.lower_quality and fp8.failure_kind == "quality"
    assert fp8.answers is not None and len(fp8.answers) == 8
    assert (tmp_path / "r" / "kv95" / "trials" / f"{fp8.number:04d}" / "answers.json").is_file()
    assert all(r.trial != fp8.number for r in recs)
    # The report shows it on its tier's front, marked; the picks' answers agree exactly.
    report = (tmp_path / "r" / "kv95" / "report.html").read_text()
    assert f"{fp8.number} (lower quality)" in report
    assert "8/8 100.0%" in (tmp_path / "r" / "kv95" / "recommendations.txt").read_text()
    loose_recs, loose = _study(tmp_path, floor=0.5)
    fp8 = next(t for t in loose if t.params.get("kv_cache_dtype") == "fp8")
    assert not fp8.lower_quality
    assert any(r.trial == fp8.number for r in loose_recs)
    # A pick that answers otherwise says so beside it, in the recipe and the table.
    recipe = yaml.safe_load((tmp_path / "r" / "kv50" / "recipe.yaml").read_text())
    shown = [p["answers"] for p in _points(recipe) if p["answers"]["identical"] < 8]
    assert shown and all(0.5 <= a["tokens"] < 1.0 for a in shown)
    assert all(a["first_difference"] is not None for a in shown)


def _points(recipe: Any) -> list[dict[str, Any]]:
    # Every tier's point, wherever the recipe nests them.
    if isinstance(recipe, dict):
        if "answers" in recipe and "params" in recipe:
            return [recipe]
        return [p for v in recipe.values() for p in _points(v)]
    if isinstance(recipe, list):
        return [p for v in recipe for p in _points(v)]
    return []
