"""An engine that stops answering mid-benchmark is found out in a window, not after every
request's timeout; ``--timeout`` ends a running trial.

Each request used to wait its full timeout: with the H200 space's 60 prompts and 1800 s
timeout, one tier of a hung engine would have waited about 30 hours. A tier where no stream
produces a token and no request ends for a window (ten times the longest silence seen so far
in the run, at least ``workload.stall_floor_s``) is a hung engine: a config fault when
``/health`` still answers, an infrastructure fault otherwise.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from optuna.trial import TrialState

from objectives.endpoint import Endpoint
from objectives.runner import partial_results, run_benchmark
from objectives.stall import Progress
from objectives.workload import WorkloadSpec
from tests.faults.faulty_engine import Engine, serve
from tests.faults.procs import load, sqlite_url
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.cli import main
from tuner.errors import EngineHung, FailureKind, InfraError, LaunchError
from tuner.run.study import RunOptions, run_study

WORKLOAD: dict[str, Any] = {
    "dataset": {"kind": "random", "input_len": 16, "output_len": 40, "vocab_size": 700},
    "num_prompts": 8,
    "warmup": 1,
    "tiers": [1, 4],
    "request_timeout_s": 120,
    "stall_floor_s": 1.0,
}
C1_DONE = 1 + 8  # streamed requests once the warm-up and tier c1 are done


def engine_url(mode: str, after: int) -> Iterator[str]:
    server = serve(Engine("m", mode, after, itl_s=0.002))
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


@pytest.fixture
def hung() -> Iterator[str]:
    """Streams stop mid-way in tier c4; ``/health`` still answers."""
    yield from engine_url("hang", C1_DONE + 2)


@pytest.fixture
def frozen() -> Iterator[str]:
    """The same, and ``/health`` stops answering too."""
    yield from engine_url("frozen", C1_DONE + 2)


def bench(url: str, **workload: Any) -> BaseException:
    spec = WorkloadSpec.model_validate({**WORKLOAD, **workload})
    started = time.monotonic()
    with pytest.raises((LaunchError, InfraError)) as caught:
        run_benchmark(Endpoint(model="m", base_url=url), spec)
    assert time.monotonic() - started < 20, "the hang was waited out"
    return caught.value


def test_streams_that_stop_while_health_answers_are_a_hung_engine(hung: str) -> None:
    err = bench(hung)
    assert isinstance(err, EngineHung) and err.kind == FailureKind.HUNG  # the config's fault
    assert "c4" in str(err) and "no token" in str(err) and "/health answers" in str(err)
    assert [t.concurrency for t in partial_results(err)] == [1]  # the tier done is kept


def test_a_silent_engine_whose_health_is_silent_too_is_an_infrastructure_fault(
    frozen: str,
) -> None:
    err = bench(frozen)
    assert isinstance(err, InfraError)
    assert "no token" in str(err) and "/health" in str(err)


def test_the_window_follows_the_runs_pace_above_a_floor() -> None:
    progress = Progress(floor_s=2.0, timeout_s=100.0)
    assert progress.window_s == 2.0
    progress.sent(10.0)
    progress.event(13.0)  # a 3 s silence (a long prefill, say) is the pace from now on
    assert progress.window_s == 30.0
    progress.event(13.1)
    assert progress.window_s == 30.0
    capped = Progress(floor_s=2.0, timeout_s=20.0)
    capped.sent(0.0)
    capped.event(5.0)
    assert capped.window_s == 18.0  # under the request timeout, so the window fires first


def test_silence_counts_only_while_a_request_is_in_flight() -> None:
    progress = Progress(floor_s=1.0, timeout_s=100.0)
    assert progress.silent_s(50.0) == 0.0  # open loop, between arrivals
    progress.sent(60.0)
    assert progress.silent_s(61.5) == 1.5
    progress.done(62.0)  # a request that ends, even failed, is the engine answering
    assert progress.silent_s(62.5) == 0.0


def endpoint_space(tmp_path: Path, url: str, **workload: Any) -> Path:
    space = copy.deepcopy(SMALL_SPACE)
    space["engine"]["model"] = "m"
    space["target"] = {"kind": "endpoint", "url": url}
    space["parameters"], space["rules"], space["base"] = {}, [], {}
    space["workload"] = {**WORKLOAD, **workload}
    return write_yaml(tmp_path / "s.yaml", space)


def test_a_trial_on_a_hung_engine_is_infeasible(hung: str, tmp_path: Path) -> None:
    opts = RunOptions(space_path=endpoint_space(tmp_path, hung), results_dir=tmp_path / "r")
    summary = run_study(opts, lambda _: None)
    assert summary.finished_trials == 1 and summary.stopped is None
    trial = load(sqlite_url(tmp_path / "r", "s"), "s").trials[0]
    assert trial.state == TrialState.COMPLETE and trial.user_attrs["failure_kind"] == "hung"
    assert list(trial.user_attrs["tiers"]) == ["1"]


def test_timeout_ends_a_running_trial_cleanly(
    hung: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Past ``--timeout`` the running trial is stopped, its config queued for the next run,
    and the run ends as a run whose time is up (exit 0), not as a Ctrl-C."""
    space = endpoint_space(tmp_path, hung, stall_floor_s=600)  # the window alone would wait
    started = time.monotonic()
    code = main(["run", "--space", str(space), "--results-dir", str(tmp_path / "r"),
                 "--timeout", "4s"])  # fmt: skip
    assert time.monotonic() - started < 30
    out = capsys.readouterr().out
    assert code == 0, out
    assert "timeout: the running trial was stopped" in out
    study = load(sqlite_url(tmp_path / "r", "s"), "s")
    cut = study.trials[0]
    assert cut.state == TrialState.FAIL and cut.user_attrs["interrupted"] is True
    assert [t.state for t in study.trials[1:]] == [TrialState.WAITING]  # measured next run
