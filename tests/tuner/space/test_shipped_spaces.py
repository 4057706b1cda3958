"""Every shipped space loads, and sets the limits a serving engineer would set by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from launchers.simengine.profile import load_profile
from tuner.space import load_space
from tuner.space.sample import violated_rules

SPACES = sorted((Path(__file__).resolve().parents[3] / "search_spaces").glob("*.yaml"))
TTFT = {"p99_ttft_ms", "median_ttft_ms", "mean_ttft_ms", "p90_ttft_ms", "ttft"}


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.stem)
def test_every_tier_has_a_ttft_limit(path: Path) -> None:
    """Without one, a config could win a tier by keeping users waiting for their first token
    (or, holding users back, could not win it at all)."""
    space = load_space(path)
    bare = [
        t
        for t in space.workload.tiers
        if not any(s.metric in TTFT and s.max is not None and s.applies_to(t) for s in space.slos)
    ]
    assert not bare, f"{path.name}: tiers without a TTFT limit: {bare}"


SMOOTH = {"max_itl_ms", "p99.9_itl_ms", "p99_itl_ms"}


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.stem)
def test_every_tier_bounds_the_streams_smoothness(path: Path) -> None:
    """Without one, a config could win P99 TPOT with prefill steps that stall every stream for
    seconds (large chunks), a stall a TPOT averages over the answer."""
    space = load_space(path)
    bare = [
        t
        for t in space.workload.tiers
        if not any(s.metric in SMOOTH and s.max is not None and s.applies_to(t) for s in space.slos)
    ]
    assert not bare, f"{path.name}: tiers without a limit on the longest gap or P99 ITL: {bare}"


def test_the_910c_space_is_the_note() -> None:
    space = load_space(ROOT / "minimax_910c.yaml")
    env, args = space.base.env, space.base.args
    assert env["HCCL_BUFFSIZE"] == "2048" and "libjemalloc" in env["LD_PRELOAD"]
    spec = args["speculative-config"]
    assert (
        spec["suffix_decoding_max_cached_requests"],
        spec["suffix_decoding_max_tree_depth"],
    ) == (
        2000,
        32,
    )
    assert (spec["suffix_decoding_min_token_prob"], spec["suffix_decoding_max_spec_factor"]) == (
        0.4,
        3,
    )
    assert args["additional-config"] == {
        "enable_weight_nz_layout": True,
        "multistream_overlap_shared_expert": True,
    }
    assert args["tool-call-parser"] == "minimax_m2"
    assert args["reasoning-parser"] == "minimax_m2_append_think"
    assert space.workload.endpoint == "chat"


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.stem)
def test_a_pick_must_keep_most_of_the_tiers_throughput(path: Path) -> None:
    assert load_space(path).study.throughput_floor >= 0.5


ROOT = SPACES[0].parent
# The spaces for real accelerators, whose simulated profiles hold their release's defaults.
VLLM = [ROOT / "minimax_h200.yaml", ROOT / "minimax_910c.yaml"]
# Flags whose default vLLM derives from the device (arg_utils' batch defaults, memory).
DEVICE_DEFAULTS = {
    "--max-num-seqs": "max_num_seqs",
    "--max-num-batched-tokens": "max_num_batched_tokens",
    "--gpu-memory-utilization": "gpu_memory_utilization",
}


def _by_flag(path: Path) -> dict[str, Any]:
    return {p.flag: p for p in load_space(path).parameters.values() if p.flag}


@pytest.mark.parametrize("path", VLLM, ids=lambda p: p.stem)
def test_the_baseline_is_the_engine_default_for_that_hardware(path: Path) -> None:
    """The simulated profile holds the release's defaults for its device (1024 seqs and 8K
    tokens on a >= 70 GB GPU, 256 and 2K below): each such knob's default is that value and
    is not rendered, so the baseline is the engine as its users start it."""
    space = load_space(path)
    assert space.sim is not None
    profile = load_profile(space.sim["profile"]).defaults
    params = _by_flag(path)
    for flag, field in DEVICE_DEFAULTS.items():
        p = params[flag]
        assert p.default == getattr(profile, field), f"{path.name}: {flag}"
        assert p.unset == p.default, f"{path.name}: {flag} is rendered in the baseline"


@pytest.mark.parametrize("path", VLLM, ids=lambda p: p.stem)
def test_the_token_budget_is_a_ladder(path: Path) -> None:
    """Each new budget is a compile-cache key: a log-scale integer is a cold compile a trial."""
    p = _by_flag(path)["--max-num-batched-tokens"]
    assert p.type == "categorical" and p.choices and len(p.choices) <= 8


def _violated(path: Path, **values: Any) -> list[str]:
    space = load_space(path)
    return violated_rules(space, {**space.defaults(), **values})


def test_contradictory_deep_gemm_pairs_are_rules() -> None:
    h200 = ROOT / "minimax_h200.yaml"
    assert _violated(h200, moe_backend="deep_gemm", deep_gemm_dense="0")
    assert _violated(h200, moe_backend="deep_gemm", deep_gemm_moe="0")
    assert _violated(h200, deep_gemm_dense="0", deep_gemm_moe="1")
    assert not _violated(h200, moe_backend="deep_gemm")
    assert not _violated(h200, deep_gemm_dense="1", deep_gemm_moe="0")  # dense on, MoE off


def test_h200_tunes_memory_kv_precision_and_graphs() -> None:
    space = load_space(ROOT / "minimax_h200.yaml")
    assert "fp8" in (space.parameters["kv_cache_dtype"].choices or [])
    assert space.parameters["gpu_memory_utilization"].flag == "--gpu-memory-utilization"
    graphs = space.parameters["cudagraph_mode"]
    assert graphs.json_key is not None and graphs.json_key.flag == "--compilation-config"
    assert "gpu-memory-utilization" not in space.base.args  # a knob, not a fixed setting


def test_910c_follows_its_tuning_note() -> None:
    path = ROOT / "minimax_910c.yaml"
    space = load_space(path)
    assert space.engine.model == "Eco-Tech/MiniMax-M2.5-w8a8-QuaRot"
    assert space.base.args["quantization"] == "ascend"
    target = space.target.model_extra or {}
    assert space.engine.image and space.engine.image.endswith("v0.14.0rc1-a3")
    assert target["image"] == space.engine.image
    assert target["entrypoint"] == "image"  # the image's entrypoint sources CANN's env
    assert space.base.env["PYTORCH_NPU_ALLOC_CONF"] == "expandable_segments:True"
    assert int(space.base.env["HCCL_BUFFSIZE"]) >= 512  # fused MC2's buffer
    assert space.base.args["block-size"] == 128
    assert space.base.args["compilation-config"] == {"cudagraph_mode": "PIECEWISE"}
    spec = space.base.args["speculative-config"]
    assert spec["method"] == "suffix" and "suffix_decoding_max_tree_depth" in spec
    binding = space.parameters["cpu_binding"].json_key
    assert binding is not None and binding.key == "enable_cpu_binding"
    # Async scheduling is a knob, refused together with suffix decoding.
    assert _violated(path, async_scheduling="on", num_speculative_tokens=3)
    assert not _violated(path, async_scheduling="on")
    assert not _violated(path, num_speculative_tokens=3)
