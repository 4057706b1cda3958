"""Start-up refusals where vLLM refuses, each with its log line and failure kind."""

from __future__ import annotations

import pytest

from launchers.simengine import EngineRefused, SimEngine
from tuner.errors import FailureKind

BASE = ["-tp", "4", "--enable-expert-parallel"]
ASCEND = ["-tp", "16", "--enable-expert-parallel"]
SUFFIX = '{"method": "suffix", "num_speculative_tokens": 3}'


def refuse(
    args: list[str],
    env: dict[str, str] | None = None,
    profile: str = "h200x4",
    version: str | None = "0.17.1",
) -> EngineRefused:
    with pytest.raises(EngineRefused) as info:
        SimEngine.from_argv(args, env or {}, profile, 0, version=version)
    return info.value


@pytest.mark.parametrize(
    ("args", "env", "profile", "line"),
    [
        (
            [*BASE, "--speculative-config", SUFFIX, "--async-scheduling"],
            {},
            "h200x4",
            "async scheduling is not supported with suffix decoding",
        ),
        ([*BASE, "--max-num-partial-prefills", "2"], {}, "h200x4", "Concurrent Partial Prefill"),
        ([*BASE, "--max-long-partial-prefills", "4"], {}, "h200x4", "Concurrent Partial Prefill"),
        (
            [*BASE, "--max-num-batched-tokens", "32", "--max-num-seqs", "64"],
            {},
            "h200x4",
            "max_num_batched_tokens (32) must be greater than or equal to max_num_seqs (64)",
        ),
        (
            [*ASCEND, "--attention-backend", "FLASHINFER"],
            {},
            "910c",
            "AttentionBackendEnum.FLASHINFER is not valid",
        ),
        ([*BASE, "--attention-backend", "ASCEND"], {}, "h200x4", "ASCEND is not valid"),
        ([*BASE], {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}, "910c", "FLASHINFER is not valid"),
        (
            [*BASE, "--moe-backend", "flashinfer_trtllm"],
            {},
            "h200x4",
            "'flashinfer_trtllm' is not supported on NVIDIA H200",
        ),
        (["-tp", "16"], {"VLLM_ASCEND_ENABLE_FUSED_MC2": "1"}, "910c", "requires expert parallel"),
        (
            [*ASCEND[:2], "--additional-config", '{"enable_fused_mc2": true}'],
            {},
            "910c",
            "requires expert parallel",
        ),
        (["-tp", "1"], {"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}, "910c", "needs TP > 1"),
        (["-tp", "8"], {}, "h200x4", "World size (8) is larger"),
        ([*BASE, "--no-enable-chunked-prefill"], {}, "h200x4", "is smaller than max_model_len"),
    ],
)
def test_refused_at_start_up(args: list[str], env: dict[str, str], profile: str, line: str) -> None:
    err = refuse(args, env, profile)
    assert line in str(err)
    assert err.kind is FailureKind.REFUSED and err.exit_code == 1


def test_unknown_flag_is_an_argparse_error() -> None:
    err = refuse([*BASE, "--not-a-vllm-flag", "3"])
    assert "unrecognized arguments: --not-a-vllm-flag" in str(err)
    assert err.exit_code == 2


def test_suffix_without_explicit_async_starts_with_async_off() -> None:
    engine = SimEngine.from_argv([*BASE, "--speculative-config", SUFFIX], {}, "h200x4", 0)
    assert not engine.cfg.knobs.async_scheduling
    assert any("Async scheduling is disabled" in line for line in engine.lines)


@pytest.mark.parametrize(
    ("args", "line"),
    [
        (["--gpu-memory-utilization", "0.4"], "out of memory"),  # weights do not fit
        (  # the activations of a big token budget eat what the weights left
            ["--gpu-memory-utilization", "0.47", "--max-num-batched-tokens", "131072"],
            "No available memory for the cache blocks",
        ),
        (["--gpu-memory-utilization", "0.52"], "estimated maximum model length"),
        (["-tp", "2"], "estimated maximum model length"),  # 115 GB of weights per GPU
    ],
)
def test_out_of_memory_at_start_up(args: list[str], line: str) -> None:
    err = refuse(["-tp", "4", "--enable-expert-parallel", *args])
    assert line in str(err)
    assert err.kind is FailureKind.OOM


def test_common_flags_are_accepted() -> None:
    args = [
        "MiniMaxAI/MiniMax-M2.5",
        *BASE,
        "--max-model-len",
        "192k",
        "--served-model-name",
        "m",
        "--port",
        "8001",
        "--host",
        "0.0.0.0",
        "--trust-remote-code",
        "--kv-cache-dtype",
        "fp8",
        "--no-enable-prefix-caching",
        "--block-size",
        "32",
        "--load-format",
        "fastsafetensors",
        "--quantization",
        "fp8",
        "--compilation-config",
        '{"level": 3}',
        "--max-num-batched-tokens",
        "32768",
        "--long-prefill-token-threshold",
        "8192",
        "--max-num-seqs",
        "64",
        "--no-async-scheduling",
        "--gpu-memory-utilization",
        "0.92",
        "--enable-chunked-prefill",
    ]
    engine = SimEngine.from_argv(args, {}, "h200x4", 0)
    cfg = engine.cfg
    assert cfg.max_model_len == 196608 and cfg.served_name == "m" and cfg.block_size == 32
    assert not cfg.enable_prefix_caching and cfg.fast_load and not cfg.knobs.async_scheduling
    assert cfg.knobs.kv_bytes_per_token == 253952 // 2


@pytest.mark.parametrize(
    ("flag", "lacking", "having"),
    [("--moe-backend", "0.16.2", "0.17"), ("--attention-backend", "0.11.0", "0.11.1")],
)
def test_a_flag_the_release_lacks_is_refused_as_its_parser_would(
    flag: str, lacking: str, having: str
) -> None:
    value = {"--moe-backend": "triton", "--attention-backend": "FLASHINFER"}[flag]
    err = refuse([*BASE, flag, value], version=lacking)
    assert f"unrecognized arguments: {flag} (vLLM {lacking})" in str(err)
    assert err.exit_code == 2
    engine = SimEngine.from_argv([*BASE, flag, value], {}, "h200x4", 0, version=having)
    assert engine.lines[0].startswith(f"vLLM API server version {having} ")


def test_without_a_release_it_is_the_one_its_profile_imitates() -> None:
    engine = SimEngine.from_argv(BASE, {}, "h200x4", 0)
    assert engine.lines[0].startswith("vLLM API server version 0.14 ")
    assert "unrecognized arguments: --moe-backend" in str(
        refuse([*BASE, "--moe-backend", "triton"], version=None)
    )
