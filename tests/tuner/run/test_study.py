"""The study loop on the simulated engine: baseline first, resume, failures, interrupts."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any, ClassVar

import optuna
import pandas as pd
import pytest
from optuna.trial import TrialState
from pydantic import Field

import launchers
from launchers._base import Launcher, LauncherSettings
from launchers.sim import SimLauncher
from objectives.endpoint import Endpoint
from tests.launchers.helpers import LOOPBACK_ENGINE, free_port
from tests.tuner.conftest import write_yaml
from tuner.engine import EngineConfig
from tuner.errors import InfraError, SetupError, StudyError, TunerError
from tuner.run.study import RunOptions, run_study


def options(space: Path, tmp_path: Path, **kw: Any) -> RunOptions:
    kw.setdefault("confirm", 0)  # these tests count exploration trials; see test_confirm.py
    return RunOptions(space_path=space, results_dir=tmp_path / "results", **kw)


def load(tmp_path: Path, name: str = "small") -> optuna.Study:
    url = f"sqlite:///{tmp_path / 'results' / name / 'study.db'}"
    return optuna.load_study(study_name=name, storage=url)


def test_baseline_first_and_results_written(space_file: Path, tmp_path: Path) -> None:
    summary = run_study(options(space_file, tmp_path, trials=4), report=lambda _: None)
    study = load(tmp_path)
    first = study.trials[0]
    assert first.user_attrs["baseline"] is True
    assert first.params == {
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 64,
        "long_prefill_token_threshold": 0,
    }
    assert summary.finished_trials == 4
    root = tmp_path / "results" / "small"
    trial_dir = root / "trials" / "0000"
    assert (trial_dir / "engine.json").exists() and (trial_dir / "bench_c4.json").exists()
    assert (trial_dir / "engine.log").exists()
    assert "--max-num-batched-tokens 8192" in (trial_dir / "command.sh").read_text()
    table = pd.read_csv(root / "trials.csv")
    assert len(table) == len(study.trials)
    assert {"param_max_num_seqs", "c1_p99_tpot_ms", "c4_output_throughput", "failure"} <= set(table)
    assert (root / "recommendations.json").exists()
    assert [r.concurrency for r in summary.recommendations] == [1, 4]


def test_rerun_resumes_instead_of_starting_over(space_file: Path, tmp_path: Path) -> None:
    run_study(options(space_file, tmp_path, trials=3), report=lambda _: None)
    first = [t.params for t in load(tmp_path).trials]
    summary = run_study(options(space_file, tmp_path, trials=5), report=lambda _: None)
    study = load(tmp_path)
    assert summary.finished_trials == 5
    assert [t.params for t in study.trials[:3]] == first
    assert sum(bool(t.user_attrs.get("baseline")) for t in study.trials) == 1
    lines: list[str] = []
    run_study(options(space_file, tmp_path, trials=5), report=lines.append)
    assert len(load(tmp_path).trials) == len(study.trials)  # already done: nothing new ran
    assert "5/5 trials done" in lines[0]


def test_rule_violation_costs_no_launch(space_file: Path, tmp_path: Path, small_space) -> None:
    small_space["rules"] = ["max_num_seqs <= 16"]
    small_space["parameters"]["max_num_seqs"]["default"] = 16
    write_yaml(space_file, small_space)
    # Random search proposes rule breakers (the default sampler does not: see below).
    run_study(options(space_file, tmp_path, trials=8, sampler="random"), report=lambda _: None)
    study = load(tmp_path)
    broken = [t for t in study.trials if t.params["max_num_seqs"] == 64]
    assert broken, "the sampler should have tried max_num_seqs=64 in 8 trials"
    for t in broken:
        assert t.state == TrialState.COMPLETE and t.user_attrs["feasible"] is False
        assert "breaks rule" in t.user_attrs["failure"]
        assert t.constraints["rules"] > 0
        assert not (tmp_path / "results" / "small" / "trials" / f"{t.number:04d}").exists()


def test_default_sampler_proposes_no_rule_breaker(
    space_file: Path, tmp_path: Path, small_space
) -> None:
    small_space["rules"] = ["max_num_seqs <= 16"]
    small_space["parameters"]["max_num_seqs"]["default"] = 16
    write_yaml(space_file, small_space)
    run_study(options(space_file, tmp_path, trials=6), report=lambda _: None)
    assert all(t.params["max_num_seqs"] <= 16 for t in load(tmp_path).trials)


def test_refused_config_is_infeasible_not_failed(
    space_file: Path, tmp_path: Path, small_space
) -> None:
    # vLLM refuses max-num-batched-tokens below max-num-seqs at start-up.
    small_space["parameters"]["max_num_batched_tokens"]["choices"] = [32, 8192]
    write_yaml(space_file, small_space)
    study_opts = options(space_file, tmp_path, trials=1)
    run_study(study_opts, report=lambda _: None)
    study = load(tmp_path)
    study.enqueue_trial(
        {"max_num_batched_tokens": 32, "max_num_seqs": 64, "long_prefill_token_threshold": 0}
    )
    run_study(options(space_file, tmp_path, trials=2), report=lambda _: None)
    refused = load(tmp_path).trials[1]
    assert refused.state == TrialState.COMPLETE
    assert refused.user_attrs["feasible"] is False
    assert refused.user_attrs["failure_kind"] == "refused"
    assert refused.constraints["engine"] == 1.0
    table = pd.read_csv(tmp_path / "results" / "small" / "trials.csv")
    assert table.loc[1, "failure"]


class FlakySettings(LauncherSettings):
    fail_trials: list[int] = Field(default_factory=list, description="Trials that meet a fault.")
    fault: str = Field("infra", description="infra or interrupt.")


class FlakyLauncher(Launcher):
    """The simulated engine, except that chosen trials meet an infrastructure fault or Ctrl-C."""

    kind: ClassVar[str] = "flaky"
    settings_model: ClassVar[type[LauncherSettings]] = FlakySettings
    hits: ClassVar[list[int]] = []

    def __init__(self, settings: LauncherSettings) -> None:
        super().__init__(settings)
        self.inner = SimLauncher(SimLauncher.settings_model())
        self.stopped = 0

    def start(self, config: EngineConfig, trial_dir: Path) -> None:
        assert isinstance(self.settings, FlakySettings)
        number, hits = int(config.labels["trial"]), type(self).hits
        if number in self.settings.fail_trials and number not in hits:
            hits.append(number)
            raise self.fault()
        self.inner.start(config, trial_dir)

    def fault(self) -> BaseException:
        """What a chosen trial's first start raises."""
        assert isinstance(self.settings, FlakySettings)
        if self.settings.fault == "interrupt":
            return KeyboardInterrupt()
        return InfraError("docker daemon unreachable")

    def wait_ready(self, timeout_s: float) -> Endpoint:
        return self.inner.wait_ready(timeout_s)

    def logs(self) -> str:
        return self.inner.logs()

    def stop(self) -> None:
        self.stopped += 1
        self.inner.stop()


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> type[FlakyLauncher]:
    launchers.launcher_class("sim")  # load the built-in kinds first
    monkeypatch.setitem(launchers.LAUNCHERS, "flaky", FlakyLauncher)
    FlakyLauncher.hits = []
    return FlakyLauncher


