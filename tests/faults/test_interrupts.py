"""Ctrl-C prints one line, never a traceback (Optuna's own, or Python's while tune loads).

Optuna's ``study.optimize`` logged a traceback for every interrupted trial; every trial now
runs through ask and tell (``tuner.run.loop``), which log none. A Ctrl-C while the command is
still importing its modules printed Python's traceback of the import.
"""

from __future__ import annotations

import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.faults.procs import finish, running, sqlite_url, tune, tune_script
from tests.tuner.conftest import write_yaml
from tests.tuner.run.test_worker import wait_for


def assert_one_line(code: int, out: str) -> None:
    assert code == 130, out
    assert "Traceback" not in out and "following error" not in out, out
    assert "KeyboardInterrupt" not in out, out


@pytest.mark.slow  # a tune process per command: about 8 s
@pytest.mark.parametrize("command", ["run", "worker"])
def test_ctrl_c_mid_trial_prints_no_traceback(
    tmp_path: Path, small_space: dict[str, Any], command: str
) -> None:
    small_space["target"] = {"kind": "sim", "profile": "h200x4", "wall_startup_s": 30.0}
    space = write_yaml(tmp_path / "s.yaml", small_space)
    url = sqlite_url(tmp_path / "results", "k")
    extra = ("--storage", url) if command == "worker" else ()
    proc = tune(command, "--space", str(space), "--study", "k", "--trials", "2", *extra,
                cwd=tmp_path)  # fmt: skip
    wait_for(lambda: running(url, "k"), timeout_s=60)
    time.sleep(0.3)  # inside the trial's launch, past the claim
    proc.send_signal(signal.SIGINT)
    code, out = finish(proc)
    assert_one_line(code, out)
    assert "interrupted" in out


@pytest.mark.slow  # timed against the interpreter's start-up: alone, not beside other tests
@pytest.mark.parametrize("start", [tune, tune_script], ids=["python -m tuner", "tune script"])
def test_ctrl_c_while_tune_loads_prints_no_traceback(tmp_path: Path, start: Any) -> None:
    proc = start("show", "--study", "nothing", cwd=tmp_path)
    time.sleep(0.3)  # importing its modules (pandas, optuna) takes about a second
    proc.send_signal(signal.SIGINT)
    assert_one_line(*finish(proc))
