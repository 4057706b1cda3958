"""Guards for audit cells that already held and had no test of their own: each passed on the
code as it was, and stays so that it keeps holding (see the fault table in README.md)."""

from __future__ import annotations

import copy
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from launchers.process import ProcessLauncher, ProcessSettings
from objectives.endpoint import Endpoint
from objectives.runner import run_benchmark
from objectives.workload import WorkloadSpec
from tests.faults.hostile import Hostile, serving
from tests.faults.procs import REPO
from tests.launchers.helpers import loopback_config
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tests.tuner.export.conftest import hand_results, hand_study_dir  # noqa: F401 (fixtures)
from tuner.cli import main
from tuner.errors import InfraError

WORKLOAD: dict[str, Any] = {
    "dataset": {"kind": "random", "input_len": 8, "output_len": 4, "vocab_size": 500},
    "num_prompts": 2,
    "warmup": 0,
    "tiers": [1],
    "request_timeout_s": 1.5,
    "client_lag_limit_ms": 200,
}


def test_an_endless_stream_ends_at_the_request_timeout() -> None:
    spec = WorkloadSpec.model_validate({**WORKLOAD, "tiers": [2]})
    with serving(Hostile(endless=True)) as url:
        started = time.monotonic()
        (tier,) = run_benchmark(Endpoint(model="m", base_url=url), spec)
    assert time.monotonic() - started < 10
    assert tier.metrics["failed"] == 2 and tier.failures == {"timeout": 2}


@pytest.mark.parametrize(
    "metrics", [(500, b"internal error"), (200, b"\x00\xff not prometheus {{{"), (404, b"")]
)
def test_a_broken_metrics_endpoint_costs_only_the_server_counters(
    metrics: tuple[int, bytes],
) -> None:
    spec = WorkloadSpec.model_validate({**WORKLOAD, "request_timeout_s": 5})
    with serving(Hostile(metrics=metrics)) as url:
        (tier,) = run_benchmark(Endpoint(model="m", base_url=url), spec)
    assert tier.metrics["completed"] == 2 and not tier.server


def test_an_engine_port_in_use_is_an_infrastructure_fault_naming_it(tmp_path: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with ProcessLauncher(ProcessSettings()) as engine, pytest.raises(InfraError) as caught:
            engine.start(loopback_config(port), tmp_path)
    assert f"port {port} on 127.0.0.1 is already in use" in str(caught.value)


HOSTILE_TEXT = "<script>alert(1)</script><img src=x onerror=alert(2)>"


def test_html_in_every_field_of_the_space_is_text_in_the_report(tmp_path: Path) -> None:
    space = copy.deepcopy(SMALL_SPACE)
    space["description"] = space["hardware"] = HOSTILE_TEXT
    space["engine"]["served_model_name"] = HOSTILE_TEXT
    space["parameters"]["max_num_seqs"]["description"] = HOSTILE_TEXT
    path = write_yaml(tmp_path / "small.yaml", space)
    args = ["run", "--space", str(path), "--trials", "2", "--confirm", "0"]
    assert main([*args, "--results-dir", str(tmp_path / "r")]) == 0
    report = (tmp_path / "r" / "small" / "report.html").read_text()
    assert "<script>alert(1)" not in report and "<img src=x" not in report
    assert "&lt;script&gt;alert(1)" in report


def test_shell_and_path_tricks_in_the_model_path_stay_text(tmp_path: Path) -> None:
    space = copy.deepcopy(SMALL_SPACE)
    space["engine"]["model"] = "../../x; touch PWNED $(touch PWNED2)/m"
    path = write_yaml(tmp_path / "small.yaml", space)
    args = ["run", "--space", str(path), "--trials", "1", "--confirm", "0"]
    assert main([*args, "--results-dir", str(tmp_path / "r")]) == 0
    command = (tmp_path / "r" / "small" / "trials" / "0000" / "command.sh").read_text()
    subprocess.run(["sh", "-n", "-c", command], check=True)  # it parses, and quotes the model
    assert "'../../x; touch PWNED $(touch PWNED2)/m'" in command
    assert not list(tmp_path.rglob("PWNED*")) and not list(REPO.glob("PWNED*"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r", "small.yaml"]


def test_a_symlinked_results_folder_is_written_through(tmp_path: Path) -> None:
    real = tmp_path / "elsewhere"
    real.mkdir()
    (tmp_path / "results").symlink_to(real)
    path = write_yaml(tmp_path / "small.yaml", copy.deepcopy(SMALL_SPACE))
    args = ["run", "--space", str(path), "--trials", "2", "--confirm", "0"]
    assert main([*args, "--results-dir", str(tmp_path / "results")]) == 0
    assert (real / "small" / "report.html").is_file()
    assert main([*args, "--results-dir", str(tmp_path / "results")]) == 0  # and resumes there


def whole(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        json.loads(text)
    elif path.suffix == ".yaml":
        yaml.safe_load(text)
    elif path.suffix == ".html":
        return text.rstrip().endswith("</html>")
    return True


@pytest.mark.slow
def test_sigkill_during_export_leaves_every_file_whole(hand_results: Path) -> None:  # noqa: F811
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "tuner", "export", "--study", "hand"]
    for delay in (1.0, 1.5, 2.0, 2.5, 3.0):  # import, then at different points of the writing
        proc = subprocess.Popen([*cmd, "--results-dir", str(hand_results)], env=env)
        time.sleep(delay)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
        files = [p for p in (hand_results / "hand").iterdir() if p.is_file()]
        text = (".json", ".yaml", ".html", ".csv", ".md", ".txt")
        visible = [p for p in files if not p.name.startswith(".") and p.suffix in text]
        assert all(whole(p) for p in visible), delay
