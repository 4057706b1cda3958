"""The engine check before any trial, against real vLLM 0.32.0's help text and env list."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import launchers
from launchers import EngineFacts, FactsUnavailable
from launchers._vllm_facts import parse_choices, parse_help, parse_probe, with_backends
from tests.tuner.space.conftest import MINIMAL
from tuner.errors import SpaceError, TunerError
from tuner.run import preflight
from tuner.space import load_space

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm-0.32.0-cpu"
HELP = (FIXTURES / "serve_help_all.txt").read_text()
BACKENDS = frozenset({"CPU_ATTN", "FLASH_ATTN", "FLASHINFER", "TRITON_ATTN"})
REAL = with_backends(
    EngineFacts(
        program="/venv/bin/vllm",
        version="0.32.0+cpu",
        flags=parse_help(HELP),
        env=frozenset(json.loads((FIXTURES / "envs.json").read_text())),
        choices=parse_choices(HELP),
    ),
    BACKENDS,
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


def test_the_real_help_text_lists_the_choices_of_a_flag() -> None:
    assert {"auto", "fp8", "bfloat16"} <= REAL.choices["--kv-cache-dtype"]
    assert "--max-num-seqs" not in REAL.choices  # a number: any value is the parser's to judge
    assert REAL.takes("--max-num-seqs", "7") and not REAL.takes("--kv-cache-dtype", "fp9")


def test_a_value_outside_the_parsers_choices_is_one_error_with_the_closest(check) -> None:
    dtype = {"flag": "--kv-cache-dtype", "type": "categorical", "choices": ["auto", "fp9"],
             "default": "auto"}  # fmt: skip
    with pytest.raises(SpaceError, match=r"parameters\.kv: .*does not take --kv-cache-dtype fp9; "
                       r"did you mean fp8\?"):  # fmt: skip
        check(parameters={"kv": dtype})
    with pytest.raises(SpaceError, match=r"base\.args\.kv-cache-dtype: .* fp9"):
        check(base={"args": {"kv-cache-dtype": "fp9"}})


def test_an_attention_backend_the_release_does_not_know_is_refused(check) -> None:
    attn = {"flag": "--attention-backend", "type": "categorical",
            "choices": ["CPU_ATTN", "FLASHINFR"], "default": "CPU_ATTN"}  # fmt: skip
    with pytest.raises(SpaceError, match=r"parameters\.attn: .*--attention-backend FLASHINFR; "
                       r"did you mean FLASHINFER\?"):  # fmt: skip
        check(parameters={"attn": attn})


def test_the_probe_output_of_an_image_reads_as_the_programs_facts() -> None:
    env = json.loads((FIXTURES / "envs.json").read_text())
    backends = json.dumps(sorted(BACKENDS))
    out = (f"TUNE-VERSION\nINFO noise\n0.32.0+cpu\nTUNE-HELP\n{HELP}\nTUNE-PY\n"
           f"TUNE-ENV {json.dumps(env)}\nTUNE-BACKENDS {backends}\n")  # fmt: skip
    facts = parse_probe("img: vllm", out)
    assert facts == EngineFacts("img: vllm", "0.32.0+cpu", REAL.flags, REAL.env, REAL.choices)
    with pytest.raises(TunerError, match="not a vLLM"):
        parse_probe("img: vllm", "TUNE-VERSION\n1\nTUNE-HELP\n  --foo\n")


def docker_space(tmp_path: Path) -> Path:
    space = json.loads(json.dumps(MINIMAL))
    space["engine"] = {"name": "vllm", "version": "0.32.0", "model": "m",
                       "command": ["vllm", "serve", "{model}"]}  # fmt: skip
    space["target"] = {"kind": "docker", "image": "engine:1"}
    path = tmp_path / "space.yaml"
    path.write_text(json.dumps(space))
    return path


def test_a_docker_target_is_checked_against_its_images_program(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[tuple[str, list[str]]] = []

    def facts(settings: Any, prefix: list[str]) -> EngineFacts:
        asked.append((settings.image, prefix))
        return REAL

    monkeypatch.setattr(launchers.launcher_class("docker"), "engine_facts", facts)
    path = docker_space(tmp_path)
    assert preflight.check_engine(load_space(path), path) == []
    assert asked == [("engine:1", ["vllm"])]  # the image's program, not one found here


def test_an_image_that_cannot_answer_says_why_and_what_was_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(settings: Any, prefix: list[str]) -> EngineFacts:
        raise FactsUnavailable("without devices, vllm in engine:1 exited with code 1: no NPU")

    monkeypatch.setattr(launchers.launcher_class("docker"), "engine_facts", refuse)
    path = docker_space(tmp_path)
    assert preflight.check_engine(load_space(path), path) == [
        "engine check not done: without devices, vllm in engine:1 exited with code 1: no NPU; "
        "not checked: the pinned version, flags, flag values and env variables"
    ]


def test_an_image_not_on_this_host_stops_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def missing(settings: Any, prefix: list[str]) -> EngineFacts:
        raise FactsUnavailable("docker image 'engine:1' is not on this host", fatal=True)

    monkeypatch.setattr(launchers.launcher_class("docker"), "engine_facts", missing)
    path = docker_space(tmp_path)
    with pytest.raises(SpaceError, match=r"engine\.command: docker image 'engine:1' is not on"):
        preflight.check_engine(load_space(path), path)
