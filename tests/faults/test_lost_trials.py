"""Trials that did not finish are measured again: a killed run's, and those an error cut short.

Every config a study started is measured once, or queued again and then measured; the baseline
above all, since without it no gain can be stated.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from optuna.trial import TrialState

import launchers
from tests.faults.broken import ERRORS, BrokenLauncher
from tests.faults.procs import finish, load, of_state, running, sqlite_url, tune
from tests.tuner.conftest import write_yaml
from tests.tuner.run.test_worker import wait_for
from tuner.record.trial import lost_params
from tuner.run.context import prepare
from tuner.run.join import join_study, run_options
from tuner.run.loop import WORKER_ATTR
from tuner.run.study import RunOptions, run_study
from tuner.space.sample import suggest


def options(space: Path, tmp_path: Path, **kw: Any) -> RunOptions:
    kw.setdefault("confirm", 0)
    return RunOptions(space_path=space, results_dir=tmp_path / "results", **kw)


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def claim_baseline_as(opts: RunOptions, who: str) -> None:
    """What a run does when it claims the baseline (``WorkerLoop._claim``), as ``who``."""
    ctx = prepare(opts)
    joined = join_study(run_options(ctx, opts), lambda _: None, ctx)
    trial = joined.study.ask()
    joined.storage.set_trial_system_attr(trial._trial_id, WORKER_ATTR, who)
    joined.storage.record_heartbeat(trial._trial_id)  # fresh: no heartbeat grace has passed
    suggest(trial, ctx.space)


def assert_baseline_measured_again(study: Any, lost: int) -> None:
    assert not of_state(study, TrialState.RUNNING)
    again = [t for t in study.trials if t.user_attrs.get("requeued_from") == lost]
    assert [t.state for t in again] == [TrialState.COMPLETE]
    assert again[0].user_attrs["baseline"] is True
    # The lost trial may have been killed before its first suggest: its config is then only
    # in its queue entry, which lost_params reads.
    assert again[0].params == lost_params(study.trials[lost])


def test_a_killed_runs_trial_is_queued_again_at_once(space_file: Path, tmp_path: Path) -> None:
    """Its heartbeat is fresh, but its owner's pid is gone from this host: no 3-minute wait."""
    owner = f"{socket.gethostname()}:{dead_pid()}"
    claim_baseline_as(options(space_file, tmp_path, trials=3), f"{owner} slot 0")
    lines: list[str] = []
    started = time.monotonic()
    # On the simulated engine --timeout reads the hardware's clock: a day of it holds the
    # three launches; the wall-clock bound is the assertion below.
    summary = run_study(options(space_file, tmp_path, trials=3, timeout_s=86400), lines.append)
    assert time.monotonic() - started < 15, "the rerun waited on the dead run's trial"
    assert summary.finished_trials == 3
    study = load(sqlite_url(tmp_path / "results", "small"), "small")
    lost = study.trials[0]
    assert lost.state == TrialState.FAIL and owner in lost.user_attrs["failure"]
    assert_baseline_measured_again(study, 0)
    assert any(f"trial 0: its run {owner} is gone" in line for line in lines), lines


@pytest.mark.slow  # a study waiting out its --timeout: about 4 s
def test_a_live_runs_trial_is_left_to_it(space_file: Path, tmp_path: Path) -> None:
    """This process's pid is alive: its trial is running, not lost. The run waits on it until
    its --timeout, which on the simulated engine counts the wall time waited, and leaves it."""
    me = f"{socket.gethostname()}:{os.getpid()}"
    claim_baseline_as(options(space_file, tmp_path, trials=1), f"{me} slot 0")
    run_study(options(space_file, tmp_path, trials=1, timeout_s=1.0), lambda _: None)
    study = load(sqlite_url(tmp_path / "results", "small"), "small")
    assert study.trials[0].state == TrialState.RUNNING


@pytest.fixture
def broken(monkeypatch: pytest.MonkeyPatch) -> type[BrokenLauncher]:
    launchers.launcher_class("sim")  # the built-in kinds first
    monkeypatch.setitem(launchers.LAUNCHERS, "broken", BrokenLauncher)
    BrokenLauncher.hits = []
    return BrokenLauncher


@pytest.mark.parametrize("error", sorted(ERRORS))
def test_a_trial_an_error_cut_short_is_queued_again_by_the_rerun(
    space_file: Path, tmp_path: Path, small_space: dict[str, Any], broken: Any, error: str
) -> None:
    """An image not pulled, a dataset not there yet, a bug: the run stops with the error, its
    trial FAILs, and once the cause is fixed the rerun measures that config (the baseline)."""
    small_space["target"] = {"kind": "broken", "fail_trials": [0], "error": error}
    write_yaml(space_file, small_space)
    with pytest.raises(type(ERRORS[error])):
        run_study(options(space_file, tmp_path, trials=2), lambda _: None)
    summary = run_study(options(space_file, tmp_path, trials=2), lambda _: None)
    assert summary.finished_trials == 2
    study = load(sqlite_url(tmp_path / "results", "small"), "small")
    assert study.trials[0].state == TrialState.FAIL
    assert_baseline_measured_again(study, 0)


@pytest.mark.slow  # two tune processes: about 15 s
def test_tune_run_killed_with_sigkill_then_rerun_measures_its_trial(
    tmp_path: Path, small_space: dict[str, Any]
) -> None:
    """The reproduction of the report: ``tune run ... & sleep; kill -9 $!``, then the same
    command again."""
    small_space["target"] = {"kind": "sim", "profile": "h200x4", "wall_startup_s": 2.0}
    space = write_yaml(tmp_path / "s.yaml", small_space)
    args = ("run", "--space", str(space), "--trials", "3", "--study", "k", "--confirm", "0")
    url = sqlite_url(tmp_path / "results", "k")
    first = tune(*args, cwd=tmp_path)
    wait_for(lambda: running(url, "k"), timeout_s=60)
    first.send_signal(signal.SIGKILL)
    first.wait(timeout=30)
    assert [t.number for t in running(url, "k")] == [0]  # the baseline, left RUNNING
    started = time.monotonic()
    code, out = finish(tune(*args, cwd=tmp_path))
    assert code == 0, out
    assert time.monotonic() - started < 60, "the rerun waited out the heartbeat grace"
    assert "its run" in out and "is gone" in out
    study = load(url, "k")
    assert_baseline_measured_again(study, 0)
    assert sum(t.state == TrialState.COMPLETE for t in study.trials) == 3
