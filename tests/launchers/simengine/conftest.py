"""A real simulated-engine HTTP server on 127.0.0.1 (uvicorn in a thread), per test."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
import uvicorn

from launchers.simengine import SimEngine
from launchers.simengine.server import build_app

BASE = ["-tp", "4", "--enable-expert-parallel"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def sim_server() -> Iterator[Callable[..., str]]:
    """Starts servers for ``SimEngine.from_argv(args, env, profile, seed, version=...)``;
    yields base URLs."""
    running: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(
        args: list[str] | None = None,
        env: dict[str, str] | None = None,
        profile: str = "h200x4",
        seed: int = 0,
        version: str | None = None,
    ) -> str:
        engine = SimEngine.from_argv(
            [*BASE, *(args or [])], env or {}, profile, seed, version=version
        )
        port = free_port()
        config = uvicorn.Config(build_app(engine), host="127.0.0.1", port=port, log_level="warning")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            assert time.monotonic() < deadline, "server did not start"
            time.sleep(0.02)
        running.append((server, thread))
        return f"http://127.0.0.1:{port}"

    yield start
    for server, thread in running:
        server.should_exit = True
        thread.join(timeout=10)
