"""The ``process`` launcher against a real loopback engine process."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import asdict, replace
from pathlib import Path

import httpx
import pytest

from launchers.process import ProcessLauncher, ProcessSettings
from tests.launchers.helpers import loopback_config
from tuner.errors import FailureKind, InfraError, LaunchError, SetupError, TunerError

DRIVER = Path(__file__).with_name("drive_launcher.py")
ROOT = Path(__file__).parents[2]


def launcher(**settings: object) -> ProcessLauncher:
    return ProcessLauncher(ProcessSettings.model_validate(settings))


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


def test_start_ready_serve_stop(tmp_path: Path, port: int) -> None:
    with launcher() as engine:
        engine.start(loopback_config(port, "--x-startup-s", "0.3"), tmp_path)
        endpoint = engine.wait_ready(30)
        reply = httpx.post(
            f"{endpoint.base_url}/v1/completions",
            json={"model": endpoint.model, "prompt": "hi", "max_tokens": 4},
        )
        assert reply.json()["usage"]["completion_tokens"] == 4
        assert "Started server process" in engine.logs()
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"http://127.0.0.1:{port}/health")
    engine.stop()  # a second stop is harmless
    assert "Started server process" in (tmp_path / "engine.log").read_text()


def test_served_model_name_is_what_requests_use(tmp_path: Path, port: int) -> None:
    with launcher() as engine:
        engine.start(loopback_config(port, "--served-model-name", "alias"), tmp_path)
        assert engine.wait_ready(30).model == "alias"


def test_a_model_the_engine_does_not_serve_is_a_setup_error_at_once(
    tmp_path: Path, port: int
) -> None:
    config = replace(loopback_config(port), model="not-served")
    started = time.monotonic()
    with launcher() as engine, pytest.raises(SetupError, match="does not serve model"):
        engine.start(config, tmp_path)
        engine.wait_ready(60)
    assert time.monotonic() - started < 30  # not the ready timeout


@pytest.mark.parametrize(
    ("flags", "kind", "needle"),
    [
        (
            ("--x-refuse", "ValueError: suffix decoding is incompatible with async scheduling"),
            FailureKind.REFUSED,
            "ValueError: suffix",
        ),
        (("--x-oom",), FailureKind.OOM, "CUDA out of memory"),
        (
            ("--x-refuse", "ValueError: No available memory for the cache blocks."),
            FailureKind.OOM,
            "No available memory",
        ),
        (("--x-refuse", "Segmentation fault"), FailureKind.CRASH, "Segmentation fault"),
    ],
)
def test_exit_at_start_up_fails_fast_and_explains(
    tmp_path: Path, port: int, flags: tuple[str, ...], kind: FailureKind, needle: str
) -> None:
    with launcher() as engine:
        engine.start(loopback_config(port, *flags), tmp_path)
        began = time.monotonic()
        with pytest.raises(LaunchError) as caught:
            engine.wait_ready(120)
        assert time.monotonic() - began < 5  # the exit, not the 120 s deadline, ended the wait
    assert caught.value.kind is kind
    assert "exited with code 1" in str(caught.value) and needle in str(caught.value)
    assert needle in caught.value.log_tail


def test_hang_fails_at_the_ready_timeout(tmp_path: Path, port: int) -> None:
    with launcher() as engine:
        engine.start(loopback_config(port, "--x-hang"), tmp_path)
        began = time.monotonic()
        with pytest.raises(LaunchError) as caught:
            engine.wait_ready(1.0)
        assert time.monotonic() - began >= 1.0
    assert caught.value.kind is FailureKind.READY_TIMEOUT


def test_secrets_never_reach_logs_or_trial_folder(tmp_path: Path, port: int) -> None:
    secret = "hf_s3cr3t_value"
    config = loopback_config(
        port,
        "--x-echo-env",
        "HF_TOKEN",
        env={"HF_TOKEN": secret},
        secret_env=frozenset({"HF_TOKEN"}),
    )
    with launcher() as engine:
        engine.start(config, tmp_path)
        engine.wait_ready(30)
        assert "HF_TOKEN is <redacted>" in engine.logs()
    for path in tmp_path.rglob("*"):
        assert secret not in path.read_text(errors="replace")


def test_overridden_flag_is_reported_as_knob_ignored(tmp_path: Path, port: int) -> None:
    config = loopback_config(port, "--max-num-seqs", "40", "--x-report", "max_num_seqs=256")
    with launcher() as engine:
        engine.start(config, tmp_path)
        with pytest.raises(LaunchError) as caught:
            engine.wait_ready(30)
    assert caught.value.kind is FailureKind.KNOB_IGNORED
    assert "--max-num-seqs" in str(caught.value)
    assert engine.knob_report is not None and "--max-num-seqs" in engine.knob_report.ignored
    record = json.loads((tmp_path / "knobs.json").read_text())
    assert "engine reports max_num_seqs=256" in record["ignored"]["--max-num-seqs"]


def test_unknown_env_knob_is_reported_and_can_be_only_recorded(tmp_path: Path, port: int) -> None:
    config = loopback_config(
        port,
        "--max-num-seqs",
        "40",
        "--x-unknown-env",
        "VLLM_ATTENTION_BACKEND",
        env={"VLLM_ATTENTION_BACKEND": "FLASHINFER", "VLLM_USE_DEEP_GEMM": "1"},
    )
    with launcher(verify_knobs=False) as engine:
        engine.start(config, tmp_path)
        engine.wait_ready(30)
    report = engine.knob_report
    assert report is not None
    assert list(report.ignored) == ["VLLM_ATTENTION_BACKEND"]
    assert {"--max-num-seqs", "VLLM_USE_DEEP_GEMM"} <= set(report.applied)


def test_stop_ends_the_whole_process_group(tmp_path: Path, port: int) -> None:
    with launcher() as engine:
        engine.start(loopback_config(port, "--x-child"), tmp_path)
        engine.wait_ready(30)
        assert engine._proc is not None
        pgid = engine._proc.pid
    assert not group_alive(pgid)


def test_sigterm_ignored_escalates_to_sigkill(tmp_path: Path, port: int) -> None:
    engine = launcher(stop_grace_s=0.5)
    engine.start(loopback_config(port, "--x-ignore-sigterm"), tmp_path)
    engine.wait_ready(30)
    assert engine._proc is not None
    pgid = engine._proc.pid
    engine.stop()
    assert not group_alive(pgid)
    assert "SIGTERM ignored" in engine.logs()


def test_port_in_use_is_one_infra_line(tmp_path: Path, running_server: int) -> None:
    with launcher() as engine, pytest.raises(InfraError) as caught:
        engine.start(loopback_config(running_server), tmp_path)
    assert f"port {running_server}" in str(caught.value)


def test_missing_program_is_a_user_error(tmp_path: Path, port: int) -> None:
    config = loopback_config(port)
    config = type(config)(**{**asdict(config), "command": ("/nonexistent/vllm", "serve", "m")})
    with launcher() as engine, pytest.raises(TunerError, match="cannot run engine command"):
        engine.start(config, tmp_path)


def test_settings_refuse_unknown_keys() -> None:
    with pytest.raises(ValueError, match="extra"):
        ProcessSettings.model_validate({"ready_timeout": 5})


@pytest.mark.slow  # signals a child run against a 30 s limit: alone, not beside other tests
@pytest.mark.parametrize(
    ("sig", "phase"),
    [
        (signal.SIGINT, "startup"),
        (signal.SIGTERM, "startup"),
        (signal.SIGINT, "bench"),
        (signal.SIGTERM, "bench"),
    ],
)
def test_interrupted_run_leaves_no_engine(
    tmp_path: Path, port: int, sig: signal.Signals, phase: str
) -> None:
    extra = ("--x-hang",) if phase == "startup" else ()
    config = asdict(loopback_config(port, "--x-child", *extra))
    config["secret_env"] = config["tuned_env"] = []
    driver = subprocess.Popen(
        [sys.executable, str(DRIVER), "process", "{}", json.dumps(config), str(tmp_path), phase],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert driver.stdout is not None
    marker = "STARTED" if phase == "startup" else "READY"
    while driver.stdout.readline().strip() != marker:
        assert driver.poll() is None, "driver ended early"
    pattern = f"loopback_engine.py m --host 127.0.0.1 --port {port}"
    pids = subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()
    pgids = {os.getpgid(int(pid)) for pid in pids}
    assert pgids
    driver.send_signal(sig)
    assert driver.wait(timeout=30) != 0
    assert not any(group_alive(pgid) for pgid in pgids)


def test_the_engine_starts_on_its_cores_at_a_lower_priority() -> None:
    import subprocess
    import sys

    from launchers.process import ProcessLauncher, ProcessSettings

    core = min(os.sched_getaffinity(0))
    settings = ProcessSettings(engine_cpus=[core], engine_nice=7)
    place = ProcessLauncher(settings)._placement()
    script = "import os; print(sorted(os.sched_getaffinity(0)), os.nice(0))"
    out = subprocess.run(
        [sys.executable, "-c", script], preexec_fn=place, capture_output=True, text=True
    ).stdout.split()
    assert out == [f"[{core}]", str(os.nice(0) + 7)]
    assert ProcessLauncher(ProcessSettings())._placement() is None  # nothing asked, nothing done


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="no autogroup here")
def test_the_engines_session_is_niced_as_a_group() -> None:
    import subprocess
    import sys

    from launchers.process import ProcessLauncher, ProcessSettings

    place = ProcessLauncher(ProcessSettings(engine_nice=7))._placement()
    script = "print(open('/proc/self/autogroup').read())"
    out = subprocess.run(
        [sys.executable, "-c", script],
        preexec_fn=place,
        start_new_session=True,
        capture_output=True,
        text=True,
    ).stdout
    assert out.split()[-2:] == ["nice", "7"], out  # as the engine starts: a session of its own
