"""The launcher contract (launchers/_base.py), checked on every registered kind.

Each kind needs a recipe below: settings plus an engine config that serves, and one that the
engine refuses at start-up (None for kinds that start nothing). A kind registered without a
recipe fails here, so no launcher escapes the contract.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from launchers import LAUNCHERS, Endpoint, LauncherSettings, launcher_class
from tests.launchers.docker_env import sim_container_config, sim_settings
from tests.launchers.helpers import free_port, loopback_config
from tuner.engine import EngineConfig
from tuner.errors import FailureKind, LaunchError


@dataclass
class Recipe:
    settings: dict[str, Any]
    config: EngineConfig
    refusing: EngineConfig | None  # None: the kind starts nothing, so nothing can refuse
    owns_engine: bool = True


def _process(request: pytest.FixtureRequest) -> Recipe:
    port = free_port()
    refusing = loopback_config(port, "--x-refuse", "ValueError: unsupported combination")
    return Recipe({}, loopback_config(port), refusing)


def _endpoint(request: pytest.FixtureRequest) -> Recipe:
    port = request.getfixturevalue("running_server")
    settings = {"url": f"http://127.0.0.1:{port}"}
    return Recipe(settings, loopback_config(free_port()), None, owns_engine=False)


def _sim(request: pytest.FixtureRequest) -> Recipe:
    port = free_port()
    refusing = loopback_config(port, "--max-num-partial-prefills", "2")  # V1 refuses it
    serving = loopback_config(port, "--tensor-parallel-size", "4", "--enable-expert-parallel")
    return Recipe({"profile": "h200x4"}, serving, refusing)


def _docker(request: pytest.FixtureRequest) -> Recipe:
    request.getfixturevalue("docker_client")
    settings = sim_settings(request.getfixturevalue("tmp_path") / "cache")
    port = free_port()
    refusing = sim_container_config(port, "--max-num-partial-prefills", "2")
    return Recipe(settings, sim_container_config(port), refusing)


RECIPES: dict[str, Callable[[pytest.FixtureRequest], Recipe]] = {
    "process": _process,
    "endpoint": _endpoint,
    "docker": _docker,
    "sim": _sim,
}


# Kinds whose recipe needs more than this machine always has (a docker daemon).
MARKS: dict[str, Any] = {"docker": (pytest.mark.docker, pytest.mark.slow)}


def _kinds() -> list[Any]:
    launcher_class("process")  # loads the built-in kinds
    return [pytest.param(kind, marks=MARKS.get(kind, ())) for kind in sorted(LAUNCHERS)]


@pytest.fixture(params=_kinds())
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def recipe(kind: str, request: pytest.FixtureRequest) -> Recipe:
    if kind not in RECIPES:
        pytest.fail(f"launcher kind {kind!r} has no contract recipe in {__file__}")
    return RECIPES[kind](request)


def test_settings_model_is_strict_and_documented(kind: str) -> None:
    model = launcher_class(kind).settings_model
    assert issubclass(model, LauncherSettings)
    assert model.model_config.get("extra") == "forbid"
    undocumented = [name for name, f in model.model_fields.items() if not f.description]
    assert not undocumented, f"{kind}: fields without description: {undocumented}"


def test_stop_before_start_is_harmless(kind: str, recipe: Recipe) -> None:
    cls = launcher_class(kind)
    launcher = cls(cls.settings_model.model_validate(recipe.settings))
    launcher.stop()
    launcher.stop()


def test_start_ready_serve_stop(kind: str, recipe: Recipe, tmp_path: Path) -> None:
    cls = launcher_class(kind)
    with cls(cls.settings_model.model_validate(recipe.settings)) as launcher:
        launcher.start(recipe.config, tmp_path)
        assert (tmp_path / "engine.log").exists()
        endpoint = launcher.wait_ready(120)
        assert isinstance(endpoint, Endpoint)
        assert (endpoint.base_url is None) != (endpoint.virtual is None)
        if endpoint.base_url is not None:
            body = {"model": endpoint.model, "prompt": "hi", "max_tokens": 2}
            reply = httpx.post(f"{endpoint.base_url}/v1/completions", json=body, timeout=30)
            assert reply.status_code == 200
        assert isinstance(launcher.logs(), str)
    launcher.stop()  # idempotent after the context manager's stop
    if recipe.owns_engine and endpoint.base_url is not None:
        with pytest.raises(httpx.TransportError):
            httpx.get(f"{endpoint.base_url}/health", timeout=2)


def test_refusal_fails_fast_as_a_config_fault(kind: str, recipe: Recipe, tmp_path: Path) -> None:
    if recipe.refusing is None:
        pytest.skip(f"{kind} starts no engine, so none can refuse")
    cls = launcher_class(kind)
    with cls(cls.settings_model.model_validate(recipe.settings)) as launcher:
        began = time.monotonic()
        with pytest.raises(LaunchError) as caught:  # from start() or from wait_ready()
            launcher.start(recipe.refusing, tmp_path)
            launcher.wait_ready(120)
        assert time.monotonic() - began < 5
    assert caught.value.kind in set(FailureKind)  # the config's fault, and how
    assert caught.value.log_tail
