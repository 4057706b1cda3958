from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def paced_server() -> Iterator[str]:
    """A real streaming server on loopback, 10 ms between tokens, 20 ms to the first."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "pacing_server.py"),
            "--port",
            "0",
            "--itl-ms",
            "10",
            "--ttft-ms",
            "20",
            "--max-seconds",
            "120",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line.startswith("PORT "), line
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
