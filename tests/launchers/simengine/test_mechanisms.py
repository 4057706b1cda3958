"""The backend effects come from the mechanisms the sources name, not only from matching figures.

Each test removes nothing itself: it fails when the mechanism it names is taken out of the
profile or the model (equal prefill rates, attention that does not grow with the context, a
cost per mixed step that a small chunk pays as a big one does, FLASH_ATTN's decode tiles in a
mixed batch, FlashInfer's MoE kernels no faster than the default ones, DeepGEMM MoE winning
over the FlashInfer env), or when a stall stops coming out of the scheduler.
"""

from __future__ import annotations

import numpy as np
import pytest
import yaml

from launchers.simengine import SimEngine
from launchers.simengine.model import StepWork
from launchers.simengine.profile import PROFILE_DIR, Profile, load_profile
from objectives.records import BenchRequest

H200 = ["-tp", "4", "--enable-expert-parallel", "--max-model-len", "196608"]
FI_ATTN = [*H200, "--attention-backend", "FLASHINFER"]
FI_MOE = {
    "VLLM_USE_FLASHINFER_MOE_FP8": "1",
    "VLLM_USE_FLASHINFER_MOE_FP16": "1",
    "VLLM_FLASHINFER_MOE_BACKEND": "throughput",
}
S3_BATCHING = ["--max-num-batched-tokens", "131072", "--long-prefill-token-threshold", "32768"]
CONFIGS = {  # the write-up's S0..S3 (domain.md section 5)
    "S0": (H200, {}),
    "S1": (FI_ATTN, FI_MOE),
    "S2": (FI_ATTN, FI_MOE | {"VLLM_USE_DEEP_GEMM": "1", "VLLM_MOE_USE_DEEP_GEMM": "0"}),
    "S3": (
        [*FI_ATTN, *S3_BATCHING, "--max-num-seqs", "40"],
        FI_MOE | {"VLLM_MOE_USE_DEEP_GEMM": "0"},
    ),
}
# The gap between FA3 and FlashInfer's FA3-template prefill on Hopper is a few percent
# (FA3 paper; FlashInfer 0.2 release): one long prompt's TTFT may differ no more than this.
KERNEL_GAP = 0.15
CHUNK = dict(n_pf=1, pf_tokens=8192, pf_pairs=8192 * 40_000 + 8192**2 / 2, pf_ctx=48_192)
ALONE = StepWork(**CHUNK)  # one request prefilling, nothing decoding
MIXED = StepWork(n_dec=20, ctx_dec=20 * 50_000, **CHUNK)  # the same chunk among 20 decodes
DECODE_20 = StepWork(n_dec=20, ctx_dec=20 * 50_000)


def engine(args: list[str], env: dict[str, str]) -> SimEngine:
    e = SimEngine.from_argv(args, env, "h200x4", 0)
    e.model.speed = 1.0  # compare configurations, not noise draws
    return e


def step(args: list[str], env: dict[str, str], work: StepWork) -> float:
    return engine(args, env).model.step_s(work)


def ttft_150k(args: list[str], env: dict[str, str]) -> float:
    (record,) = engine(args, env).run([BenchRequest("", 150_000, 2)], 1)
    return record.chunk_times[0] - record.send_time


def test_one_long_prompt_prefills_about_as_fast_on_either_attention_backend() -> None:
    flash_attn, flashinfer = ttft_150k(H200, {}), ttft_150k(FI_ATTN, {})
    assert max(flash_attn, flashinfer) / min(flash_attn, flashinfer) - 1 <= KERNEL_GAP


def test_one_long_prompt_ttft_is_about_the_same_in_s0_to_s3() -> None:
    # Bound by its context: neither the backends nor S3's bigger chunks move it much.
    ttft = [ttft_150k(*CONFIGS[c]) for c in ("S0", "S1", "S2", "S3")]
    assert max(ttft) / min(ttft) - 1 <= KERNEL_GAP


def test_flashinfer_moe_env_selects_its_kernels_over_the_default_deep_gemm() -> None:
    # vLLM's FP8 MoE oracle handles an explicit FlashInfer env before DeepGEMM's default.
    assert engine(*CONFIGS["S0"]).model.k.moe == "deep_gemm"
    assert engine(*CONFIGS["S1"]).model.k.moe == "flashinfer_cutlass"
    assert engine(*CONFIGS["S2"]).model.k.moe == "flashinfer_cutlass"


def test_s0_to_s1_needs_the_moe_switch_and_not_the_attention_switch_alone() -> None:
    s0, s1 = CONFIGS["S0"], CONFIGS["S1"]
    attention_only = step(FI_ATTN, {}, DECODE_20)
    assert step(*s1, DECODE_20) < attention_only * 0.96
    assert step(H200, FI_MOE, DECODE_20) < step(*s0, DECODE_20) * 0.96


