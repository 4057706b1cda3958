"""Three ``tune worker`` processes on one PostgreSQL study, on the simulated engine.

A throwaway cluster (``tests/postgres.py``) holds the study. The workers must meet the
budget exactly, lose and duplicate nothing, re-run the trial of a worker killed with SIGKILL,
ride out a database restart, and leave the same results as one worker running the same trials.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import pytest
from optuna.trial import FrozenTrial, TrialState

from tests.postgres import Postgres
from tests.tuner.run.test_worker import REPO, assert_exact, complete, slow_space, wait_for, worker
from tuner.export import export_study
from tuner.export.tables import trials_table
from tuner.record.trial import lost_params
from tuner.run.loop import WORKER_ATTR
from tuner.storage.urls import driver_url

pytestmark = pytest.mark.slow


def load(url: str) -> optuna.Study:
    return optuna.load_study(study_name="small", storage=driver_url(url))


def exists(url: str) -> bool:
    try:
        load(url)
    except KeyError:
        return False
    return True


def running_of(url: str, pid: int) -> list[FrozenTrial]:
    """RUNNING trials claimed by the worker process ``pid``."""
    me = f"{socket.gethostname()}:{pid} "
    return [
        t
        for t in load(url).trials
        if t.state == TrialState.RUNNING and str(t.system_attrs.get(WORKER_ATTR, "")).startswith(me)
    ]


def finish(procs: list[subprocess.Popen[str]], timeout_s: float = 600) -> list[str]:
    outs = [p.communicate(timeout=timeout_s)[0] for p in procs]
    assert [p.returncode for p in procs] == [0] * len(procs), "\n----\n".join(outs)
    return outs


def test_three_workers_survive_a_killed_worker_and_a_database_restart(
    postgres: Postgres, tmp_path: Path, small_space: dict[str, Any]
) -> None:
    url = postgres.create_db("kill_and_restart")
    space = slow_space(tmp_path / "small.yaml", small_space, startup_s=2.0)
    common = ("--study", "small", "--storage", url, "--poll", "0.2")
    common += ("--heartbeat", "1", "--grace", "4", "--results-dir", "results")
    procs = [worker(*common, "--space", str(space), "--trials", "8", cwd=tmp_path)]
    wait_for(lambda: exists(url))
    procs += [worker(*common, cwd=tmp_path) for _ in range(2)]
    victim = procs.pop(1)
    busy = wait_for(lambda: running_of(url, victim.pid))[0]
    victim.kill()  # SIGKILL mid-trial: no cleanup, no goodbye
    victim.communicate(timeout=60)
    wait_for(lambda: len(complete(load(url))) >= 3)
    postgres.stop()
    time.sleep(3)
    postgres.start()
    outs = finish(procs)
    assert any("storage unreachable" in out for out in outs), "the restart went unnoticed"
    study = load(url)
    assert_exact(study, 8)
    assert sum(bool(t.user_attrs.get("baseline")) for t in complete(study)) == 1
    lost = study.trials[busy.number]
    assert lost.state == TrialState.FAIL
    again = [t for t in complete(study) if t.user_attrs.get("requeued_from") == lost.number]
    # The kill lands wherever the victim was: mid-launch, while writing the params of a queued
    # config (the queue entry has the rest), or while sampling its own config (none known, so
    # nothing runs again and a fresh sample takes its place in the budget).
    known = lost_params(lost)
    assert [t.params for t in again] == ([known] if known is not None else [])
    assert not any(
        str(t.system_attrs[WORKER_ATTR]).startswith(f"{socket.gethostname()}:{victim.pid} ")
        for t in again
    )
    shown = subprocess.run(
        [sys.executable, "-m", "tuner", "show", "--study", "small", "--storage", url],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    finished = f"{len(complete(study))} finished trials"  # rule breakers are free but shown
    assert shown.returncode == 0 and finished in shown.stdout, shown.stderr


# Distinct, rule-abiding and unlike the baseline: each is one launch that counts.
CONFIGS = [
    {"max_num_batched_tokens": 2048, "max_num_seqs": 4, "long_prefill_token_threshold": 0},
    {"max_num_batched_tokens": 2048, "max_num_seqs": 16, "long_prefill_token_threshold": 1024},
    {"max_num_batched_tokens": 32768, "max_num_seqs": 16, "long_prefill_token_threshold": 4096},
    {"max_num_batched_tokens": 8192, "max_num_seqs": 4, "long_prefill_token_threshold": 1024},
    {"max_num_batched_tokens": 32768, "max_num_seqs": 64, "long_prefill_token_threshold": 0},
]


def _study_of(
    postgres: Postgres, db: str, space: Path, workers: int, cwd: Path
) -> tuple[str, optuna.Study]:
    """The baseline alone, then CONFIGS queued and run by ``workers`` workers at once."""
    url = postgres.create_db(db)
    common = ("--study", "small", "--storage", url, "--poll", "0.2", "--results-dir", db)
    finish([worker(*common, "--space", str(space), "--trials", "1", cwd=cwd)])
    queue = load(url)
    for config in CONFIGS:
        queue.enqueue_trial(config)
    budget = str(1 + len(CONFIGS))
    finish([worker(*common, "--trials", budget, cwd=cwd) for _ in range(workers)])
    return url, load(url)


def test_three_workers_leave_the_results_of_one_worker_running_the_same_trials(
    postgres: Postgres, tmp_path: Path, small_space: dict[str, Any]
) -> None:
    space = slow_space(tmp_path / "small.yaml", small_space, startup_s=1.0)
    par_url, par = _study_of(postgres, "parallel", space, 3, tmp_path)
    one_url, one = _study_of(postgres, "single", space, 1, tmp_path)
    assert_exact(par, 6)
    assert_exact(one, 6)
    owners = {t.system_attrs[WORKER_ATTR] for t in complete(par)[1:]}
    assert len(owners) > 1, "the queued trials should have been shared out"
    tiers = [1, 4]
    timeless = ["datetime_start", "datetime_complete", "duration_s"]

    def table(study: optuna.Study) -> pd.DataFrame:
        return trials_table(study.get_trials(deepcopy=False), tiers).drop(
            columns=timeless, errors="ignore"
        )

    pd.testing.assert_frame_equal(table(par), table(one))
    for db in ("parallel", "single"):
        assert (tmp_path / db / "small" / "recommendations.json").exists()
    assert (tmp_path / "parallel" / "small" / "recommendations.json").read_text() == (
        tmp_path / "single" / "small" / "recommendations.json"
    ).read_text()
    show = [
        subprocess.run(
            [sys.executable, "-m", "tuner", "show", "--study", "small", "--storage", url],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            capture_output=True,
            text=True,
            timeout=120,
        ).stdout
        for url in (par_url, one_url)
    ]
    assert show[0] == show[1] and f"{len(complete(par))} finished trials" in show[0]
    exports = [
        export_study("small", url, tmp_path / f"export_{i}")
        for i, url in enumerate((par_url, one_url))
    ]
    names = sorted(f.name for f in exports[0].files)
    assert names == sorted(f.name for f in exports[1].files)
    assert {"recipe.yaml", "commands.md", "trials.csv", "pareto_c1.csv"} <= set(names)
    for name in names:
        if name == "report.html":
            continue  # names its storage URL and the study's wall time, which differ by design
        par_text, one_text = ((e.out_dir / name).read_text() for e in exports)
        if name == "trials.csv":
            par_frame, one_frame = (
                pd.read_csv(e.out_dir / name).drop(columns=timeless, errors="ignore")
                for e in exports
            )
            pd.testing.assert_frame_equal(par_frame, one_frame)
        else:
            assert par_text == one_text, name
