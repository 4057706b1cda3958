"""Every knob the spaces render moves the step time the way it does on the hardware."""

from __future__ import annotations

import pytest

from launchers.simengine import SimEngine
from launchers.simengine.model import StepWork

H200 = ["-tp", "4", "--enable-expert-parallel"]
A3 = ["-tp", "16", "--enable-expert-parallel"]
RELEASE = {"h200x4": "0.17.1", "910c": "0.14"}
DECODE_1 = StepWork(n_dec=1, ctx_dec=150_000)
DECODE_20 = StepWork(n_dec=20, ctx_dec=20 * 50_000)
PREFILL = StepWork(
    n_dec=20,
    ctx_dec=20 * 50_000,
    n_pf=1,
    pf_tokens=8192,
    pf_pairs=8192 * 40_000 + 8192**2 / 2,
    pf_ctx=48_192,
)
GEMM_HEAVY = StepWork(n_pf=1, pf_tokens=32_768, pf_pairs=32_768**2 / 2, pf_ctx=32_768)


def step(args: list[str], env: dict[str, str], work: StepWork, profile: str = "h200x4") -> float:
    # A release that parses every flag these tests set (--moe-backend came in 0.17).
    engine = SimEngine.from_argv(args, env, profile, 0, version=RELEASE[profile])
    engine.model.speed = 1.0  # compare configurations, not noise draws
    return engine.model.step_s(work)


@pytest.mark.parametrize(
    ("slow", "fast", "work"),
    [  # (args, env) of the slower and the faster configuration
        ((H200, {}), ([*H200, "--attention-backend", "FLASHINFER"], {}), DECODE_1),
        ((H200, {}), (H200, {"VLLM_ATTENTION_BACKEND": "FLASHINFER"}), PREFILL),
        (([*H200, "--attention-backend", "TRITON_ATTN"], {}), (H200, {}), DECODE_20),
        ((H200, {"VLLM_USE_DEEP_GEMM": "0"}), (H200, {}), GEMM_HEAVY),
        (
            ([*H200, "--moe-backend", "marlin"], {}),
            ([*H200, "--moe-backend", "cutlass"], {}),
            PREFILL,
        ),
        (
            (H200, {}),
            (
                H200,
                {
                    "VLLM_MOE_USE_DEEP_GEMM": "0",
                    "VLLM_USE_FLASHINFER_MOE_FP8": "1",
                    "VLLM_FLASHINFER_MOE_BACKEND": "throughput",
                },
            ),
            DECODE_20,
        ),
        (([*H200, "--no-async-scheduling"], {}), (H200, {}), DECODE_20),
        ((H200, {}), ([*H200, "--kv-cache-dtype", "fp8"], {}), DECODE_20),
        ((["-tp", "4"], {}), (H200, {}), GEMM_HEAVY),  # TP-sharded experts vs expert parallel
    ],
)
def test_h200_knobs(slow: tuple, fast: tuple, work: StepWork) -> None:
    assert step(*slow, work) > step(*fast, work) * 1.005


@pytest.mark.parametrize(
    ("env", "work"),
    [
        ({"HCCL_OP_EXPANSION_MODE": "AIV"}, DECODE_20),
        ({"VLLM_ASCEND_ENABLE_FUSED_MC2": "2"}, DECODE_20),
        ({"VLLM_ASCEND_ENABLE_FLASHCOMM1": "1"}, GEMM_HEAVY),  # a prefill-side optimisation
        ({"TASK_QUEUE_ENABLE": "2"}, DECODE_1),  # host-bound when the device work is small
    ],
)
def test_ascend_knobs_speed_up(env: dict[str, str], work: StepWork) -> None:
    assert step(A3, env, work, "910c") < step(A3, {}, work, "910c") * 0.99


def test_task_queue_off_is_slower_than_default() -> None:
    assert step(A3, {"TASK_QUEUE_ENABLE": "0"}, DECODE_1, "910c") > step(A3, {}, DECODE_1, "910c")


def test_speculative_decoding_costs_more_per_step_but_yields_more_tokens() -> None:
    spec = '{"method": "eagle3", "num_speculative_tokens": 3}'
    plain = step(H200, {}, DECODE_20)
    with_spec = SimEngine.from_argv([*H200, "--speculative-config", spec], {}, "h200x4", 0)
    with_spec.model.speed = 1.0
    t = with_spec.model.step_s(DECODE_20)
    alpha = with_spec.model.acceptance()
    tokens = 1 + alpha + alpha**2 + alpha**3
    assert plain < t < plain * tokens


def test_fast_loading_shortens_start_up_only() -> None:
    slow = SimEngine.from_argv(H200, {}, "h200x4", 0)
    fast = SimEngine.from_argv([*H200, "--load-format", "fastsafetensors"], {}, "h200x4", 0)
    assert fast.startup_s < slow.startup_s - 30
    fast.model.speed = slow.model.speed = 1.0
    assert fast.model.step_s(DECODE_20) == slow.model.step_s(DECODE_20)


def test_bigger_token_budget_shrinks_the_kv_pool() -> None:
    small = SimEngine.from_argv(H200, {}, "h200x4", 0).memory.kv_tokens
    big = SimEngine.from_argv([*H200, "--max-num-batched-tokens", "131072"], {}, "h200x4", 0)
    assert big.memory.kv_tokens < small
    more = SimEngine.from_argv([*H200, "--gpu-memory-utilization", "0.95"], {}, "h200x4", 0)
    assert more.memory.kv_tokens > small


def _graphs(mode: str, *more: str) -> list[str]:
    return [*H200, "--compilation-config", f'{{"cudagraph_mode": "{mode}"}}', *more]


def test_cudagraph_modes_cost_launches_where_they_leave_kernels_eager() -> None:
    default = step(H200, {}, DECODE_20)
    assert step(_graphs("FULL_AND_PIECEWISE"), {}, DECODE_20) == default
    piecewise = step(_graphs("PIECEWISE"), {}, DECODE_20)  # attention outside the graph
    assert piecewise > default
    assert step(_graphs("NONE"), {}, DECODE_20) > piecewise
    assert step([*H200, "--enforce-eager"], {}, DECODE_20) == step(_graphs("NONE"), {}, DECODE_20)
    # FULL_DECODE_ONLY replays decode steps whole but runs mixed steps without any graph.
    assert step(_graphs("FULL_DECODE_ONLY"), {}, DECODE_20) == default
    assert step(_graphs("FULL_DECODE_ONLY"), {}, PREFILL) > step(H200, {}, PREFILL)


def test_a_decode_batch_above_the_largest_captured_size_runs_piecewise() -> None:
    small = ["--compilation-config", '{"max_cudagraph_capture_size": 16}']
    assert step([*H200, *small], {}, DECODE_20) > step(H200, {}, DECODE_20)
    assert step([*H200, *small], {}, DECODE_1) == step(H200, {}, DECODE_1)


def test_an_unknown_cudagraph_mode_is_refused_at_start_up() -> None:
    with pytest.raises(Exception, match="cudagraph_mode"):
        step(_graphs("SOMETIMES"), {}, DECODE_1)


def test_cpu_binding_shortens_a_host_bound_ascend_step() -> None:
    binding = [*A3, "--additional-config", '{"enable_cpu_binding": true}']
    assert step(binding, {}, DECODE_1, "910c") < step(A3, {}, DECODE_1, "910c") * 0.99
