from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from objectives.workload import PrefixRepetitionDataset
from tests.objectives.servers import paced_server
from tuner.cli import main
from tuner.cli.bench import bench_workload, parse_tiers
from tuner.errors import TunerError


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    with paced_server(itl_ms=5, ttft_ms=10) as url:
        yield url


def bench_args(url: str, out: Path, model: str = "paced", *extra: str) -> list[str]:
    return [
        "bench",
        "--url",
        url,
        "--model",
        model,
        "--concurrency",
        "1,4",
        "--num-prompts",
        "8",
        "--input-len",
        "16",
        "--output-len",
        "5",
        "--json",
        str(out),
        "--no-progress",
        *extra,
    ]


def test_bench_against_a_real_server(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    code = main(bench_args(server, out))
    doc = json.loads(out.read_text())
    # Exit 1 here can only mean a tier flagged client-saturated (a machine too busy to time
    # chunks); failed requests would be a real fault.
    saturated = any(t["client_saturated"] for t in doc["tiers"])
    assert code == (1 if saturated else 0)
    assert doc["model"] == "paced" and doc["workload"]["tiers"] == [1, 4]
    assert [t["max_concurrency"] for t in doc["tiers"]] == [1, 4]
    for tier in doc["tiers"]:
        assert tier["completed"] == 8 and tier["failed"] == 0
        assert tier["total_output_tokens"] == 40
        for key in (
            "median_tpot_ms",
            "p99_tpot_ms",
            "mean_ttft_ms",
            "p99_itl_ms",
            "output_throughput",
            "total_token_throughput",
            "duration",
        ):
            assert key in tier
    table = capsys.readouterr().out
    assert "tune bench" in table and "TPOT p99" in table


def test_failed_requests_exit_one_and_are_in_the_json(
    server: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    assert main(bench_args(server, out, "short", "--endpoint", "chat")) == 1
    assert "error: failed requests at tiers 1,4" in capsys.readouterr().err
    tiers = json.loads(out.read_text())["tiers"]
    assert [t["failures"] for t in tiers] == [{"length not honoured": 8}] * 2


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--concurrency", "1,x"], "--concurrency must be comma-separated integers"),
        (["--concurrency", "4,4"], "unique"),
        (["--dataset", "sharegpt"], "--dataset sharegpt needs --dataset-path"),
        (["--dataset", "zipf"], "is not one of random, sharegpt"),
        (["--output-len", "0"], "dataset.random.output_len"),
    ],
)
def test_usage_errors_are_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    args = bench_args("http://127.0.0.1:9", tmp_path / "x.json") + extra
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not (tmp_path / "x.json").exists()


def test_flags_to_workload() -> None:
    opts = {
        "dataset": "prefix_repetition",
        "input_len": 100,
        "output_len": 8,
        "range_ratio": 0.0,
        "prefix_len": 0,
        "dataset_path": None,
        "fixed_output_len": None,
        "num_prefixes": 3,
        "repeats": 2,
        "suffix_len": 4,
        "num_prompts": None,
        "warmup": 0,
        "concurrency": "2",
        "request_rate": None,
        "burstiness": 1.0,
        "seed": 1,
        "endpoint": "completions",
        "timeout": 5.0,
    }
    spec = bench_workload(opts)
    assert isinstance(spec.dataset, PrefixRepetitionDataset)
    assert spec.num_prompts == 6 and spec.dataset.prefix_len == 100
    assert parse_tiers("1, 8,32,") == [1, 8, 32]
    with pytest.raises(TunerError):
        parse_tiers("a")


@pytest.fixture(scope="module")
def sim_http() -> Iterator[str]:
    """``python -m launchers.sim``: the simulated vLLM engine behind its real HTTP server."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "launchers.sim",
            SIM_MODEL,
            "-tp",
            "4",
            "--enable-expert-parallel",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "sim server did not start"
            try:
                if httpx.get(url + "/health", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


SIM_MODEL = "MiniMaxAI/MiniMax-M2.5"


def test_bench_against_the_simulated_engine_http_server(sim_http: str, tmp_path: Path) -> None:
    out = tmp_path / "sim.json"
    code = main(
        [
            "bench",
            "--url",
            sim_http,
            "--model",
            SIM_MODEL,
            "--concurrency",
            "1,4",
            "--num-prompts",
            "4",
            "--input-len",
            "2000",
            "--output-len",
            "8",
            "--prefix-len",
            "1024",
            "--json",
            str(out),
            "--no-progress",
        ]
    )
    doc = json.loads(out.read_text())
    tiers = doc["tiers"]
    assert code == (1 if any(t["client_saturated"] for t in tiers) else 0)
    for tier in tiers:
        assert tier["completed"] == 4 and tier["failures"] == {}
        assert tier["total_output_tokens"] == 32 and tier["total_input_tokens"] == 4 * 3024
        assert tier["median_tpot_ms"] > 0 and tier["mean_ttft_ms"] > tier["median_tpot_ms"]
        # The engine's own /metrics, per tier: its token counters match what was sent.
        assert tier["server"]["generation_tokens"] == 32
        assert tier["server"]["prompt_tokens"] == 4 * 3024
        assert 0 < tier["server"]["prefix_cache_hit_rate"] < 1  # a 1024-token shared prefix
