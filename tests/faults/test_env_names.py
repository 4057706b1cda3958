"""Env var names are checked when the space loads, and every word a shell reads is quoted."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.engine import EngineConfig
from tuner.errors import SpaceError
from tuner.export.commands import serve_command
from tuner.export.configs import LaunchConfig
from tuner.space import load_space

BAD = "X=1 $(touch pwned) Y"


def space_with(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(SMALL_SPACE)
    for where, value in changes.items():
        section, key = where.split("__")
        data[section][key] = value
    return data


def test_a_bad_base_env_name_is_a_space_error(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "s.yaml", space_with(base__env={BAD: "1"}))
    with pytest.raises(SpaceError) as err:
        load_space(path)
    text = str(err.value)
    assert str(path) in text and "base.env" in text and "env var name" in text and BAD in text


def test_a_name_with_equals_is_refused_before_any_launch(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "s.yaml", space_with(base__env={"A=B": "1"}))
    with pytest.raises(SpaceError, match="A=B"):
        load_space(path)


def test_a_bad_parameter_env_name_is_a_space_error(tmp_path: Path) -> None:
    data = copy.deepcopy(SMALL_SPACE)
    data["parameters"]["threads"] = {
        "type": "categorical", "choices": ["1", "2"], "default": "1", "env": "OMP THREADS",
    }  # fmt: skip
    path = write_yaml(tmp_path / "s.yaml", data)
    with pytest.raises(SpaceError, match=r"parameters\.threads.*env var name.*OMP THREADS"):
        load_space(path)


def test_a_bad_pass_env_name_is_a_space_error(tmp_path: Path) -> None:
    path = write_yaml(tmp_path / "s.yaml", space_with(engine__pass_env=["HF TOKEN"]))
    with pytest.raises(SpaceError, match=r"engine\.pass_env.*HF TOKEN"):
        load_space(path)


def test_a_literal_env_reference_stays_literal_in_commands() -> None:
    launch = LaunchConfig(
        trial=0, program=["vllm", "serve", "m"], args=["--chat-template", "${HOME}/t.jinja"],
        env={"FOO": "${HOME}"},
    )  # fmt: skip
    text = serve_command(launch)
    assert "FOO='${HOME}'" in text and "'${HOME}/t.jinja'" in text
    launch.args, launch.env = ["--chat-template", "${HOME}"], {}
    assert "'${HOME}'" in serve_command(launch)  # only a named secret's reference expands


def test_a_secret_flag_reference_still_expands() -> None:
    launch = LaunchConfig(
        trial=0, program=["vllm", "serve", "m"], args=["--api-key", "${VLLM_API_KEY}"],
        secret_args=["VLLM_API_KEY"],
    )  # fmt: skip
    assert '"${VLLM_API_KEY}"' in serve_command(launch)


def test_command_sh_quotes_every_value() -> None:
    config = EngineConfig(
        command=("vllm", "serve", "m"), args=("--chat-template", "$(touch pwned)"),
        env={"FOO": "${HOME}"}, model="m", port=8000,
    )  # fmt: skip
    line = config.shell_command()
    assert "FOO='${HOME}'" in line and "'$(touch pwned)'" in line
