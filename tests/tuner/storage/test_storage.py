"""Storage URLs, outage retries, heartbeats on journal files, and the study lock."""

from __future__ import annotations

import fcntl
import socket
import subprocess
import sys
import time
from pathlib import Path

import optuna
import pytest
import sqlalchemy.exc
from optuna.storages import fail_stale_trials
from optuna.trial import TrialState

from tuner.errors import StorageUnavailable, StudyError
from tuner.record.trial import write_launch
from tuner.run.join import requeue_lost
from tuner.storage.lock import StudyLock, lock_file
from tuner.storage.resilient import Retrier, is_transient
from tuner.storage.urls import (
    StorageSettings,
    backend_of,
    journal_path,
    open_storage,
    redact,
    shared_by_processes,
)

pytestmark = [
    pytest.mark.filterwarnings("ignore::optuna.exceptions.ExperimentalWarning"),
    pytest.mark.filterwarnings("ignore:Heartbeat of storage:UserWarning"),
]


def test_backends_by_url() -> None:
    assert backend_of("sqlite:///results/s/study.db") == "sqlite"
    assert backend_of("journal:results/s/journal.log") == "journal"
    assert backend_of("postgresql://tune@db:5432/tune") == "postgresql"
    assert backend_of("postgresql+psycopg2://tune@db/tune") == "postgresql"
    assert backend_of("sqlite:///:memory:") == "memory"
    assert not shared_by_processes("sqlite:///:memory:")
    assert journal_path("journal:///abs/j.log") == Path("/abs/j.log")
    assert journal_path("journal:rel/j.log") == Path("rel/j.log")
    with pytest.raises(StudyError, match="unknown storage"):
        backend_of("redis://localhost")


def test_password_is_redacted_in_messages() -> None:
    assert redact("postgresql://tune:s3cret@db:5432/x") == "postgresql://tune:***@db:5432/x"
    assert redact("postgresql://tune@db/x") == "postgresql://tune@db/x"


def test_grace_must_exceed_heartbeat() -> None:
    with pytest.raises(StudyError, match="must exceed --heartbeat"):
        StorageSettings(heartbeat_s=10, grace_s=10)


def test_transient_faults_are_retried_others_raised_at_once() -> None:
    calls: list[int] = []
    lines: list[str] = []

    def flaky() -> str:
        calls.append(1)
        if len(calls) < 3:
            raise sqlalchemy.exc.OperationalError("SELECT 1", {}, Exception("server closed"))
        return "ok"

    assert Retrier(60, lines.append).call("read", flaky) == "ok"
    assert len(calls) == 3
    assert "storage unreachable" in lines[0] and "reachable again" in lines[-1]
    with pytest.raises(ValueError):
        Retrier(60, lines.append).call("read", lambda: int("x"))


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_unreachable_database_waits_then_gives_up_with_one_line() -> None:
    url = f"postgresql://tune@127.0.0.1:{_free_port()}/tune"  # nothing listens there
    lines: list[str] = []
    start = time.monotonic()
    with pytest.raises(StorageUnavailable, match="storage unreachable for"):
        open_storage(url, StorageSettings(1, 3, outage_s=1.0), report=lines.append)
    assert time.monotonic() - start >= 1.0  # it waited rather than dying at once
    assert "retrying" in lines[0] and "***" not in lines[0]


def test_is_transient_sees_through_optuna_wrapping() -> None:
    inner = sqlalchemy.exc.OperationalError("x", {}, Exception("connection refused"))
    try:
        try:
            raise inner
        except sqlalchemy.exc.SQLAlchemyError as e:
            raise optuna.exceptions.StorageInternalError("commit failed") from e
    except optuna.exceptions.StorageInternalError as wrapped:
        assert is_transient(wrapped)
    integrity = sqlalchemy.exc.IntegrityError("x", {}, Exception("duplicate key"))
    assert not is_transient(integrity)


def launched(study: optuna.Study) -> optuna.Trial:
    """A trial whose config is whole: its params are written and its engine command built."""
    trial = study.ask()
    trial.suggest_int("x", 0, 9)
    write_launch(trial, f"--x {trial.params['x']}", f"--x {trial.params['x']}")
    return trial


