"""Bench scripts are files, not a package: tests load them by path."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests._modules import load_module

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="session")
def se() -> ModuleType:
    return load_module(BENCH / "sample_efficiency.py")


@pytest.fixture(scope="session")
def sf() -> ModuleType:
    return load_module(BENCH / "sim_fidelity.py")


@pytest.fixture(scope="session")
def s2r() -> ModuleType:
    return load_module(BENCH / "scenario2_readings.py")


@pytest.fixture(scope="session")
def ps() -> ModuleType:
    return load_module(BENCH / "parallel_speedup.py")
