"""Workers sharing a study on one machine (journal / SQLite), on the simulated engine.

Trials take wall time here (``wall_startup_s``), so several workers really overlap, and a
worker can be stopped or killed in the middle of one.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from tests.tuner.conftest import write_yaml
from tuner.record.trial import lost_params, write_launch
from tuner.run.loop import WORKER_ATTR, Heartbeat
from tuner.run.objective import counts_toward_budget
from tuner.run.slots import SlotRequest
from tuner.run.study import RunOptions, run_study

REPO = Path(__file__).resolve().parents[3]


def slow_space(path: Path, space: dict[str, Any], startup_s: float) -> Path:
    space["target"] = {"kind": "sim", "profile": "h200x4", "wall_startup_s": startup_s}
    return write_yaml(path, space)


def worker(*args: str, cwd: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tuner", "worker", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def journal_study(path: Path, name: str = "small") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=JournalStorage(JournalFileBackend(str(path))))


def running(path: Path) -> list[FrozenTrial]:
    """The RUNNING trials of the study in ``path`` (none while it does not exist yet)."""
    try:
        trials = journal_study(path).trials
    except (KeyError, FileNotFoundError):
        return []
    return [t for t in trials if t.state == TrialState.RUNNING]


def wait_for(check: Callable[[], Any], timeout_s: float = 120.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if found := check():
            return found
        time.sleep(0.2)
    raise AssertionError("condition not met in time")


def complete(study: optuna.Study) -> list[FrozenTrial]:
    return [t for t in study.trials if t.state == TrialState.COMPLETE]


def assert_exact(study: optuna.Study, budget: int) -> None:
    """The budget exactly, nothing left running, each measurement stored once."""
    done = complete(study)
    assert sum(counts_toward_budget(t) for t in done) == budget
    assert not [t for t in study.trials if t.state == TrialState.RUNNING]
    assert all(t.user_attrs.get("tiers") or t.user_attrs["failure_kind"] == "rules" for t in done)
    chains = [t.user_attrs.get("requeued_from") for t in done if "requeued_from" in t.user_attrs]
    assert len(chains) == len(set(chains)), "a failed trial was re-run to completion twice"


@pytest.mark.slow  # two sim studies side by side: about 7 s
def test_run_on_two_gpu_groups_runs_two_trials_at_once(
    tmp_path: Path, small_space: dict[str, Any]
) -> None:
    small_space["rules"] = []  # every first claim launches an engine
    space = slow_space(tmp_path / "small.yaml", small_space, startup_s=1.5)
    lines: list[str] = []
    opts = RunOptions(
        space_path=space,
        trials=4,
        results_dir=tmp_path / "results",
        parallel=SlotRequest(gpus="0-7"),  # tensor-parallel-size 4: two engines
    )
    summary = run_study(opts, report=lines.append)
    assert summary.finished_trials == 4 and not summary.interrupted  # launches, as --trials
    assert any("2 slots" in line for line in lines)
    study = optuna.load_study(
        study_name="small", storage=f"sqlite:///{tmp_path / 'results' / 'small' / 'study.db'}"
    )
    assert_exact(study, 4)
    root = tmp_path / "results" / "small" / "trials"  # rule breakers and twins launch nothing
    seen = set()
    launched = [t for t in complete(study) if (root / f"{t.number:04d}").exists()]
    assert len(launched) >= 2
    for t in launched:
        folder = root / f"{t.number:04d}"
        devices = tuple(json.loads((folder / "engine.json").read_text())["devices"])
        port = 8000 if devices == ("0", "1", "2", "3") else 8001
        assert devices in {("0", "1", "2", "3"), ("4", "5", "6", "7")}
        assert f"--port {port}" in (folder / "command.sh").read_text()
        assert "--port 8000" in t.user_attrs["engine_command"]  # the record is slot-free
        assert f"port {port}" in t.system_attrs[WORKER_ATTR]
        seen.add(devices)
    assert len(seen) == 2, "both device groups should have served trials"
    assert not list(root.glob(".*.partial"))


def test_joining_a_missing_study_without_a_space_is_one_line(tmp_path: Path) -> None:
    url = f"journal:{tmp_path / 'j.log'}"
    proc = worker("--study", "nope", "--storage", url, cwd=tmp_path)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 2
    assert "no study 'nope'" in out and "--space" in out and "Traceback" not in out


@pytest.mark.slow
def test_two_workers_share_a_journal_study_and_meet_the_budget_exactly(
    tmp_path: Path, small_space: dict[str, Any]
) -> None:
    space = slow_space(tmp_path / "small.yaml", small_space, startup_s=0.5)
    log = tmp_path / "study.log"
    common = ("--study", "small", "--storage", f"journal:{log}", "--poll", "0.2")
    first = worker(*common, "--space", str(space), "--trials", "6", cwd=tmp_path)
    wait_for(lambda: log.exists())
    second = worker(*common, cwd=tmp_path)
    outs = [p.communicate(timeout=300)[0] for p in (first, second)]
    assert [p.returncode for p in (first, second)] == [0, 0], outs
    study = journal_study(log)
    assert_exact(study, 6)
    assert sum(bool(t.user_attrs.get("baseline")) for t in study.trials) == 1
    owners = {t.system_attrs[WORKER_ATTR] for t in complete(study)}
    assert len(owners) == 2, "both workers should have run trials"


@pytest.mark.slow
def test_sigterm_stops_the_trial_requeues_it_and_a_rerun_finishes(
    tmp_path: Path, small_space: dict[str, Any]
) -> None:
    space = slow_space(tmp_path / "small.yaml", small_space, startup_s=4.0)
    log = tmp_path / "study.log"
    args = ("--study", "small", "--storage", f"journal:{log}", "--space", str(space))
    proc = worker(*args, "--trials", "2", cwd=tmp_path)
    wait_for(lambda: running(log))
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 130, out
    study = journal_study(log)
    stopped = study.trials[0]
    assert stopped.state == TrialState.FAIL and stopped.user_attrs["interrupted"] is True
    queued = [t for t in study.trials if t.user_attrs.get("requeued_from") == stopped.number]
    assert [t.state for t in queued] == [TrialState.WAITING]
    rerun = worker(*args, cwd=tmp_path)
    out, _ = rerun.communicate(timeout=300)
    assert rerun.returncode == 0, out
    study = journal_study(log)
    assert_exact(study, 2)
    assert study.trials[queued[0].number].state == TrialState.COMPLETE


@pytest.mark.slow
def test_a_killed_workers_trial_is_run_again_by_another(
    tmp_path: Path, small_space: dict[str, Any]
) -> None:
    space = slow_space(tmp_path / "small.yaml", small_space, startup_s=3.0)
    log = tmp_path / "study.log"
    common = ("--study", "small", "--storage", f"journal:{log}", "--poll", "0.2")
    beats = ("--heartbeat", "1", "--grace", "3")
    victim = worker(*common, *beats, "--space", str(space), "--trials", "3", cwd=tmp_path)
    busy = wait_for(lambda: running(log))
    trials = tmp_path / "results" / "small" / "trials"
    staged = trials / f".{busy[0].number:04d}.partial"
    wait_for(lambda: (staged / "engine.log").exists())  # the engine is starting: mid-trial
    survivor = worker(*common, *beats, cwd=tmp_path)
    victim.kill()
    victim.communicate(timeout=60)
    out, _ = survivor.communicate(timeout=300)
    assert survivor.returncode == 0, out
    study = journal_study(log)
    assert_exact(study, 3)
    lost = study.trials[busy[0].number]
    assert lost.state == TrialState.FAIL
    again = [t for t in complete(study) if t.user_attrs.get("requeued_from") == lost.number]
    assert len(again) == 1 and again[0].params == lost.params
    # The survivor runs on the victim's host, so it sees the victim's pid gone at once,
    # without waiting for the heartbeat grace (tests/faults/test_lost_trials.py).
    reason = again[0].user_attrs["requeue_reason"]
    assert reason == f"its run {socket.gethostname()}:{victim.pid} is gone (killed)"
    assert not (trials / f"{lost.number:04d}").exists()  # no half-written folder passes as whole
    assert staged.is_dir()
    assert (trials / f"{again[0].number:04d}" / "engine.json").exists()


def test_a_config_lost_while_its_params_were_written_is_queued_whole() -> None:
    """A worker killed between two ``suggest`` calls of a queued config leaves some params; the
    queue entry has the rest, and the two together are what runs again. A sampled config is
    known whole once its engine command was built; before that, no config is known at all."""
    dist = optuna.distributions.CategoricalDistribution([8192, 16384])
    fixed = {"budget": 16384, "seqs": 64, "threshold": 1024}
    half = optuna.trial.create_trial(
        state=TrialState.FAIL,
        params={"budget": 16384},
        distributions={"budget": dist},
        system_attrs={"fixed_params": fixed},
    )
    assert lost_params(half) == fixed

    def proposed(command: str | None) -> FrozenTrial:
        study = optuna.create_study()
        trial = study.ask()
        trial.suggest_categorical("budget", [8192, 16384])
        if command is not None:
            write_launch(trial, command, command)
        return study.tell(trial, state=TrialState.FAIL)

    built = proposed("--max-num-batched-tokens 8192")
    assert lost_params(built) == {"budget": built.params["budget"]}
    assert lost_params(proposed(None)) is None


def test_a_failed_heartbeat_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    """A lost beat may let another worker fail the trial: the log must say it happened."""

    class Failing:
        def record_heartbeat(self, trial_id: int) -> None:
            raise ConnectionError("database gone")

    beat = Heartbeat(Failing(), 7, 0.01)  # type: ignore[arg-type]
    with caplog.at_level("WARNING", logger="tuner.run.loop"), beat:
        time.sleep(0.1)
    said = [r.message for r in caplog.records]
    assert any("trial 7: heartbeat not recorded: database gone" in m for m in said)
