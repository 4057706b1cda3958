"""Fixtures shared by the launcher tests: free ports, a live server, a Docker daemon."""

from __future__ import annotations

import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from tests.launchers.helpers import free_port, loopback_config, wait_listening


@pytest.fixture
def port() -> int:
    return free_port()


@pytest.fixture
def running_server() -> Iterator[int]:
    """A loopback engine started outside any launcher (what an ``endpoint`` target points at)."""
    port = free_port()
    proc = subprocess.Popen(
        loopback_config(port).argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        wait_listening(port)
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="session")
def docker_client() -> Any:
    """A reachable daemon with the ``tune-sim:latest`` image (see docker_env.py)."""
    from tests.launchers.docker_env import ensure_daemon, ensure_image

    client = ensure_daemon()
    ensure_image()
    return client


@pytest.fixture
def study() -> str:
    """A study name of its own per test, so label queries see this test's containers only."""
    return f"t{uuid.uuid4().hex[:10]}"
