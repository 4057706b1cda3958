"""The ``docker`` launcher against a real Docker daemon and the tune-sim image."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from launchers._cleanup import OWNER
from launchers.docker import DockerLauncher, DockerSettings, container_spec
from tests.launchers.docker_env import (
    ROOT,
    container_config,
    ours,
    sim_container_config,
    sim_settings,
)
from tests.launchers.helpers import free_port
from tuner.errors import FailureKind, InfraError, LaunchError, TunerError

pytestmark = [pytest.mark.docker, pytest.mark.slow]
DRIVER = Path(__file__).with_name("drive_launcher.py")


def launcher(tmp_path: Path, **overrides: Any) -> DockerLauncher:
    settings = sim_settings(tmp_path / "cache", **overrides)
    return DockerLauncher(DockerSettings.model_validate(settings))


def stream_completion(base_url: str, model: str, tokens: int) -> int:
    """One streamed completion, as a benchmark sends it; returns the content chunks seen."""
    body = {"model": model, "prompt": "hi", "max_tokens": tokens, "stream": True}
    chunks = 0
    with httpx.stream("POST", f"{base_url}/v1/completions", json=body, timeout=30) as reply:
        for line in reply.iter_lines():
            if line.startswith("data: {") and json.loads(line[6:])["choices"]:
                chunks += 1
    return chunks


def test_start_ready_benchmark_stop(docker_client: Any, tmp_path: Path, study: str) -> None:
    port = free_port()
    config = sim_container_config(port, "--max-num-seqs", "16", study=study)
    with launcher(tmp_path) as engine:
        engine.start(config, tmp_path)
        endpoint = engine.wait_ready(60)
        [container] = ours(docker_client, study)
        assert container.status == "running"
        assert container.labels[OWNER].endswith(f":{os.getpid()}")
        assert endpoint.base_url is not None
        assert [stream_completion(endpoint.base_url, endpoint.model, 8) for _ in range(4)] == [
            8
        ] * 4
        assert engine.knob_report is not None and "--max-num-seqs" in engine.knob_report.applied
    assert ours(docker_client, study) == []
    engine.stop()
    assert "non-default args" in (tmp_path / "engine.log").read_text()


def test_refusal_detected_within_5s_of_exit(docker_client: Any, tmp_path: Path, study: str) -> None:
    # vLLM V1 refuses concurrent partial prefills at start-up; so does the simulated engine.
    config = sim_container_config(free_port(), "--max-num-partial-prefills", "2", study=study)
    with launcher(tmp_path) as engine:
        engine.start(config, tmp_path)
        with pytest.raises(LaunchError) as caught:
            engine.wait_ready(120)
        seen = time.time()
        [container] = ours(docker_client, study)
        finished = _docker_time(container.attrs["State"]["FinishedAt"])
    assert seen - finished < 5, f"exit seen {seen - finished:.2f}s after the container exited"
    assert caught.value.kind is FailureKind.REFUSED
    assert "exited with code" in str(caught.value)
    assert "NotImplementedError" in str(caught.value)
    assert "max-num-partial-prefills" in (tmp_path / "engine.log").read_text()
    assert ours(docker_client, study) == []


def test_oom_killed_container_is_oom(docker_client: Any, tmp_path: Path, study: str) -> None:
    limits = {"mem_limit": "64m", "memswap_limit": "64m"}
    with launcher(tmp_path, extra_docker_args=limits) as engine:
        engine.start(container_config(free_port(), "--x-alloc-mb", "256", study=study), tmp_path)
        with pytest.raises(LaunchError) as caught:
            engine.wait_ready(60)
    assert caught.value.kind is FailureKind.OOM
    assert "code 137, OOM-killed" in str(caught.value)


def test_hang_fails_at_the_ready_timeout(docker_client: Any, tmp_path: Path, study: str) -> None:
    with launcher(tmp_path) as engine:
        engine.start(container_config(free_port(), "--x-hang", study=study), tmp_path)
        began = time.monotonic()
        with pytest.raises(LaunchError) as caught:
            engine.wait_ready(3)
        assert 3 <= time.monotonic() - began < 8
    assert caught.value.kind is FailureKind.READY_TIMEOUT
    assert ours(docker_client, study) == []


def test_secret_env_reaches_the_engine_but_not_the_log(
    docker_client: Any, tmp_path: Path, study: str
) -> None:
    secret = "hf_d0ck3r_secret"
    config = container_config(
        free_port(),
        "--x-echo-env",
        "HF_TOKEN",
        study=study,
        env={"HF_TOKEN": secret},
        secret_env=frozenset({"HF_TOKEN"}),
    )
    with launcher(tmp_path) as engine:
        engine.start(config, tmp_path)
        engine.wait_ready(60)
        assert "HF_TOKEN is <redacted>" in engine.logs()
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text(errors="replace")


@pytest.mark.parametrize(
    ("sig", "phase"),
    [
        (signal.SIGINT, "startup"),
        (signal.SIGINT, "bench"),
        (signal.SIGTERM, "bench"),
    ],
)
def test_interrupted_run_leaves_no_container(
    docker_client: Any, tmp_path: Path, study: str, sig: signal.Signals, phase: str
) -> None:
    extra = ("--x-hang",) if phase == "startup" else ()
    driver = _drive(tmp_path, container_config(free_port(), *extra, study=study), phase)
    assert len(ours(docker_client, study)) == 1
    driver.send_signal(sig)
    assert driver.wait(timeout=60) != 0
    assert ours(docker_client, study) == []


def test_cleanup_removes_what_a_killed_run_left(
    docker_client: Any, tmp_path: Path, study: str
) -> None:
    driver = _drive(tmp_path, container_config(free_port(), study=study), "bench")
    hung = container_config(free_port(), "--x-hang", study=study + "x")
    live = _drive(tmp_path / "live", hung, "startup")
    try:
        driver.kill()  # SIGKILL: no handler runs, the container stays behind
        driver.wait(timeout=30)
        assert len(ours(docker_client, study)) == 1
        cli = [sys.executable, "-m", "tuner", "cleanup"]
        done = subprocess.run(cli, capture_output=True, text=True, cwd=ROOT, timeout=120)
        assert done.returncode == 0, done.stderr
        assert f"study {study}," in done.stdout and ours(docker_client, study) == []
        assert len(ours(docker_client, study + "x")) == 1  # its run is alive: left alone
    finally:
        live.send_signal(signal.SIGINT)
        live.wait(timeout=60)
    assert ours(docker_client, study + "x") == []


def test_gpu_and_npu_options_on_the_created_container(docker_client: Any, tmp_path: Path) -> None:
    config = container_config(free_port(), study="devices")
    gpu = DockerSettings.model_validate(sim_settings(tmp_path, gpus=["0", "2"]))
    npu = DockerSettings.model_validate(sim_settings(tmp_path, npus=[4, 5], shm_size="2g"))
    gpu_cfg = _created_config(docker_client, container_spec(gpu, config))
    npu_cfg = _created_config(docker_client, container_spec(npu, config))
    [request] = gpu_cfg["HostConfig"]["DeviceRequests"]
    assert request["Driver"] == "nvidia" and request["DeviceIDs"] == ["0", "2"]
    assert request["Capabilities"] == [["gpu"]]
    host = npu_cfg["HostConfig"]
    assert {d["PathOnHost"] for d in host["Devices"]} == {
        "/dev/davinci4",
        "/dev/davinci5",
        "/dev/davinci_manager",
        "/dev/devmm_svm",
        "/dev/hisi_hdc",
    }
    assert "/usr/local/Ascend/driver:/usr/local/Ascend/driver:ro" in host["Binds"]
    assert "ASCEND_RT_VISIBLE_DEVICES=0,1" in npu_cfg["Config"]["Env"]
    assert npu_cfg["Config"]["Labels"]["tune.devices"] == "ascend:4,5"
    assert (host["NetworkMode"], host["IpcMode"], host["ShmSize"]) == ("host", "host", 2 << 30)
    cache_bind = f"{tmp_path}/root_.cache_vllm:/root/.cache/vllm:rw"
    assert cache_bind in host["Binds"]


def test_busy_devices_wait_then_fail_as_infra(
    docker_client: Any, tmp_path: Path, study: str
) -> None:
    holder = DockerSettings.model_validate(sim_settings(tmp_path, gpus=["3"]))
    spec = container_spec(holder, container_config(free_port(), study=study))
    held = docker_client.containers.create(**spec)
    try:
        engine = launcher(tmp_path, gpus=["1", "3"], devices_free_timeout_s=1)
        with engine, pytest.raises(InfraError) as caught:
            engine.start(container_config(free_port(), study=study), tmp_path)
    finally:
        held.remove(force=True)
    assert "devices nvidia:1,3 still busy" in str(caught.value) and held.name in str(caught.value)


def test_one_line_errors(
    docker_client: Any, tmp_path: Path, running_server: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(InfraError, match="already in use"):
        launcher(tmp_path).start(container_config(running_server), tmp_path)
    with pytest.raises(TunerError, match="not on this host"):
        launcher(tmp_path, image="nope:missing").start(container_config(free_port()), tmp_path)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no.sock")
    with pytest.raises(InfraError, match="daemon unreachable"):
        launcher(tmp_path).start(container_config(free_port()), tmp_path)


def _created_config(client: Any, spec: dict[str, Any]) -> dict[str, Any]:
    container = client.containers.create(**spec)
    try:
        return dict(client.api.inspect_container(container.id))
    finally:
        container.remove(force=True)


def _drive(trial_dir: Path, config: Any, phase: str) -> subprocess.Popen[str]:
    settings = json.dumps(sim_settings(trial_dir / "cache"))
    raw = {**asdict(config), "secret_env": [], "tuned_env": [], "labels": dict(config.labels)}
    driver = subprocess.Popen(
        [sys.executable, str(DRIVER), "docker", settings, json.dumps(raw), str(trial_dir), phase],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert driver.stdout is not None
    marker = "STARTED" if phase == "startup" else "READY"
    while driver.stdout.readline().strip() != marker:
        assert driver.poll() is None, "driver ended early"
    return driver


def _docker_time(stamp: str) -> float:
    # Docker writes nanoseconds; Python parses microseconds.
    head, _, frac = stamp.rstrip("Z").partition(".")
    return datetime.fromisoformat(f"{head}.{frac[:6]:0<6}+00:00").timestamp()
