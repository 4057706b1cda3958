"""Helpers shared by the tests of scripts/ and the llama.cpp end-to-end test.

The scripts are run as files, not installed: ``load_script`` imports one as a module.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import httpx

from tests._modules import load_module

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def load_script(name: str) -> ModuleType:
    """Import ``scripts/<name>.py`` once and return the module."""
    return load_module(SCRIPTS / f"{name}.py")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def build_llama_server() -> Path:
    """The cached ``llama-server`` binary; built on first use (~6 minutes on 2 cores)."""
    done = subprocess.run(
        [str(SCRIPTS / "build_llama_server.sh")],
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return Path(done.stdout.strip().splitlines()[-1])


@contextmanager
def running_server(binary: Path, model: Path, *args: str, log: Path) -> Iterator[str]:
    """``llama-server`` on a free loopback port until the block ends; yields its base URL."""
    port = free_port()
    argv = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(port), *args]
    with log.open("wb") as out:
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT)
    base_url = f"http://127.0.0.1:{port}"
    try:
        _wait_healthy(proc, base_url, log, timeout_s=60.0)
        yield base_url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _wait_healthy(
    proc: subprocess.Popen[bytes], base_url: str, log: Path, timeout_s: float
) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"llama-server exited:\n{log.read_text()[-3000:]}"
        try:
            if httpx.get(f"{base_url}/health", timeout=2.0).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise AssertionError(f"llama-server not healthy after {timeout_s}s:\n{log.read_text()[-3000:]}")
