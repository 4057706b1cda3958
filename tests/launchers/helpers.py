"""Helpers of the launcher tests: free loopback ports, configs that run the loopback engine."""

from __future__ import annotations

import socket
import sys
import time
from pathlib import Path

import httpx

from tuner.engine import EngineConfig

LOOPBACK_ENGINE = Path(__file__).with_name("loopback_engine.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def loopback_config(port: int, *flags: str, **kw: object) -> EngineConfig:
    """An EngineConfig that runs the loopback engine as a local command.

    Its env counts as sampled (``tuned_env``) unless ``tuned_env`` says otherwise.
    """
    env: dict[str, str] = kw.pop("env", {})  # type: ignore[assignment]
    kw.setdefault("tuned_env", frozenset(env))
    return EngineConfig(
        command=(sys.executable, str(LOOPBACK_ENGINE), "m"),
        args=("--host", "127.0.0.1", "--port", str(port), *flags),
        env=env,
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
