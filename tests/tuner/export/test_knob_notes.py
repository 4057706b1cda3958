"""Each knob a pick keeps carries how its effect was measured, in every export alike."""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import yaml

from tests.tuner.score.test_narrow import _space, confirm_rounds, explored
from tuner.export import export_study
from tuner.export.show import show_study

NAME = "narrowed"


def _study(results: Path) -> None:
    """The table's study after its confirmation rounds, stored as ``tune run`` leaves it."""
    (results / NAME).mkdir(parents=True)
    url = f"sqlite:///{results / NAME / 'study.db'}"
    study = optuna.create_study(study_name=NAME, storage=url, direction="minimize")
    space = _space()
    attrs = {
        "objective": "p99_tpot", "tiers": [1], "space_digest": "test", "space_path": "t.yaml",
        "space_yaml": yaml.safe_dump(space, sort_keys=False), "target_kind": "sim",
        "hardware": "", "engine": space["engine"], "created": 1.7e9,
    }  # fmt: skip
    for key, value in attrs.items():
        study.set_user_attr(key, value)
    for t in confirm_rounds(explored()):
        study.add_trial(t)


def test_every_export_shows_the_measured_reversion(tmp_path: Path) -> None:
    results = tmp_path / "results"
    _study(results)
    export_study(NAME, None, None, results)
    folder = results / NAME
    recipe = yaml.safe_load((folder / "recipe.yaml").read_text())
    (point,) = recipe["presets"][NAME]["points"].values()
    assert point["params"] == {"chunk": 131072, "mode": "b"}  # noop went back to its default
    mode = point["effects"]["mode"]
    assert mode.startswith("b: reverting it measured +3.") and "worse p99_tpot" in mode
    assert "beyond the noise" in point["effects"]["chunk"]
    words = mode.removeprefix("b: ")
    commands = (folder / "commands.md").read_text()
    assert f"`mode=b: {words}`" in commands and "noop" not in commands.split("```")[0]
    (tier,) = json.loads((folder / "recommendations.json").read_text())["tiers"]
    assert tier["knobs"]["mode"]["measured_by"] == "reversion"
    assert tier["knobs"]["mode"]["words"] == words
    assert f"mode=b: {words}" in (folder / "recommendations.txt").read_text()
    assert words in (folder / "report.html").read_text()
    assert f"mode=b: {words}" in show_study(NAME, None, results)