def test_infra_failure_fails_trial_and_requeues_config(
    space_file: Path, tmp_path: Path, small_space, flaky
) -> None:
    small_space["target"] = {"kind": "flaky", "fail_trials": [2]}
    write_yaml(space_file, small_space)
    run_study(options(space_file, tmp_path, trials=4), report=lambda _: None)
    study = load(tmp_path)
    failed = study.trials[2]
    assert failed.state == TrialState.FAIL
    assert "docker daemon unreachable" in failed.user_attrs["failure"]
    again = [t for t in study.trials if t.user_attrs.get("requeued_from") == 2]
    assert len(again) == 1 and again[0].params == failed.params
    assert again[0].state == TrialState.COMPLETE
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 4


def test_interrupt_keeps_results_and_rerun_resumes(
    space_file: Path, tmp_path: Path, small_space, flaky
) -> None:
    small_space["target"] = {"kind": "flaky", "fail_trials": [2], "fault": "interrupt"}
    write_yaml(space_file, small_space)
    summary = run_study(options(space_file, tmp_path, trials=4), report=lambda _: None)
    assert summary.interrupted and summary.finished_trials == 2
    assert (tmp_path / "results" / "small" / "trials.csv").exists()
    cut = load(tmp_path).trials[2]
    assert cut.state == TrialState.FAIL and cut.user_attrs["interrupted"] is True
    summary = run_study(options(space_file, tmp_path, trials=4), report=lambda _: None)
    study = load(tmp_path)
    assert not summary.interrupted and summary.finished_trials == 4
    assert study.trials[3].params == cut.params
    assert study.trials[3].user_attrs["requeued_from"] == 2


