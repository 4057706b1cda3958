"""`tune run` / `tune show` as a user calls them: exit codes and the one-line errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.tuner.conftest import write_yaml
from tuner.cli import main

REPO = Path(__file__).resolve().parents[3]


def tune(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "tuner", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_run_then_show(space_file: Path, tmp_path: Path) -> None:
    done = tune("run", "--space", str(space_file), "--trials", "3", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "recommended config per concurrency tier" in done.stdout
    for tier in ("c1", "c4"):
        assert f"\n{tier}: " in done.stdout
    shown = tune("show", "--study", "small", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "3 finished trials" in shown.stdout
    assert "baseline" in shown.stdout


def one_line_error(capsys: pytest.CaptureFixture[str], argv: list[str]) -> str:
    code = main(argv)
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert err.startswith("error: ") and "\n" not in err, err
    assert "Traceback" not in err
    return err


def test_unknown_objective_lists_valid(space_file: Path, tmp_path: Path, capsys) -> None:
    err = one_line_error(
        capsys,
        [
            "run",
            "--space",
            str(space_file),
            "--objective",
            "fastest",
            "--results-dir",
            str(tmp_path / "r"),
        ],
    )
    assert "unknown objective 'fastest'" in err and "p99_tpot" in err and "median_tpot" in err
    assert not (tmp_path / "r").exists()


def test_bad_space_one_line(space_file: Path, small_space, tmp_path: Path, capsys) -> None:
    small_space["parameters"]["max_num_seqs"]["type"] = "integer"
    write_yaml(space_file, small_space)
    err = one_line_error(
        capsys, ["run", "--space", str(space_file), "--results-dir", str(tmp_path / "r")]
    )
    assert str(space_file) in err and "parameters.max_num_seqs.type" in err and "'integer'" in err
    assert not (tmp_path / "r").exists()


def test_bad_timeout(space_file: Path, tmp_path: Path, capsys) -> None:
    err = one_line_error(capsys, ["run", "--space", str(space_file), "--timeout", "soon"])
    assert "cannot read duration 'soon'" in err


def test_show_missing_study(tmp_path: Path, capsys) -> None:
    err = one_line_error(capsys, ["show", "--study", "nope", "--results-dir", str(tmp_path)])
    assert "no study 'nope'" in err


def test_debug_shows_traceback(space_file: Path, tmp_path: Path) -> None:
    done = tune(
        "--debug", "run", "--space", str(space_file), "--objective", "fastest", cwd=tmp_path
    )
    assert done.returncode != 0 and "Traceback" in done.stderr


def test_usage_error_exit_code(capsys) -> None:
    assert main(["run"]) == 2


def test_warm_start_flag_reaches_the_study(space_file: Path, tmp_path: Path, capsys) -> None:
    common = ["run", "--space", str(space_file), "--results-dir", str(tmp_path / "r")]
    assert main([*common, "--study", "a", "--trials", "2", "--confirm", "0"]) == 0
    argv = [*common, "--study", "b", "--trials", "2", "--confirm", "0", "--warm-start", "a"]
    assert main(argv) == 0
    assert "warm-started from 'a'" in capsys.readouterr().out
    err = one_line_error(capsys, [*common, "--study", "c", "--warm-start", "nope"])
    assert "--warm-start nope: no study 'nope' under" in err
    assert not (tmp_path / "r" / "c").exists()
