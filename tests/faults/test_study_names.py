"""A study name is a folder name under results/: checked once, refused on one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.cli import main
from tuner.errors import StudyError
from tuner.storage.results import check_study_name

BAD_NAMES = ["../escaped", "..", "a/b", "/abs", ".hidden", "-x", "a..b", "", "sp ace"]


@pytest.mark.parametrize("name", BAD_NAMES)
def test_bad_names_are_refused(name: str) -> None:
    with pytest.raises(StudyError, match="study name"):
        check_study_name(name)


@pytest.mark.parametrize("name", ["small", "minimax_h200", "run-2.v1", "A1"])
def test_good_names_pass(name: str) -> None:
    assert check_study_name(name) == name


@pytest.mark.parametrize(
    "command",
    [
        ["run", "--space", "{space}", "--launcher", "sim", "--trials", "1"],
        ["worker", "--storage", "sqlite:///{tmp}/w.db", "--space", "{space}"],
        ["show"],
        ["export"],
        ["dashboard"],
    ],
)
def test_every_command_refuses_an_escaping_name(
    command: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = write_yaml(tmp_path / "small.yaml", dict(SMALL_SPACE))
    results = tmp_path / "results"
    args = [w.format(space=space, tmp=tmp_path) for w in command]
    args += ["--study", "../escaped", "--results-dir", str(results)]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "study name" in err
    assert not (tmp_path / "escaped").exists()
    assert not any(tmp_path.glob("*.db"))