def test_same_launch_is_measured_once(space_file: Path, tmp_path: Path) -> None:
    run_study(options(space_file, tmp_path, trials=1), report=lambda _: None)
    load(tmp_path).enqueue_trial(load(tmp_path).trials[0].params)
    run_study(options(space_file, tmp_path, trials=2), report=lambda _: None)
    first, twin = load(tmp_path).trials[:2]
    assert twin.user_attrs["duplicate_of"] == 0
    assert twin.values == first.values
    assert not (tmp_path / "results" / "small" / "trials" / "0001").exists()


def test_refused_run_writes_nothing(space_file: Path, tmp_path: Path) -> None:
    with pytest.raises(TunerError, match="unknown objective 'p42'"):
        run_study(options(space_file, tmp_path, objective="p42"), report=lambda _: None)
    assert not (tmp_path / "results").exists()


def test_resume_with_other_objective_refused(space_file: Path, tmp_path: Path) -> None:
    run_study(options(space_file, tmp_path, trials=1), report=lambda _: None)
    with pytest.raises(StudyError, match="optimises 'p99_tpot', not 'median_tpot'"):
        run_study(
            options(space_file, tmp_path, trials=2, objective="median_tpot"), report=lambda _: None
        )


def test_resume_with_changed_space_refused(space_file: Path, tmp_path: Path, small_space) -> None:
    run_study(options(space_file, tmp_path, trials=1), report=lambda _: None)
    small_space["workload"]["tiers"] = [1, 8]
    write_yaml(space_file, small_space)
    with pytest.raises(StudyError, match="different space"):
        run_study(options(space_file, tmp_path, trials=2), report=lambda _: None)


def test_a_model_name_the_engine_does_not_serve_stops_the_study_at_once(
    small_space: dict[str, Any], tmp_path: Path
) -> None:
    # llama.cpp gets no --served-model-name from tune, so the loopback engine serves "m" only.
    engine = {"name": "llama.cpp", "version": "0.3.36", "model": "m", "port": free_port(),
              "served_model_name": "other", "command": [sys.executable, str(LOOPBACK_ENGINE),
              "{model}"]}  # fmt: skip
    space = {**small_space, "engine": engine, "target": {"kind": "process"}, "base": {}}
    space["parameters"] = {}
    space["rules"] = []
    started = time.monotonic()
    with pytest.raises(SetupError, match="does not serve model 'other'"):
        run_study(options(write_yaml(tmp_path / "s.yaml", space), tmp_path, trials=3), print)
    assert time.monotonic() - started < 60  # not the ready timeout
    study = load(tmp_path, "s")
    assert [t.state for t in study.trials] == [TrialState.FAIL]  # never counted as infeasible
