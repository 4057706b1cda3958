""" "Client saturated" is judged on streams that produced tokens only.

Requests that fail fast keep the client's event loop busy but measure nothing: against an
always-500 server the loop-lag floor used to flag the client 5 runs in 5, and an engine killed
by an out-of-memory error under load became an infrastructure fault, its config queued again
instead of learnt from.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import pytest
from optuna.trial import TrialState

from objectives.endpoint import Endpoint
from objectives.runner import run_benchmark
from objectives.workload import WorkloadSpec
from tests.faults.faulty_engine import FAULTY_ENGINE, Engine, serve
from tests.faults.procs import load, sqlite_url
from tests.faults.test_hangs import WORKLOAD
from tests.launchers.helpers import free_port
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.run.study import RunOptions, run_study


def test_an_always_500_server_never_saturates_the_client() -> None:
    server = serve(Engine("m", "fail", after=0, itl_s=0.0))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    spec = WorkloadSpec.model_validate({**WORKLOAD, "num_prompts": 60, "tiers": [1, 16]})
    try:
        for _ in range(5):
            tiers = run_benchmark(Endpoint(model="m", base_url=url), spec)
            assert not [t.concurrency for t in tiers if t.client_saturated]
            assert all(t.failures == {"HTTP 500: engine core dead": 60} for t in tiers)
    finally:
        server.shutdown()


@pytest.mark.slow  # a kill timed under load: alone, not beside other tests
def test_an_engine_killed_under_load_is_the_configs_fault(tmp_path: Path) -> None:
    """The engine serves the warm-up and a few requests, then dies (an OOM kill): the trial is
    measured and infeasible, not an infrastructure fault queued again."""
    port = free_port()
    space = copy.deepcopy(SMALL_SPACE)
    command = [sys.executable, str(FAULTY_ENGINE), "{model}", "--x-mode", "crash", "--x-after",
               "6", "--x-itl-ms", "10"]  # fmt: skip
    space["engine"] = {"name": "llama.cpp", "version": "0.3.36", "model": "m", "port": port,
                       "command": command}  # fmt: skip
    space["target"] = {"kind": "process", "stop_grace_s": 2}
    space["parameters"], space["rules"], space["base"] = {}, [], {}
    # A loaded test machine may lag the client on the streams that do produce tokens; only
    # the failures after the crash are on trial here.
    space["workload"] = {**WORKLOAD, "num_prompts": 64, "tiers": [16], "client_lag_limit_ms": 50}
    opts = RunOptions(space_path=write_yaml(tmp_path / "s.yaml", space), results_dir=tmp_path)
    summary = run_study(opts, lambda _: None)
    assert summary.stopped is None
    trial = load(sqlite_url(tmp_path, "s"), "s").trials[0]
    assert trial.state == TrialState.COMPLETE, trial.user_attrs.get("failure")
    assert trial.user_attrs["feasible"] is False
    assert trial.user_attrs["failure_kind"] == "failed_requests"


@pytest.mark.parametrize("concurrency", [16])
def test_a_healthy_engines_streams_are_judged(concurrency: int) -> None:
    """The guard the fix must keep: the client's figures of a tier whose streams produce
    tokens are counted, so a client that does limit such a tier is still caught."""
    server = serve(Engine("m", "ok", after=0, itl_s=0.002))
    url = f"http://127.0.0.1:{server.server_address[1]}"
    spec = WorkloadSpec.model_validate({**WORKLOAD, "tiers": [concurrency]})
    try:
        (tier,) = run_benchmark(Endpoint(model="m", base_url=url), spec)
    finally:
        server.shutdown()
    assert tier.metrics["completed"] == 8 and tier.client["counted_s"] > 0
