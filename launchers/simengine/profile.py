"""Hardware profiles of the simulated engine, loaded from ``profiles/<name>.yaml``.

A profile is data, not code: the accelerator's datasheet figures (HBM bandwidth and size,
dense FLOP/s, interconnect), the served model's shape (domain.md section 1), the engine
defaults of the vLLM release it imitates, and the per-knob efficiency factors the step-time
model (``model.py``) multiplies in. Each YAML file says where its numbers come from.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict, Field, model_validator

PROFILE_DIR = Path(__file__).parent / "profiles"
# The settings a profile's ``answers`` section may name (``SimConfig.answer_settings``).
ANSWER_SETTINGS = ("kv_cache_dtype", "attention", "moe", "deep_gemm", "spec_method")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Hardware(_Strict):
    """One node's accelerators (per-device figures) and the links between them."""

    platform: str = Field(
        description="cuda, ascend or cpu: decides which backends exist and how the KV cache "
        "is sized (on cpu: VLLM_CPU_KVCACHE_SPACE GiB)"
    )
    accelerator: str = Field(description="Device name as the engine logs it")
    devices: int = Field(description="Devices the engine spans (tensor parallel size)")
    hbm_gb: float = Field(description="HBM per device, GB (1e9 bytes)")
    hbm_tbs: float = Field(description="Peak HBM bandwidth per device, TB/s")
    tflops_8bit: float = Field(description="Dense FP8/INT8 TFLOP/s per device")
    tflops_16bit: float = Field(description="Dense BF16 TFLOP/s per device")
    link_gbs: float = Field(description="Collective bus bandwidth per device, GB/s")
    collective_us: float = Field(description="Latency of one small collective, microseconds")


class ModelShape(_Strict):
    """The served model's architecture (what decides bytes moved and FLOPs per token)."""

    name: str = Field(description="Model id the server reports")
    layers: int = Field(description="Transformer layers")
    hidden: int = Field(description="Hidden size")
    q_heads: int = Field(description="Query heads")
    kv_heads: int = Field(description="KV heads")
    head_dim: int = Field(description="Head dimension")
    experts: int = Field(description="Routed experts per layer")
    top_k: int = Field(description="Experts per token")
    expert_ffn: int = Field(description="Expert intermediate size")
    vocab: int = Field(description="Vocabulary size")
    max_model_len: int = Field(description="Longest context the model supports")
    weight_bytes: float = Field(description="Bytes per weight as served (1 for FP8/W8A8)")
    total_params_b: float = Field(description="Total parameters, billions (weights in HBM)")
    output_repeat: float = Field(
        0.0,
        ge=0.0,
        le=1.0,
        description="Share of its own output the model repeats from what it generated before: "
        "what a context-lookup drafter finds whatever the prompt (1: loops on one token)",
    )


class Memory(_Strict):
    """What besides weights and KV takes HBM (per device)."""

    runtime_gb: float = Field(description="CUDA/CANN context, graphs, allocator slack, GB")
    activation_kb_per_token: float = Field(
        description="Peak activation bytes per batched token (KB): grows with the token budget"
    )
    kv_bytes_per_token_16bit: int = Field(description="KV bytes per token, all layers, BF16")
    headroom_gb: float = Field(
        description="Memory outside the engine's budget that peaks under load (NCCL/HCCL "
        "buffers, workspaces, fragmentation): less than this left by gpu-memory-utilization "
        "means out-of-memory under load"
    )


class AttentionBackend(_Strict):
    """Efficiency of one attention backend on this hardware."""

    prefill_eff: float = Field(description="Fraction of 16-bit peak reached by prefill attention")
    decode_eff: float = Field(description="Fraction of HBM bandwidth reached reading KV")
    decode_half_seqs: float = Field(
        description="Decode sequences at which KV reads reach half of decode_eff (split-KV "
        "occupancy: few long sequences leave compute units idle)"
    )
    varlen_decode_rows: float = Field(
        0.0,
        ge=0.0,
        description="In a step that also holds prefill, the query rows per head one decoding "
        "sequence costs in the backend's one varlen kernel for the whole batch (its query "
        "tile, computed against the sequence's whole context without split-KV); 0: the "
        "backend serves decode rows with its decode kernel in every step",
    )
    varlen_decode_eff: float = Field(
        1.0,
        gt=0.0,
        le=1.0,
        description="Fraction of 16-bit peak those decode tiles reach (one tile streams a "
        "whole context through the paged KV cache)",
    )


