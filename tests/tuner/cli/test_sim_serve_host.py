"""``tune sim-serve`` binds loopback unless told otherwise, as ``tune dashboard`` does."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pytest

from launchers.simengine import server
from tuner.cli import main


@pytest.fixture
def served(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    calls: list[list[str]] = []

    def fake(argv: Sequence[str], env: Mapping[str, str], *rest: object) -> int:
        calls.append([*argv, f"release={rest[-1]}"])
        return 0

    monkeypatch.setattr(server, "serve", fake)
    return calls


def host_of(argv: list[str]) -> str:
    return argv[len(argv) - 1 - argv[::-1].index("--host") + 1]


def test_binds_loopback_by_default(served: list[list[str]]) -> None:
    assert main(["sim-serve", "org/model", "--port", "8123"]) == 0
    assert host_of(served[0]) == "127.0.0.1" and served[0][-3:-1] == ["--port", "8123"]
    assert served[0][-1] == "release=None"  # the profile's own release


def test_version_names_the_release_it_imitates(served: list[list[str]]) -> None:
    assert main(["sim-serve", "org/model", "--version", "0.17.1"]) == 0
    assert served[0][-1] == "release=0.17.1"


def test_host_flag_changes_it(served: list[list[str]]) -> None:
    assert main(["sim-serve", "org/model", "--host", "0.0.0.0"]) == 0
    assert host_of(served[0]) == "0.0.0.0"
