"""Journal-file heartbeats do not follow the wall clock: a worker whose clock is an hour ahead
(or a host clock stepped forward past the grace) leaves live trials alone, and a dead worker's
trial is still found out after a grace of silence."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import optuna
import pytest
from optuna.storages import fail_stale_trials
from optuna.trial import TrialState

from tests.faults.procs import REPO
from tuner.run.join import requeue_lost
from tuner.storage.urls import StorageSettings, open_storage

HOUR = 3600
SETTINGS = StorageSettings(heartbeat_s=1, grace_s=2)


def running_trial(url: str) -> tuple[optuna.Study, int]:
    storage = open_storage(url, SETTINGS, requeue_lost)
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    trial.suggest_int("x", 0, 9)
    return study, trial._trial_id


class Beating:
    """A live worker: beats every half second until stopped."""

    def __init__(self, study: optuna.Study, trial_id: int, skew_s: float = 0.0) -> None:
        self.study, self.trial_id, self.skew_s = study, trial_id, skew_s
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        storage = self.study._storage
        while not self.stop.is_set():
            storage.record_heartbeat(self.trial_id)
            if self.skew_s:  # its files stamped by a clock an hour behind the checker's
                path = Path(storage.heartbeat.folder) / str(self.trial_id)  # type: ignore[attr-defined]
                stamp = time.time() - self.skew_s
                os.utime(path, (stamp, stamp))
            self.stop.wait(0.5)

    def __enter__(self) -> Beating:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop.set()
        self.thread.join()


def test_beats_stamped_an_hour_off_are_alive_and_silence_is_not(tmp_path: Path) -> None:
    # Before: a checker an hour ahead failed every live trial at its first look.
    study, trial_id = running_trial(f"journal:{tmp_path / 'j.log'}")
    with Beating(study, trial_id, skew_s=HOUR):
        deadline = time.monotonic() + 2.6  # past the grace, while it beats
        while time.monotonic() < deadline:
            fail_stale_trials(study)
            time.sleep(0.25)
        assert [t.state for t in study.trials] == [TrialState.RUNNING]
    fail_stale_trials(study)  # its worker is gone: the last beat is seen, then a grace of silence
    assert [t.state for t in study.trials] == [TrialState.RUNNING]
    time.sleep(SETTINGS.grace_s + 0.5)
    fail_stale_trials(study)
    assert study.trials[0].state == TrialState.FAIL


CHECKER = """
import sys, time, optuna
from optuna.storages import fail_stale_trials
from tuner.run.join import requeue_lost
from tuner.storage.urls import StorageSettings, open_storage
storage = open_storage(sys.argv[1], StorageSettings(heartbeat_s=1, grace_s=2), requeue_lost)
study = optuna.load_study(study_name="s", storage=storage)
end = time.monotonic() + 4
while time.monotonic() < end:
    fail_stale_trials(study)
    time.sleep(0.25)
print(study.trials[0].state.name)
"""


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("faketime") is None, reason="faketime is not installed")
def test_a_worker_whose_clock_is_an_hour_ahead_takes_no_live_trial(tmp_path: Path) -> None:
    # The checker runs under libfaketime, its wall clock an hour ahead of this process's (the
    # files keep the stamps this process's clock gave them, as another host's would).
    url = f"journal:{tmp_path / 'j.log'}"
    study, trial_id = running_trial(url)
    env = {**os.environ, "PYTHONPATH": str(REPO), "NO_FAKE_STAT": "1"}
    with Beating(study, trial_id):
        done = subprocess.run(
            ["faketime", "-f", "+1h", sys.executable, "-c", CHECKER, url],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["RUNNING"]
    assert [t.state for t in study.trials] == [TrialState.RUNNING]
