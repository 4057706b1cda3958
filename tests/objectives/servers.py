"""Real servers on loopback for the client, load and CLI tests."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextmanager
def paced_server(itl_ms: float = 10, ttft_ms: float = 20) -> Iterator[str]:
    """bench/pacing_server.py in its own process; yields its base URL."""
    proc = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "bench" / "pacing_server.py"),
            "--port",
            "0",
            "--itl-ms",
            str(itl_ms),
            "--ttft-ms",
            str(ttft_ms),
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
