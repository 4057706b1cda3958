from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.objectives.servers import paced_server as start_paced_server


@pytest.fixture(scope="module")
def paced_server() -> Iterator[str]:
    """A real streaming server on loopback, 10 ms between tokens, 20 ms to the first."""
    with start_paced_server() as url:
        yield url
