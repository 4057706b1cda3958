"""Fixtures: the model-writer script as a module, and the cached ``llama-server`` binary."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest

from tests.scripts._llama import build_llama_server, load_script


@pytest.fixture(scope="session")
def gguf_script() -> ModuleType:
    return load_script("make_gguf_model")


@pytest.fixture(scope="session")
def llama_server_bin() -> Path:
    """The cached ``llama-server`` binary; built on first use (~6 minutes on 2 cores)."""
    return build_llama_server()
