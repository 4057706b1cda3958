"""The Docker side of the launcher tests: a daemon, the simulated-engine image, settings.

No registry is reachable, so ``tune-sim:latest`` is an empty rootfs (scripts/make_sim_image.sh)
that runs this machine's Python and this checkout through read-only bind mounts, on the host
network. Without a daemon the docker tests skip, except under CI (CI=true), where they fail.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
IMAGE = "tune-sim:latest"
PREFIX = sys.base_prefix
# Under a virtual environment (CI installs into one) the engine runs the same interpreter, so
# the environment is mounted too, at its own path.
VENV = sys.prefix if sys.prefix != sys.base_prefix else None
PYTHON = sys.executable if VENV else "python"
IN_CONTAINER = "/opt/tune"  # where the image expects the project


def mounts() -> list[str]:
    """Read-only mounts that let the empty image run this machine's Python and this checkout."""
    pythons = [PREFIX] + ([VENV] if VENV else [])
    return ["/usr:/usr:ro", *(f"{p}:{p}:ro" for p in pythons), f"{ROOT}:{IN_CONTAINER}:ro"]


def ensure_daemon() -> Any:
    """A docker SDK client for a running daemon; starts one under CI, else skips."""
    import docker

    try:
        client = docker.from_env(timeout=120)
        client.ping()
        return client
    except docker.errors.DockerException as err:
        reason = f"no Docker daemon ({err})"
    if os.environ.get("CI") != "true":
        pytest.skip(f"{reason}; run scripts/start_dockerd.sh")
    started = subprocess.run(
        ["bash", str(ROOT / "scripts/start_dockerd.sh")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if started.returncode != 0:
        pytest.fail(f"{reason}; start_dockerd.sh failed:\n{started.stdout}{started.stderr}")
    client = docker.from_env(timeout=120)
    client.ping()
    return client


def ensure_image() -> None:
    built = subprocess.run(
        ["bash", str(ROOT / "scripts/make_sim_image.sh"), IMAGE],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if built.returncode != 0:
        pytest.fail(f"building {IMAGE} failed:\n{built.stdout}{built.stderr}")


def sim_settings(cache_root: Path, **overrides: Any) -> dict[str, Any]:
    """Docker settings that run the project's engines inside ``tune-sim:latest``."""
    return {
        "image": IMAGE,
        "volumes": mounts(),
        "cache_root": str(cache_root),
        "stop_grace_s": 5,
        "devices_free_timeout_s": 5,
        **overrides,
    }


def container_config(port: int, *flags: str, study: str = "test", **kw: Any) -> Any:
    """The loopback engine as a container command, labelled with ``study``."""
    from tuner.engine import EngineConfig

    return EngineConfig(
        command=(PYTHON, f"{IN_CONTAINER}/tests/launchers/loopback_engine.py", "m"),
        args=("--host", "127.0.0.1", "--port", str(port), *flags),
        env=kw.pop("env", {}),
        model="m",
        port=port,
        labels={"study": study, "trial": "0"},
        **kw,
    )


def sim_container_config(port: int, *flags: str, study: str = "test") -> Any:
    """The simulated engine's HTTP server (``python -m launchers.sim``) as a container command."""
    from tuner.engine import EngineConfig

    return EngineConfig(
        command=(PYTHON, "-m", "launchers.sim", "m"),
        args=(
            "--tensor-parallel-size",
            "4",
            "--enable-expert-parallel",
            *flags,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
        ),
        env={"SIM_PROFILE": "h200x4"},
        model="m",
        port=port,
        labels={"study": study, "trial": "0"},
    )


def ours(client: Any, study: str) -> list[Any]:
    """Containers of ``study`` still known to the daemon, in any state."""
    return list(client.containers.list(all=True, filters={"label": [f"tune.study={study}"]}))
