"""What a study measured is its own: a resume refuses a workload file whose contents changed,
and a new study of an old name never writes into, or is mixed with, the old one's trial
folders."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.tuner.conftest import write_yaml
from tuner.cli import main


def conversations(words: int, n: int = 12) -> str:
    convs = [
        {
            "conversations": [
                {"from": "human", "value": " ".join(["word"] * words) + f" {i}"},
                {"from": "gpt", "value": "a fine answer of some length " * 3},
            ]
        }
        for i in range(n)
    ]
    return json.dumps(convs)


def run(space: Path, results: Path, trials: int = 1) -> int:
    args = ["run", "--space", str(space), "--trials", str(trials), "--confirm", "0"]
    return main([*args, "--results-dir", str(results)])


@pytest.fixture
def sharegpt_space(tmp_path: Path, small_space: dict[str, Any]) -> Path:
    (tmp_path / "conv.json").write_text(conversations(40))
    small_space["workload"]["dataset"] = {"kind": "sharegpt", "path": "conv.json", "output_len": 8}
    return write_yaml(tmp_path / "small.yaml", small_space)


def test_a_dataset_rewritten_between_runs_stops_the_resume(
    sharegpt_space: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the rerun measured the new 4000-word prompts into the same study, and its
    # repeat check copied measurements made on the old file.
    results = tmp_path / "results"
    assert run(sharegpt_space, results) == 0
    assert run(sharegpt_space, results, trials=2) == 0  # the same file: a plain resume
    (tmp_path / "conv.json").write_text(conversations(4000))
    capsys.readouterr()
    assert run(sharegpt_space, results, trials=3) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: study 'small' was measured with other contents of conv.json")
    assert err.count("\n") == 1


def test_a_new_study_of_an_old_name_keeps_no_old_trial_folder(
    space_file: Path,
    small_space: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Before: trials/0000 kept the old bench_c4.json and the new trial's files were left in
    # trials/.0000.partial, silently.
    results = tmp_path / "results"
    assert run(space_file, results) == 0
    (results / "small" / "study.db").unlink()
    small_space["workload"]["tiers"] = [1, 2]
    capsys.readouterr()
    assert run(write_yaml(space_file, small_space), results) == 0
    trials = results / "small" / "trials"
    assert sorted(p.name for p in (trials / "0000").glob("bench_*.json")) == [
        "bench_c1.json",
        "bench_c2.json",
    ]
    assert not list(trials.glob(".*.partial"))
    (aside,) = (results / "small").glob("trials.before-*")
    assert (aside / "0000" / "bench_c4.json").is_file()
    assert f"moved to {aside}" in capsys.readouterr().out
