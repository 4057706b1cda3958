"""A rehearsal on the simulated engine and the real night on the same space stay apart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.tuner.conftest import write_yaml
from tuner.errors import StudyError
from tuner.run.study import RunOptions, run_study


def real_space(small_space: dict[str, Any], tmp_path: Path) -> Path:
    """The small space aimed at a server of its own, rehearsed on the simulated engine."""
    small_space["sim"] = small_space.pop("target") | {"kind": "sim"}
    small_space["sim"].pop("kind")
    small_space["target"] = {"kind": "process"}
    small_space["engine"]["command"] = ["python", "-m", "launchers.sim"]
    small_space["workload"]["tiers"] = [1]
    return write_yaml(tmp_path / "small.yaml", small_space)


def run(space: Path, tmp_path: Path, **kw: Any) -> str:
    opts = RunOptions(space_path=space, results_dir=tmp_path, trials=1, confirm=0, **kw)
    return run_study(opts, report=lambda _: None).name


def test_a_rehearsal_is_a_study_of_its_own(small_space: dict[str, Any], tmp_path: Path) -> None:
    space = real_space(small_space, tmp_path)
    assert run(space, tmp_path, launcher="sim") == "small-sim"
    assert (tmp_path / "small-sim" / "study.db").exists()
    assert not (tmp_path / "small").exists()  # the real night's name is still free


def test_a_sim_space_keeps_its_name(space_file: Path, tmp_path: Path) -> None:
    assert run(space_file, tmp_path, launcher="sim") == "small"


def test_resuming_on_another_launcher_says_which_made_it(
    small_space: dict[str, Any], tmp_path: Path
) -> None:
    space = real_space(small_space, tmp_path)
    run(space, tmp_path, launcher="sim", study="night")
    with pytest.raises(StudyError) as err:
        run(space, tmp_path, study="night")
    line = str(err.value)
    assert "made with the 'sim' launcher" in line and "launches 'process'" in line
    assert "--launcher sim" in line and "--study NEW_NAME" in line