class MoeBackend(_Strict):
    """Efficiency of one fused-MoE implementation."""

    gemm_eff: float = Field(description="Fraction of 8-bit peak at large per-expert batches")
    half_rows: float = Field(description="Rows per expert at which half of gemm_eff is reached")
    bw_eff: float = Field(description="Fraction of HBM bandwidth reached streaming expert weights")
    layer_us: float = Field(description="Fixed cost per layer (routing, permute, launches), us")
    fails_above_tokens: int = Field(
        0, description="A step with more batched tokens crashes the engine (0: never)"
    )
    fail_log: str = Field("", description="The line the engine prints when it crashes")


class SpecMethod(_Strict):
    """A speculative decoding method."""

    acceptance: float = Field(description="Probability each successive draft token is accepted")
    draft_ms_per_token: float = Field(description="Drafting cost per draft token per step, ms")
    draft_on_device: bool = Field(description="Draft runs on the accelerator (else on the CPU)")


class Overheads(_Strict):
    """Per-step costs that are not kernels' roofline time."""

    layer_us: float = Field(description="Non-GEMM kernels per layer per step (norms, rope, router)")
    decode_graph_ms: float = Field(description="Launch cost of a decode-only step (graph replay)")
    mixed_step_ms: float = Field(
        description="Launch cost of a step holding prefill tokens, whatever their number (it "
        "runs attention outside the full decode graph), ms"
    )
    sched_ms: float = Field(description="CPU scheduling + input prep per step, ms")
    sched_us_per_seq: float = Field(description="CPU cost per scheduled sequence, us")
    host_launch_ms: float = Field(0.0, description="Host op-dispatch cost per step (Ascend eager)")
    eager_attn_us: float = Field(
        0.0, description="Per layer: launching the attention kernels outside a graph, us"
    )
    eager_rest_us: float = Field(
        0.0, description="Per layer: launching the other kernels outside a graph, us"
    )
    eager_token_us: float = Field(
        0.0,
        ge=0.0,
        description="Per layer and batched token, without compilation: the ops a compiled "
        "graph fuses, each reading and writing the step's activations on its own, us",
    )
    dense_half_rows: float = Field(description="Batch rows at which dense GEMMs reach half peak")
    dense_eff: float = Field(description="Dense GEMM fraction of 8-bit peak (default kernels)")
    deep_gemm_dense_eff: float = Field(description="Dense GEMM fraction of peak with DeepGEMM")
    step_jitter: float = Field(description="Lognormal sigma of per-step time noise")
    run_jitter: float = Field(description="Lognormal sigma of a per-launch speed factor")
    load_s: float = Field(description="Weight loading time at start-up, seconds")
    fast_load_s: float = Field(description="Weight loading with --load-format fastsafetensors")
    compile_s: float = Field(description="Compile + graph capture at start-up, seconds")
    compile_cached_s: float | None = Field(
        None,
        description="compile_s when the compile cache holds the launch's graphs (None: no "
        "saving modelled)",
    )


class Defaults(_Strict):
    """Engine defaults of the vLLM release this profile imitates."""

    vllm_version: str = Field(description="Release whose behaviour is modelled")
    attention_backend: str = Field(description="Backend picked when none is asked for")
    moe_backend: str = Field(
        description="MoE kernels --moe-backend auto picks when neither DeepGEMM MoE nor the "
        "FlashInfer MoE env selects one"
    )
    max_num_batched_tokens: int = Field(description="Token budget when the flag is absent")
    max_num_seqs: int = Field(description="Max running sequences when the flag is absent")
    block_size: int = Field(description="KV block size in tokens")
    gpu_memory_utilization: float = Field(description="Default memory fraction")
    async_scheduling: bool = Field(description="Async scheduling on when no flag says otherwise")
    cudagraph_mode: str = Field(
        "FULL_AND_PIECEWISE", description="compilation-config cudagraph_mode when not given"
    )
    task_queue: int = Field(0, description="TASK_QUEUE_ENABLE when unset (Ascend)")
    hccl_buffsize_mb: int = Field(0, description="HCCL_BUFFSIZE when unset (Ascend)")


