"""Every result file has one writer: what ``tune run`` leaves is what ``tune export`` writes.

A small study runs on the simulated engine (with a confirmation round, so that pooling and
verdicts take part); then the export is run on its storage alone, over the run's own folder
and into a fresh one. Every file the run left must come out byte-identical, the
recommendations included, and the files must agree with each other on every tier's pick.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
import yaml

from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.export import TABLES, export_study
from tuner.run.study import RunOptions, run_study

NOT_RESULTS = {"study.db", "study.db.tune-lock", "trials"}


def result_files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in folder.iterdir() if p.name not in NOT_RESULTS}


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, bytes]]:
    tmp = tmp_path_factory.mktemp("one_writer")
    space = write_yaml(tmp / "small.yaml", SMALL_SPACE)
    results = tmp / "results"
    opts = RunOptions(space_path=space, results_dir=results, trials=4, confirm=1)
    run_study(opts, report=lambda _: None)
    return results, result_files(results / "small")


def test_export_rewrites_every_file_the_run_wrote_byte_for_byte(
    ran: tuple[Path, dict[str, bytes]], tmp_path: Path
) -> None:
    results, by_run = ran
    assert set(TABLES) <= set(by_run) and "report.html" in by_run
    again = export_study("small", None, None, results)
    assert {p.name for p in again.files} == set(by_run)  # no file the export does not write
    assert result_files(results / "small") == by_run
    elsewhere = export_study("small", None, tmp_path / "out", results)
    assert {p.name: p.read_bytes() for p in elsewhere.files} == by_run


def test_the_files_agree_on_every_tiers_pick(ran: tuple[Path, dict[str, bytes]]) -> None:
    _, files = ran
    recs = json.loads(files["recommendations.json"])["tiers"]
    picks = {f"c{r['concurrency']}": r["trial"] for r in recs}
    assert all(trial is not None for trial in picks.values()), picks
    recipe = yaml.safe_load(files["recipe.yaml"])
    points = next(iter(recipe["presets"].values()))["points"]
    assert {name: p["trial"] for name, p in points.items()} == picks
    text, commands = files["recommendations.txt"].decode(), files["commands.md"].decode()
    trials = pd.read_csv(files_path(ran, "trials.csv"))
    for r in recs:
        tier = f"c{r['concurrency']}"
        assert r["choice"] in text and f"## {tier}: " in commands
        assert f"Trial {r['trial']}." in commands.split(f"## {tier}: ")[1]
        front = pd.read_csv(files_path(ran, f"pareto_{tier}.csv"))
        assert list(front.loc[front["recommended"], "trial"]) == [r["trial"]]
        assert r["trial"] in set(trials["trial"]) and set(r["runs"]) <= set(trials["trial"])


def files_path(ran: tuple[Path, dict[str, bytes]], name: str) -> Path:
    return ran[0] / "small" / name
