"""The bench scripts, as the modules of the ``bench`` package they are."""

from __future__ import annotations

import importlib
from types import ModuleType

import pytest


@pytest.fixture(scope="session")
def se() -> ModuleType:
    return importlib.import_module("bench.sample_efficiency")


@pytest.fixture(scope="session")
def sf() -> ModuleType:
    return importlib.import_module("bench.sim_fidelity")


@pytest.fixture(scope="session")
def s2r() -> ModuleType:
    return importlib.import_module("bench.scenario2_readings")


@pytest.fixture(scope="session")
def ps() -> ModuleType:
    return importlib.import_module("bench.parallel_speedup")
