"""The engine check before any trial, against real vLLM 0.32.0's help text and env list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from launchers import EngineFacts
from launchers._vllm_facts import parse_help
from tests.tuner.space.conftest import MINIMAL
from tuner.errors import SpaceError
from tuner.run import preflight
from tuner.space import load_space

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm-0.32.0-cpu"
REAL = EngineFacts(
    program="/venv/bin/vllm",
    version="0.32.0+cpu",
    flags=parse_help((FIXTURES / "serve_help_all.txt").read_text()),
    env=frozenset(json.loads((FIXTURES / "envs.json").read_text())),
)


@pytest.fixture
def check(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    program = tmp_path / "vllm"
    program.write_text("#!/usr/bin/env python3\n")
    monkeypatch.setattr(preflight, "engine_facts", lambda _: REAL)

    def run(**changes: Any) -> list[str]:
        space = json.loads(json.dumps(MINIMAL))
        space["engine"] = {"name": "vllm", "version": "0.32.0", "model": "m",
                           "command": [str(program), "serve", "{model}"]}  # fmt: skip
        space["target"] = {"kind": "process"}
        space["base"] = {"args": {"max-model-len": 2048}}
        for key, value in changes.items():
            space[key] = {**space.get(key, {}), **value}
        path = tmp_path / "space.yaml"
        path.write_text(json.dumps(space))
        return preflight.check_engine(load_space(path), path)

    return run


def test_the_real_help_text_lists_flags_and_their_negations() -> None:
    assert {"--max-num-seqs", "--enforce-eager", "--no-enforce-eager", "-cc"} <= REAL.flags
    assert REAL.knows_flag("-O3") and REAL.knows_flag("--compilation-config.mode=3")
    assert not REAL.knows_flag("--max-num-seq")  # argparse would take it as an abbreviation


def test_a_space_that_matches_the_engine_passes(check) -> None:
    assert check() == []


def test_a_misspelt_flag_is_one_error_naming_its_yaml_path(check) -> None:
    bad = {"flag": "--max-num-seq", "type": "categorical", "choices": [8, 16], "default": 16}
    with pytest.raises(SpaceError, match=r"parameters\.seqs: .*no flag --max-num-seq .*"
                       r"did you mean --max-num-seqs\?"):  # fmt: skip
        check(parameters={"seqs": bad})
    with pytest.raises(SpaceError, match=r"base\.args\.max-model-length: .*no flag"):
        check(base={"args": {"max-model-length": 2048}})


def test_a_flag_only_one_value_renders_is_checked_too(check) -> None:
    render = {"on": ["--enforce-eager"], "off": ["--no-enforce-eagerly"]}
    eager = {"flag": "--enforce-eager", "type": "categorical", "choices": ["on", "off"],
             "default": "off", "render": render}  # fmt: skip
    with pytest.raises(SpaceError, match=r"parameters\.eager: .*--no-enforce-eagerly"):
        check(parameters={"eager": eager})


def test_the_pinned_version_must_be_the_installed_one(check) -> None:
    with pytest.raises(SpaceError, match=r"engine\.version: the space pins 0\.31\.0 but .* says "
                       r"0\.32\.0\+cpu"):  # fmt: skip
        check(engine={"version": "0.31.0"})


def test_env_unknown_to_the_engine_refused_when_sampled_warned_when_shared(check) -> None:
    knob = {"env": "VLLM_CPU_KV_SPACE", "type": "categorical", "choices": ["1", "2"],
            "default": "1"}  # fmt: skip
    with pytest.raises(SpaceError, match=r"parameters\.kv: .*does not read env VLLM_CPU_KV_SPACE"):
        check(parameters={"kv": knob})
    warnings = check(base={"env": {"VLLM_FOO": "1", "OMP_NUM_THREADS": "1"}})
    assert warnings == ["base.env.VLLM_FOO: vllm 0.32.0+cpu does not read it (it will warn at "
                        "every start)"]  # fmt: skip


def test_a_program_that_is_not_here_is_an_error_for_process_targets(tmp_path: Path) -> None:
    space = json.loads(json.dumps(MINIMAL))
    space["engine"] = {"name": "vllm", "version": "0.32.0", "model": "m",
                       "command": ["/nowhere/vllm", "serve", "{model}"]}  # fmt: skip
    space["target"] = {"kind": "process"}
    path = tmp_path / "space.yaml"
    path.write_text(json.dumps(space))
    with pytest.raises(SpaceError, match=r"engine\.command: program '/nowhere/vllm'"):
        preflight.check_engine(load_space(path), path)


def test_a_command_that_is_not_the_vllm_program_is_not_asked(tmp_path: Path) -> None:
    space = json.loads(json.dumps(MINIMAL))
    space["engine"]["command"] = ["python", "-m", "launchers.sim", "{model}"]
    space["target"] = {"kind": "process"}
    path = tmp_path / "space.yaml"
    path.write_text(json.dumps(space))
    assert preflight.check_engine(load_space(path), path) == [
        "engine check skipped: 'python' is not the vllm program"
    ]
