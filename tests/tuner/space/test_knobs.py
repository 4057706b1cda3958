"""Versioned knobs render to the form the pinned version reads; ignored forms are refused."""

from __future__ import annotations

import pytest

from tuner.errors import SpaceError
from tuner.space import load_space, render_engine_config
from tuner.space.knobs import parse_version


def with_knob(space_dict, knob: str, choices: list[str], default: str) -> None:
    space_dict["parameters"][knob] = {
        "type": "categorical",
        "choices": choices,
        "default": default,
        "knob": knob,
    }


def test_parse_version() -> None:
    assert parse_version("0.14.1") == (0, 14, 1)
    assert parse_version("0.11.1rc2+cu129") == (0, 11, 1)
    with pytest.raises(ValueError):
        parse_version("latest")


@pytest.mark.parametrize(
    ("version", "args", "env"),
    [
        ("0.17.1", ["--attention-backend", "FLASHINFER"], {}),
        ("0.10.2", [], {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}),
    ],
)
def test_attention_backend_form(space_dict, write_space, version, args, env) -> None:
    space_dict["engine"]["version"] = version
    with_knob(space_dict, "attention_backend", ["FLASH_ATTN", "FLASHINFER"], "FLASH_ATTN")
    cfg = render_engine_config(
        load_space(write_space(space_dict)), {"attention_backend": "FLASHINFER"}
    )
    joined = " ".join(cfg.args)
    assert " ".join(args) in joined
    for key, value in env.items():
        assert cfg.env[key] == value
    if not env:
        assert "VLLM_ATTENTION_BACKEND" not in cfg.env


def test_moe_backend_old_env_form(space_dict, write_space) -> None:
    space_dict["engine"]["version"] = "0.14.0"
    with_knob(space_dict, "moe_backend", ["auto", "flashinfer_cutlass"], "auto")
    space_dict["parameters"]["moe_backend"]["unset"] = "auto"
    space = load_space(write_space(space_dict))
    cfg = render_engine_config(space, {"moe_backend": "flashinfer_cutlass"})
    assert "--moe-backend" not in cfg.args
    assert cfg.env["VLLM_FLASHINFER_MOE_BACKEND"] == "throughput"
    assert cfg.env["VLLM_USE_FLASHINFER_MOE_FP8"] == "1"
    assert "VLLM_FLASHINFER_MOE_BACKEND" not in render_engine_config(space, {}).env


def test_moe_backend_value_old_version_cannot_express(space_dict, write_space) -> None:
    space_dict["engine"]["version"] = "0.14.0"
    with_knob(space_dict, "moe_backend", ["auto", "deep_gemm"], "auto")
    with pytest.raises(SpaceError, match=r"cannot express moe_backend value.*deep_gemm"):
        load_space(write_space(space_dict))


def test_env_the_version_ignores_is_refused(space_dict, write_space) -> None:
    space_dict["engine"]["version"] = "0.26.0"
    space_dict["parameters"]["attn"] = {
        "type": "categorical",
        "choices": ["FLASH_ATTN"],
        "default": "FLASH_ATTN",
        "env": "VLLM_ATTENTION_BACKEND",
    }
    with pytest.raises(SpaceError, match="ignores env VLLM_ATTENTION_BACKEND"):
        load_space(write_space(space_dict))


def test_base_env_ignored_on_ascend(space_dict, write_space) -> None:
    space_dict["engine"]["name"] = "vllm-ascend"
    space_dict["base"]["env"] = {"VLLM_ASCEND_ENABLE_TOPK_OPTIMIZE": "1"}
    with pytest.raises(SpaceError, match=r"base\.env\.VLLM_ASCEND_ENABLE_TOPK_OPTIMIZE"):
        load_space(write_space(space_dict))


def test_unknown_knob(space_dict, write_space) -> None:
    with_knob(space_dict, "turbo_mode", ["on"], "on")
    with pytest.raises(SpaceError, match="unknown knob 'turbo_mode'"):
        load_space(write_space(space_dict))


@pytest.mark.parametrize(("version", "refused"), [("0.11.0", False), ("0.17.1", True)])
def test_vllm_use_v1_is_refused_where_vllm_dropped_it(
    space_dict, write_space, version: str, refused: bool
) -> None:
    space_dict["engine"]["version"] = version
    space_dict["base"]["env"] = {"VLLM_USE_V1": "1"}
    if not refused:
        load_space(write_space(space_dict))
        return
    with pytest.raises(SpaceError, match=r"base\.env\.VLLM_USE_V1: .*V1 is the only engine"):
        load_space(write_space(space_dict))
