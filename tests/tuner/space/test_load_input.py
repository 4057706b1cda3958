"""Space files that cannot work are refused in one line naming the file, at load time."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tuner.conftest import SMALL_SPACE
from tuner.cli import main
from tuner.errors import SpaceError
from tuner.space import load_space


def one_line(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err
    return err


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def test_a_file_that_is_not_utf8_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "latin1.yaml"
    text = yaml.safe_dump({**SMALL_SPACE, "hardware": "4x H200 à Paris"}, allow_unicode=True)
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(SpaceError, match=r"latin1\.yaml: .*UTF-8.*byte 0xe0"):
        load_space(path)
    err = one_line(capsys, ["run", "--space", str(path), "--results-dir", str(tmp_path / "r")])
    assert "UTF-8" in err and "line" in err


def test_an_unknown_sim_profile_is_refused_at_load_listing_the_valid_ones(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = copy.deepcopy(SMALL_SPACE)
    space["target"] = {"kind": "sim", "profile": "nosuch"}
    path = write(tmp_path / "nosuch.yaml", space)
    with pytest.raises(SpaceError, match=r"nosuch\.yaml: target\.profile: .*'nosuch'.*h200x4"):
        load_space(path)
    err = one_line(capsys, ["run", "--space", str(path), "--results-dir", str(tmp_path / "r")])
    assert "910c" in err and "h200x4" in err
    assert not (tmp_path / "r").exists()  # refused before anything is written


def test_the_sim_section_is_checked_and_named_with_its_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    space = copy.deepcopy(SMALL_SPACE)
    space["sim"] = {"profile": "nosuch"}
    path = write(tmp_path / "real.yaml", space)
    with pytest.raises(SpaceError, match=r"real\.yaml: sim\.profile: .*'nosuch'"):
        load_space(path)
    space["sim"] = {"profle": "h200x4"}
    path = write(tmp_path / "typo.yaml", space)
    argv = ["run", "--space", str(path), "--launcher", "sim", "--results-dir", str(tmp_path)]
    err = one_line(capsys, argv)
    assert "typo.yaml: sim.profle" in err and "<space>" not in err