class Ascend(_Strict):
    """Factors of the vllm-ascend knobs (all 1.0 / 0 on CUDA)."""

    aiv_collective_factor: float = Field(1.0, description="Collective latency with HCCL AIV")
    flashcomm1_comm_factor: float = Field(1.0, description="Collective bytes with FlashComm1")
    mc2_moe_comm_factor: float = Field(1.0, description="MoE comm left exposed with fused MC2")
    fused_ops_factor: float = Field(1.0, description="Non-GEMM op cost with fused MC2 kernels")
    task_queue_launch_factor: list[float] = Field(
        [1.0, 1.0, 1.0], description="Host launch cost for TASK_QUEUE_ENABLE 0, 1, 2"
    )
    task_queue2_extra_gb: float = Field(0.0, description="Extra peak memory of task queue 2")
    mc2_min_buffsize_mb: int = Field(0, description="HCCL_BUFFSIZE fused MC2 needs")
    cpu_binding_launch_factor: float = Field(
        1.0,
        description="Host launch cost with additional-config enable_cpu_binding (each rank's "
        "threads pinned to cores near its NPU)",
    )


class AnswerChange(_Strict):
    """How often one setting changes a greedy answer, and on what grounds."""

    changed: float = Field(
        ge=0.0,
        le=1.0,
        description="Share of greedy answers (16 tokens) this setting changes against the "
        "engine's defaults",
    )
    source: str = Field(
        min_length=1,
        description="Where the share comes from (a measurement, a paper), or 'assumed: ' and why",
    )


class Profile(_Strict):
    """One simulated deployment: hardware + model + engine release + knob factors."""

    name: str = Field(description="Profile name (file stem)")
    description: str = Field(description="What this profile stands for and its sources")
    hardware: Hardware
    model: ModelShape
    memory: Memory
    defaults: Defaults
    overheads: Overheads
    attention_backends: dict[str, AttentionBackend]
    moe_backends: dict[str, MoeBackend]
    speculative: dict[str, SpecMethod]
    ascend: Ascend = Ascend()
    answers: dict[str, dict[str, AnswerChange]] = Field(
        default_factory=dict,
        description="Per setting (kv_cache_dtype, attention, moe, deep_gemm, spec_method) and "
        "value, how often it changes a greedy answer; a value not listed changes none",
    )
    fitted: dict[str, str] = Field(
        default_factory=dict,
        description="Factors set only to make a published figure match, by dotted path "
        "(attention_backends.FLASH_ATTN.varlen_decode_eff), each with the figures it moves; every "
        "other factor names its source in the YAML",
    )

    @model_validator(mode="after")
    def _answer_settings_known(self) -> Profile:
        # A misspelled setting would silently change no answer.
        for name in self.answers:
            if name not in ANSWER_SETTINGS:
                known = ", ".join(ANSWER_SETTINGS)
                raise ValueError(f"answers.{name}: not a setting the engine reads ({known})")
        return self

    @model_validator(mode="after")
    def _fitted_paths_exist(self) -> Profile:
        # A renamed or removed factor must not leave a stale entry behind.
        for path in self.fitted:
            factor_value(self, path)
        return self


def factor_value(profile: Profile, path: str) -> object:
    """The value at a dotted path of the profile (``overheads.mixed_step_ms``)."""
    node: object = profile
    for part in path.split("."):
        node = node.get(part) if isinstance(node, dict) else getattr(node, part, None)
        if node is None:
            raise ValueError(f"fitted factor {path!r} is not a field of the profile")
    return node


def profile_names() -> list[str]:
    return sorted(p.stem for p in PROFILE_DIR.glob("*.yaml"))


@cache
def load_profile(name: str) -> Profile:
    """The profile ``name``; an unknown name lists the valid ones."""
    path = PROFILE_DIR / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown sim profile {name!r}; valid: {', '.join(profile_names())}")
    data = yaml.safe_load(path.read_text())
    return Profile(name=name, **data)
