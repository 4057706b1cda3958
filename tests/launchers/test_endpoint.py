"""The ``endpoint`` launcher against a real server it did not start."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from launchers import launcher_class
from launchers.endpoint import EndpointLauncher, EndpointSettings
from tests.launchers.helpers import free_port, loopback_config
from tuner.errors import InfraError, SetupError


def endpoint(url: str, **settings: object) -> EndpointLauncher:
    return EndpointLauncher(EndpointSettings.model_validate({"url": url, **settings}))


def test_ready_and_left_running_after_stop(tmp_path: Path, running_server: int) -> None:
    url = f"http://127.0.0.1:{running_server}/"
    with endpoint(url) as target:
        target.start(loopback_config(free_port()), tmp_path)
        ready = target.wait_ready(10)
    assert ready.base_url == url.rstrip("/") and ready.model == "m"
    target.stop()
    assert httpx.get(f"{ready.base_url}/health").status_code == 200  # not ours to stop
    assert "external endpoint" in (tmp_path / "engine.log").read_text()


def test_settings_model_overrides_the_space_model(tmp_path: Path, running_server: int) -> None:
    with endpoint(f"http://127.0.0.1:{running_server}", model="other") as target:
        target.start(loopback_config(free_port()), tmp_path)
        with pytest.raises(SetupError, match="does not exist"):
            target.wait_ready(30)  # the server serves "m" only: a set-up error, at once


def test_server_down_is_infra(tmp_path: Path) -> None:
    with endpoint(f"http://127.0.0.1:{free_port()}") as target:
        target.start(loopback_config(free_port()), tmp_path)
        began = time.monotonic()
        with pytest.raises(InfraError) as caught:
            target.wait_ready(0.5)
    assert time.monotonic() - began < 5
    assert "ConnectError" in str(caught.value)


def test_refuses_engine_params_and_bad_urls() -> None:
    assert launcher_class("endpoint").accepts_engine_params is False  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="http://"):
        EndpointSettings.model_validate({"url": "127.0.0.1:8000"})
    with pytest.raises(ValueError, match="extra"):
        EndpointSettings.model_validate({"url": "http://x", "image": "vllm"})
