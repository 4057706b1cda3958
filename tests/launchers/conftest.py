"""Fixtures shared by the launcher tests: free loopback ports, engine configs, a live server."""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tuner.engine import EngineConfig

LOOPBACK_ENGINE = Path(__file__).with_name("loopback_engine.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def loopback_config(port: int, *flags: str, **kw: object) -> EngineConfig:
    """An EngineConfig that runs the loopback engine as a local command."""
    return EngineConfig(
        command=(sys.executable, str(LOOPBACK_ENGINE), "m"),
        args=("--host", "127.0.0.1", "--port", str(port), *flags),
        env=kw.pop("env", {}),  # type: ignore[arg-type]
        model="m",
        port=port,
        **kw,  # type: ignore[arg-type]
    )


def wait_listening(port: int, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            time.sleep(0.05)
    raise RuntimeError(f"loopback engine on {port} did not come up")


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
    from docker_env import ensure_daemon, ensure_image

    client = ensure_daemon()
    ensure_image()
    return client


@pytest.fixture
def study() -> str:
    """A study name of its own per test, so label queries see this test's containers only."""
    return f"t{uuid.uuid4().hex[:10]}"