def test_flashinfer_gains_on_a_mixed_batch_not_on_a_prefill_alone() -> None:
    # FLASH_ATTN runs one varlen kernel for a batch mixing decode rows and prefill; FlashInfer
    # splits it into its decode and prefill kernels. Alone, a chunk costs about the same.
    alone = step(H200, {}, ALONE) / step(FI_ATTN, {}, ALONE)
    assert abs(alone - 1) <= KERNEL_GAP
    assert step(H200, {}, MIXED) > step(FI_ATTN, {}, MIXED) * 1.3


def test_few_long_decodes_are_where_split_kv_scheduling_pays() -> None:
    one = StepWork(n_dec=1, ctx_dec=150_000)
    assert step(H200, {}, one) > step(FI_ATTN, {}, one) * 1.3
    assert step(H200, {}, DECODE_20) < step(FI_ATTN, {}, DECODE_20) * 1.15


@pytest.mark.parametrize("name", ["h200x4", "910c"])
def test_fitted_factors_are_listed_with_what_they_move(name: str) -> None:
    fitted = load_profile(name).fitted
    assert fitted and all(moves.strip() for moves in fitted.values())


def test_a_fitted_entry_must_name_a_factor_of_the_profile() -> None:
    data = yaml.safe_load((PROFILE_DIR / "h200x4.yaml").read_text())
    data["fitted"]["overheads.no_such_cost"] = "nothing"
    with pytest.raises(ValueError, match="no_such_cost"):
        Profile(name="h200x4", **data)


def chunk(tokens: int, context: int = 0) -> dict[str, float]:
    """A prefill chunk of ``tokens`` after ``context`` tokens already computed."""
    pairs = tokens * context + tokens * (tokens + 1) / 2
    return dict(n_pf=1, pf_tokens=tokens, pf_pairs=pairs, pf_ctx=context + tokens)


def test_a_big_chunk_stalls_its_decodes_as_long_as_it_takes_a_small_one_barely() -> None:
    decodes = dict(n_dec=20, ctx_dec=20 * 50_000)
    alone = step(FI_ATTN, {}, StepWork(**decodes))
    small = step(FI_ATTN, {}, StepWork(**decodes, **chunk(512, 20_000)))
    assert small < 2 * alone  # a 512-token chunk holds the decodes a few ms
    big = StepWork(**chunk(65_536, 20_000))
    for args in (FI_ATTN, H200):  # either backend: as long as the chunk takes by itself
        mixed = step(args, {}, StepWork(**decodes, **chunk(65_536, 20_000)))
        held = mixed - step(args, {}, StepWork(**decodes))
        assert step(args, {}, big) * 0.9 < held < step(args, {}, big) * 1.5
        assert mixed > 20 * alone


def test_prefill_grows_with_the_context_it_attends_to_and_with_its_tokens() -> None:
    short, long = (step(FI_ATTN, {}, StepWork(**chunk(8192, ctx))) for ctx in (0, 100_000))
    assert long > 3 * short  # attention over 100K more tokens of context
    assert step(FI_ATTN, {}, StepWork(**chunk(16_384))) > 1.8 * short  # twice the tokens


def test_flash_attn_pays_for_mixed_batches_with_its_decodes_context() -> None:
    def extra(ctx: int) -> float:
        work = StepWork(n_dec=20, ctx_dec=20 * ctx, **chunk(8192, 20_000))
        return step(H200, {}, work) - step(FI_ATTN, {}, work)

    # One varlen kernel computes each decode as a 128-row query tile against its context.
    assert extra(50_000) > 5 * extra(2_000) > 0


def test_a_stall_comes_out_of_scheduling_when_a_long_prompt_joins_a_decode() -> None:
    def longest_gap(cap: str) -> float:
        e = engine(
            [*FI_ATTN, "--max-num-batched-tokens", "65536"]
            + (["--long-prefill-token-threshold", cap] if cap else []),
            {},
        )
        # One request decodes while a 60K-token prompt arrives after its first tokens.
        decoding, joining = BenchRequest("", 2_000, 400), BenchRequest("", 60_000, 4)
        first, _ = e.run([decoding, joining], 2)
        return float(np.max(np.diff(first.chunk_times)))

    whole, capped = longest_gap(""), longest_gap("512")
    assert whole > 1.0  # the whole 60K prompt in one step: its decode waits seconds
    assert capped < whole / 20  # 512-token chunks: it waits a little, many times
