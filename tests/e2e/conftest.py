"""The end-to-end tests' small space; the PostgreSQL cluster is ``tests/postgres.py``'s."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.tuner.conftest import SMALL_SPACE


@pytest.fixture
def small_space() -> dict[str, Any]:
    return copy.deepcopy(SMALL_SPACE)
