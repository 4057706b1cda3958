"""An engine started with ``--api-key``: readiness sends the key, a 401 is a set-up error."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from launchers.endpoint import EndpointLauncher, EndpointSettings
from launchers.process import ProcessLauncher, ProcessSettings
from tests.launchers.helpers import free_port, loopback_config
from tests.objectives import servers
from tuner.errors import SetupError

KEY = "sk-test-0123456789"


@pytest.fixture
def keyed_server() -> Iterator[int]:
    """A loopback engine that wants ``Authorization: Bearer KEY`` on every /v1 path."""
    with servers.keyed_server(KEY) as url:
        yield int(url.rsplit(":", 1)[1])


def endpoint(port: int) -> EndpointLauncher:
    return EndpointLauncher(EndpointSettings(url=f"http://127.0.0.1:{port}"))


def test_the_api_key_flag_is_sent_by_the_ready_probe(tmp_path: Path) -> None:
    port = free_port()
    launcher = ProcessLauncher(ProcessSettings())
    with launcher:
        launcher.start(loopback_config(port, "--api-key", KEY), tmp_path)
        ready = launcher.wait_ready(10)
    assert ready.api_key == KEY  # the benchmark sends it as well
    assert KEY not in repr(ready)
    assert KEY not in (tmp_path / "engine.log").read_text()


def test_a_key_from_the_config_reaches_an_endpoint(tmp_path: Path, keyed_server: int) -> None:
    config = replace(loopback_config(free_port()), api_key=KEY)
    with endpoint(keyed_server) as target:
        target.start(config, tmp_path)
        assert target.wait_ready(10).api_key == KEY


def test_401_from_the_ready_probe_is_a_setup_error_at_once(
    tmp_path: Path, keyed_server: int
) -> None:
    began = time.monotonic()
    with endpoint(keyed_server) as target, pytest.raises(SetupError) as caught:
        target.start(loopback_config(free_port()), tmp_path)
        target.wait_ready(60)
    assert time.monotonic() - began < 10  # not the ready timeout
    message = str(caught.value)
    assert "401" in message and "api_key_env" in message and "\n" not in message


def test_a_wrong_key_is_a_setup_error_that_does_not_show_it(
    tmp_path: Path, keyed_server: int
) -> None:
    config = replace(loopback_config(free_port()), api_key="sk-wrong-key")
    with endpoint(keyed_server) as target, pytest.raises(SetupError) as caught:
        target.start(config, tmp_path)
        target.wait_ready(60)
    assert "sk-wrong-key" not in str(caught.value)
