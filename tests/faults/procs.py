"""``tune`` as a user runs it, in its own process, and the study it leaves behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import optuna
import sqlalchemy.exc
from optuna.trial import FrozenTrial, TrialState

from tuner.storage.urls import driver_url

REPO = Path(__file__).resolve().parents[2]


def tune(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """``python -m tuner ARGS`` in ``cwd``, stdout and stderr merged, unbuffered."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tuner", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def tune_script(*args: str, cwd: Path) -> subprocess.Popen[str]:
    """The installed ``tune`` script (beside this interpreter) with ARGS, as ``tune`` above."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    script = Path(sys.executable).parent / "tune"
    return subprocess.Popen(
        [str(script), *args], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip


def finish(proc: subprocess.Popen[str], timeout_s: float = 120) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=timeout_s)
    return proc.returncode, out


def load(url: str, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=driver_url(url))


def sqlite_url(results: Path, name: str) -> str:
    return f"sqlite:///{results / name / 'study.db'}"


def running(url: str, name: str) -> list[FrozenTrial]:
    """The RUNNING trials of the study (none while it does not exist yet)."""
    try:
        trials = load(url, name).trials
    except (KeyError, sqlalchemy.exc.OperationalError, sqlalchemy.exc.IntegrityError):
        # The database is still being created (by the run, and by this very load).
        return []
    return [t for t in trials if t.state == TrialState.RUNNING]


def of_state(study: optuna.Study, state: TrialState) -> list[FrozenTrial]:
    return [t for t in study.trials if t.state == state]
