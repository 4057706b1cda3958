"""``tune run --storage postgresql://`` rides out a database restart in the middle of a trial.

It used to die with a chained traceback (Optuna's ``UnboundLocalError`` at the end) and leave
the trial RUNNING: only ``tune worker`` had the retrying storage. A single-slot run is now a
one-slot worker, on the same storage.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from optuna.trial import TrialState

from tests.faults.procs import finish, load, of_state, running, tune
from tests.postgres import Postgres
from tests.tuner.conftest import write_yaml
from tests.tuner.run.test_worker import wait_for

pytestmark = pytest.mark.slow  # a PostgreSQL cluster and a restart: about 20 s


def test_a_database_restart_mid_trial_is_waited_out(
    postgres: Postgres, tmp_path: Path, small_space: dict[str, Any]
) -> None:
    url = postgres.create_db("restart_mid_trial")
    small_space["target"] = {"kind": "sim", "profile": "h200x4", "wall_startup_s": 3.0}
    space = write_yaml(tmp_path / "s.yaml", small_space)
    proc = tune(
        "run", "--space", str(space), "--trials", "3", "--storage", url, "--confirm", "0",
        "--study", "small",
        cwd=tmp_path,
    )  # fmt: skip
    wait_for(lambda: running(url, "small"), timeout_s=60)
    postgres.stop()
    time.sleep(3)
    postgres.start()
    code, out = finish(proc, timeout_s=300)
    assert code == 0, out
    assert "storage unreachable" in out and "reachable again" in out
    assert "Traceback" not in out and "UnboundLocalError" not in out
    study = load(url, "small")
    assert not of_state(study, TrialState.RUNNING)
    assert len(of_state(study, TrialState.COMPLETE)) == 3
    assert study.trials[0].user_attrs["baseline"] is True