@pytest.mark.slow  # waits out heartbeat graces: seconds of sleep
def test_journal_heartbeats_fail_and_requeue_a_dead_workers_trial(tmp_path: Path) -> None:
    url = f"journal:{tmp_path / 'journal.log'}"
    storage = open_storage(url, StorageSettings(heartbeat_s=1, grace_s=2), requeue_lost)
    study = optuna.create_study(study_name="s", storage=storage)
    trial = launched(study)
    storage.record_heartbeat(trial._trial_id)
    fail_stale_trials(study)
    assert study.trials[0].state == TrialState.RUNNING  # fresh heartbeat: alive
    time.sleep(2.3)
    fail_stale_trials(study)
    lost, again = study.trials
    assert lost.state == TrialState.FAIL
    assert again.state == TrialState.WAITING
    assert again.user_attrs["requeued_from"] == lost.number
    assert again.system_attrs["fixed_params"] == lost.params


@pytest.mark.slow  # waits out heartbeat graces: seconds of sleep
def test_a_trial_whose_worker_died_before_its_first_beat_is_failed_too(tmp_path: Path) -> None:
    url = f"journal:{tmp_path / 'journal.log'}"
    storage = open_storage(url, StorageSettings(heartbeat_s=1, grace_s=2), requeue_lost)
    study = optuna.create_study(study_name="s", storage=storage)
    launched(study)  # claimed, then its worker died: no heartbeat ever
    fail_stale_trials(study)
    assert study.trials[0].state == TrialState.RUNNING  # younger than one grace: left alone
    time.sleep(2.3)
    fail_stale_trials(study)
    assert [t.state for t in study.trials] == [TrialState.FAIL, TrialState.WAITING]


@pytest.mark.slow  # waits out heartbeat graces: seconds of sleep
def test_a_trial_lost_while_its_config_was_sampled_is_not_queued_again(tmp_path: Path) -> None:
    """Killed between two ``suggest`` calls of its own proposal: nothing was launched and the
    config is not known whole, so nothing is queued (a fragment would be re-run as a fresh
    sample passed off as this trial)."""
    url = f"journal:{tmp_path / 'journal.log'}"
    storage = open_storage(url, StorageSettings(heartbeat_s=1, grace_s=2), requeue_lost)
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    trial.suggest_int("x", 0, 9)
    storage.record_heartbeat(trial._trial_id)
    fail_stale_trials(study)  # a worker watching: staleness is silence it has seen
    time.sleep(2.3)
    fail_stale_trials(study)
    assert [t.state for t in study.trials] == [TrialState.FAIL]


@pytest.mark.slow  # waits out heartbeat graces: seconds of sleep
def test_stale_checks_pause_for_one_grace_after_an_outage(tmp_path: Path) -> None:
    storage = open_storage(f"journal:{tmp_path / 'j.log'}", StorageSettings(1, 2))
    study = optuna.create_study(study_name="s", storage=storage)
    trial = study.ask()
    storage.record_heartbeat(trial._trial_id)
    assert storage._get_stale_trial_ids(study._study_id) == []  # seen beating
    time.sleep(2.3)
    storage.retry.last_outage = time.monotonic()  # as if the database had just come back
    assert storage._get_stale_trial_ids(study._study_id) == []
    storage.retry.last_outage = float("-inf")
    assert storage._get_stale_trial_ids(study._study_id) == [trial._trial_id]


HOLD = """
import sys, time
from tuner.storage.resilient import Retrier
from tuner.storage.lock import StudyLock
lock = StudyLock(sys.argv[1], "s", Retrier(10, print))
with lock.held():
    print("held", flush=True)
    sys.stdin.readline()
"""


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_study_lock_excludes_another_process(tmp_path: Path, kind: str) -> None:
    url = (
        f"sqlite:///{tmp_path / 'study.db'}"
        if kind == "sqlite"
        else f"journal:{tmp_path / 'j.log'}"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, url], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        path = lock_file(url)
        assert path is not None
        with path.open("a") as fh:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
            assert holder.stdin is not None
            holder.stdin.write("\n")
            holder.stdin.flush()
            holder.wait(timeout=30)
            fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)  # released on exit
    finally:
        holder.kill()
        holder.wait()
    lock = StudyLock(url, "s", Retrier(10, print))
    with lock.held():
        pass
