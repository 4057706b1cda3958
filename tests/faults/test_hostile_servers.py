"""Servers that answer badly: the tool records their fault and goes on, in bounded time.

Each test stands up a real server on loopback (``tests/faults/hostile.py``) that misbehaves as
the audit's did: a negative or non-numeric ``Content-Length``, a ``/metrics`` or ``/health``
that drips one byte a second, an event of JSON nested past Python's recursion limit, a 400
that repeats the API key it was sent.
"""

from __future__ import annotations

import asyncio
import copy
import time
from pathlib import Path
from typing import Any

import pytest

from launchers._startup import wait_until_ready
from objectives import load
from objectives.client import make_http_client
from objectives.endpoint import Endpoint
from objectives.runner import run_benchmark
from objectives.stall import EngineStalled
from objectives.workload import WorkloadSpec
from tests.faults.hostile import Hostile, serving
from tests.faults.procs import REPO, finish, tune
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.cli import main
from tuner.errors import FailureKind, LaunchError

WORKLOAD: dict[str, Any] = {
    "dataset": {"kind": "random", "input_len": 8, "output_len": 4, "vocab_size": 500},
    "num_prompts": 2,
    "warmup": 0,
    "tiers": [1],
    "request_timeout_s": 5,
    "client_lag_limit_ms": 200,  # the client shares the machine's cores with other tests
}


def endpoint_space(url: str, **target: Any) -> dict[str, Any]:
    space = copy.deepcopy(SMALL_SPACE)
    space["engine"]["model"] = "m"
    space["target"] = {"kind": "endpoint", "url": url, **target}
    space["parameters"], space["rules"], space["base"] = {}, [], {}
    space["workload"] = copy.deepcopy(WORKLOAD)
    space["study"]["ready_timeout_s"] = 10
    return space


def run(tmp_path: Path, space: dict[str, Any]) -> int:
    path = write_yaml(tmp_path / "hostile.yaml", space)
    args = ["run", "--space", str(path), "--trials", "1", "--confirm", "0"]
    return main([*args, "--results-dir", str(tmp_path / "results")])


@pytest.mark.parametrize("length", ["-5", "abc"])
def test_a_bad_content_length_is_the_servers_fault_not_a_spin(length: str) -> None:
    # Before: -5 spun `tune bench` at 100% CPU for ever; abc was a ValueError traceback.
    with serving(Hostile(content_length=length)) as url:
        args = ["bench", "--url", url, "--model", "m", "--concurrency", "1", "--warmup", "0"]
        args += ["--num-prompts", "2", "--random-input-len", "8", "--random-output-len", "4"]
        proc = tune(*args, cwd=REPO)
        try:
            code, out = finish(proc, timeout_s=60)
        finally:
            proc.kill()
    assert code == 1, out  # the tier had failed requests
    assert "Traceback" not in out
    assert f"malformed response: malformed Content-Length b'{length}'" in out


def test_a_dripping_metrics_is_cut_off_at_its_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    # Before: a 5 s request timeout, and the tier still waiting on /metrics after 60 s.
    monkeypatch.setattr(load, "SCRAPE_DEADLINE_S", 1.0)
    spec = WorkloadSpec.model_validate(WORKLOAD)
    with serving(Hostile(drip=("/metrics",))) as url:
        started = time.monotonic()
        (tier,) = run_benchmark(Endpoint(model="m", base_url=url), spec)
    assert time.monotonic() - started < 8
    assert tier.metrics["completed"] == 2  # measured all the same, without server counters


def test_a_dripping_health_ends_at_the_ready_deadline() -> None:
    # Before: a 15 s ready timeout still waiting at 45 s and more.
    with serving(Hostile(drip=("/health",))) as url:
        started = time.monotonic()
        with pytest.raises(LaunchError) as caught:
            wait_until_ready(url, "m", 2.0)
    assert time.monotonic() - started < 5
    assert caught.value.kind == FailureKind.READY_TIMEOUT
    assert "AnswerTimeout" in str(caught.value)


def test_a_silent_engines_dripping_health_is_asked_within_its_deadline() -> None:
    # The hung-engine verdict asks /health once: a drip there must not hang the verdict.
    async def ask(url: str) -> Exception:
        async with make_http_client(url, 5.0) as http:
            return await load.hung(http, EngineStalled(10.0, 10.0, 1), "c1", 1.0)

    with serving(Hostile(drip=("/health",))) as url:
        started = time.monotonic()
        err = asyncio.run(ask(url))
    assert time.monotonic() - started < 4
    assert "no answer (AnswerTimeout)" in str(err)


def test_deeply_nested_json_is_a_malformed_event(tmp_path: Path) -> None:
    # Before: RecursionError out of `tune run`, nothing exported, every rerun the same.
    with serving(Hostile(nested=100_000)) as url:
        assert run(tmp_path, endpoint_space(url)) == 0
    study = tmp_path / "results" / "hostile"
    assert (study / "report.html").is_file()
    bench = (study / "trials" / "0000" / "bench_c1.json").read_text()
    assert "malformed chunk" in bench


def test_an_api_key_the_server_repeats_is_kept_nowhere(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: the key was in stdout, study.db, trials.csv, report.html and the tier's JSON.
    key = "night-owl-key-7f3a9c21"  # shaped like no known token: only the policy hides it
    monkeypatch.setenv("HOSTILE_KEY", key)
    with serving(Hostile(echo_key=True)) as url:
        run(tmp_path, endpoint_space(url, api_key_env="HOSTILE_KEY"))
    shown = capsys.readouterr()
    study = tmp_path / "results" / "hostile"
    files = [p for p in study.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"study.db", "trials.csv", "report.html", "bench_c1.json"} <= names
    assert (
        "HTTP 400: bad request from key <redacted>"
        in (study / "trials" / "0000" / "bench_c1.json").read_text()
    )
    assert key not in shown.out + shown.err
    assert not [p for p in files if key.encode() in p.read_bytes()]
