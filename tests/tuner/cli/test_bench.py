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

from objectives.metrics import compute_metrics
from objectives.records import RequestRecord
from objectives.result import TierResult
from objectives.workload import PrefixRepetitionDataset
from tests.objectives.servers import paced_server, tiny_model, vllm_like_server
from tuner.cli import main
from tuner.cli.bench import bench_workload, parse_tiers
from tuner.cli.bench_table import COLUMNS, summary_rows
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
        "--random-input-len",
        "16",
        "--random-output-len",
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
    assert "tune bench" in table and "TPOT p99" in table and "(max of 8)" in table


def test_each_p99_shows_its_count_and_below_100_says_it_is_the_maximum() -> None:
    # 20 requests of 11 chunks: every p99 but ITL's (200 gaps) is the slowest of 20.
    records = [
        RequestRecord(8, 10, i, [i + 0.1 + 0.01 * k for k in range(11)], 10, success=True)
        for i in range(20)
    ]
    cells = summary_rows([TierResult(4, compute_metrics(records, 20.0))])[0]
    row = dict(zip(COLUMNS, cells, strict=True))
    assert row["TTFT p99"].endswith(" (max of 20)") and row["TPOT p99"].endswith(" (max of 20)")
    assert row["ITL p99"].endswith(" (n=200)")
    assert "(" not in row["TTFT p50"] and "(" not in row["TPOT p50"]


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
        (["--dataset", "zipf"], "is not one of random, sharegpt"),
        (["--random-output-len", "0"], "--random-output-len: Input should be greater than 0"),
        (["--sharegpt-output-len", "5"], "--sharegpt-output-len applies to --dataset sharegpt"),
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


def test_a_sharegpt_run_without_its_file_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["bench", "--url", "http://127.0.0.1:9", "--model", "m", "--dataset", "sharegpt"]
    assert main(args) == 2
    assert capsys.readouterr().err == "error: --dataset sharegpt needs --sharegpt-path\n"


def test_flags_to_workload() -> None:
    opts = {
        "dataset": "prefix_repetition",
        "input_len": 100,  # vllm's generic name: the prefix here
        "prefix_repetition_num_prefixes": 3,
        "prefix_repetition_repeats": 2,
        "prefix_repetition_suffix_len": 4,
        "output_len": 8,
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
    assert spec.dataset.suffix_len == 4 and spec.dataset.output_len == 8
    assert not spec.steady_state and bench_workload({**opts, "steady_state": True}).steady_state
    assert spec.dataset.output_range_ratio == 0.0
    spread = bench_workload({**opts, "output_range_ratio": 0.5}).dataset
    assert isinstance(spread, PrefixRepetitionDataset) and spread.output_range_ratio == 0.5
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
            "--random-input-len",
            "2000",
            "--random-output-len",
            "8",
            "--random-prefix-len",
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


VOCAB_MESSAGE = "Token id 31991 is out of vocabulary"


def test_a_server_refusing_every_request_shows_its_message_and_no_saturation(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "bench.json"
    with vllm_like_server("--reject", VOCAB_MESSAGE) as url:
        code = main(bench_args(url, out, "tiny", "--vocab-size", "32000"))
    captured = capsys.readouterr()
    assert code == 1 and "error: failed requests at tiers 1,4" in captured.err
    assert "client saturated" not in captured.err and "CLIENT-SATURATED" not in captured.out
    assert f"c1: 8 failed: HTTP 400: {VOCAB_MESSAGE}" in captured.out
    tiers = json.loads(out.read_text())["tiers"]
    assert [t["failures"] for t in tiers] == [{f"HTTP 400: {VOCAB_MESSAGE}": 8}] * 2
    assert not any(t["client_saturated"] for t in tiers)


@pytest.mark.parametrize("errors", ["stream", "http"])
def test_random_ids_stay_inside_the_vocabulary_the_server_lists(
    tmp_path: Path, errors: str
) -> None:
    # vLLM 0.32 refuses ids >= 961 (in-stream for a streamed request): found from /v1/models.
    model = tiny_model(tmp_path / "model")
    out = tmp_path / "bench.json"
    with vllm_like_server("--vocab", "961", "--root", str(model), "--errors", errors) as url:
        main(bench_args(url, out, "tiny", "--random-input-len", "256"))
        seen = httpx.get(url + "/seen").json()["max_seen"]
    doc = json.loads(out.read_text())
    assert doc["workload"]["dataset"]["vocab_size"] == 958
    assert all(t["failures"] == {} and t["completed"] == 8 for t in doc["tiers"])
    assert 900 <= seen < 958  # drawn up to the first special token, never past it


def test_vocab_flags_win_over_what_the_server_lists(tmp_path: Path) -> None:
    model = tiny_model(tmp_path / "model")
    small = tmp_path / "small.json"
    vocab = {f"t{i}": i for i in range(500)}
    small.write_text(json.dumps({"model": {"type": "BPE", "vocab": vocab}, "added_tokens": []}))
    out = tmp_path / "bench.json"
    with vllm_like_server("--vocab", "961", "--root", str(model)) as url:
        for extra, bound in ((["--tokenizer", str(small)], 500), (["--vocab-size", "300"], 300)):
            main(bench_args(url, out, "tiny", *extra))
            doc = json.loads(out.read_text())
            assert doc["workload"]["dataset"]["vocab_size"] == bound
            assert all(t["failures"] == {} for t in doc["tiers"])
        assert httpx.get(url + "/seen").json()["max_seen"] < 500


def test_an_unreadable_tokenizer_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    args = bench_args("http://127.0.0.1:9", tmp_path / "x.json")
    assert main([*args, "--tokenizer", str(tmp_path / "nope")]) == 2
    assert "tokenizer" in capsys.readouterr().err
