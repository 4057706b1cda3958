"""From ``vllm serve`` flags + env to the simulated engine's configuration.

Every start-up refusal vLLM makes for these knobs lives here, each raising ``EngineRefused``
with the line vLLM prints: unknown flags (argparse, exit 2), ``--max-num-partial-prefills``
other than 1, a token budget below ``max_num_seqs`` (or below ``max_model_len`` with chunked
prefill off), a backend the hardware does not have, suffix speculative decoding with an
explicit ``--async-scheduling``, fused MC2 without expert parallel, FlashComm1 without tensor
parallel. Memory refusals (weights do not fit, empty or too small KV pool) are in ``memory.py``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from launchers.simengine.args import Env, non_default_args, parse_serve_args
from launchers.simengine.errors import EngineRefused
from launchers.simengine.model import Knobs
from launchers.simengine.profile import Profile
from tuner.errors import FailureKind

KNOWN_ATTENTION = {
    "FLASH_ATTN",
    "FLASHINFER",
    "TRITON_ATTN",
    "FLEX_ATTENTION",
    "TREE_ATTN",
    "FLASHMLA",
    "CUTLASS_MLA",
    "FLASH_ATTN_MLA",
    "TRITON_MLA",
    "ROCM_ATTN",
    "ROCM_AITER_FA",
    "TORCH_SDPA",
    "XFORMERS",
    "ASCEND",
    "CPU_ATTN",
}
KNOWN_MOE = {
    "auto",
    "triton",
    "deep_gemm",
    "cutlass",
    "flashinfer_cutlass",
    "flashinfer_trtllm",
    "marlin",
    "ascend",
}
FLASHINFER_MOE_ENV = {"throughput": "flashinfer_cutlass", "latency": "flashinfer_trtllm"}


@dataclass(frozen=True)
class SimConfig:
    """Everything the simulated engine needs from one launch's flags and env."""

    model: str
    served_name: str
    port: int
    host: str
    tp: int
    expert_parallel: bool
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int
    long_prefill_token_threshold: int
    enable_prefix_caching: bool
    block_size: int
    gpu_memory_utilization: float
    fast_load: bool
    knobs: Knobs
    hccl_buffsize_mb: int
    kv_space_gib: float | None  # VLLM_CPU_KVCACHE_SPACE on a cpu profile (None: unset)
    notes: tuple[str, ...]  # warnings vLLM would log at start-up
    version: str  # the release it announces and whose flags it parses
    non_default: dict[str, object] = field(default_factory=dict)  # the flags as parsed
    kv_cache_dtype: str = "auto"  # --kv-cache-dtype as given

    def answer_settings(self) -> dict[str, str]:
        """The settings a profile's ``answers`` section may say change greedy answers."""
        k = self.knobs
        return {
            "kv_cache_dtype": self.kv_cache_dtype,
            "attention": k.attention,
            "moe": k.moe,
            "deep_gemm": str(k.deep_gemm_dense).lower(),
            "spec_method": k.spec_method or "none",
        }


def resolve(
    argv: Sequence[str], env: Mapping[str, str], profile: Profile, version: str | None = None
) -> SimConfig:
    """Parses and checks one launch as vLLM ``version`` would (None: the release the profile
    imitates); raises ``EngineRefused`` where that release refuses."""
    version = version or profile.defaults.vllm_version
    ns = parse_serve_args(argv, version)
    e = Env(env)
    d = profile.defaults
    notes: list[str] = []
    model = ns.model or ns.model_tag or profile.model.name
    mnbt = ns.max_num_batched_tokens or d.max_num_batched_tokens
    seqs = ns.max_num_seqs or d.max_num_seqs
    max_len = ns.max_model_len or profile.model.max_model_len
    _check_scheduler(ns, mnbt, seqs, max_len, profile)
    spec_method, spec_k = _speculative(ns.speculative_config, profile)
    async_on = _async(ns.async_scheduling, spec_method, d.async_scheduling, notes)
    knobs = Knobs(
        attention=_attention(ns.attention_backend, e, profile, notes),
        moe=_moe(ns.moe_backend, e, profile, ns.enable_expert_parallel, notes),
        deep_gemm_dense=profile.hardware.platform == "cuda" and e.flag("VLLM_USE_DEEP_GEMM", True),
        async_scheduling=async_on,
        spec_method=spec_method,
        spec_tokens=spec_k,
        kv_bytes_per_token=_kv_bytes(ns.kv_cache_dtype, profile),
        devices=ns.tensor_parallel_size,
        expert_parallel=ns.enable_expert_parallel,
        **_graphs(ns, seqs, spec_k, profile),
        **_ascend(ns, e, profile),
    )
    return SimConfig(
        model=model,
        served_name=(ns.served_model_name or [model])[0],
        port=ns.port,
        host=ns.host or "0.0.0.0",
        tp=ns.tensor_parallel_size,
        expert_parallel=ns.enable_expert_parallel,
        max_model_len=max_len,
        max_num_batched_tokens=mnbt,
        max_num_seqs=seqs,
        long_prefill_token_threshold=ns.long_prefill_token_threshold,
        enable_prefix_caching=ns.enable_prefix_caching is not False,
        block_size=ns.block_size or d.block_size,
        gpu_memory_utilization=ns.gpu_memory_utilization or d.gpu_memory_utilization,
        fast_load=ns.load_format == "fastsafetensors" or e.flag("SAFETENSORS_FAST_GPU", False),
        knobs=knobs,
        hccl_buffsize_mb=e.int("HCCL_BUFFSIZE", d.hccl_buffsize_mb),
        kv_space_gib=_kv_space(e, profile),
        notes=tuple(notes),
        version=version,
        non_default=non_default_args(ns),
        kv_cache_dtype=str(ns.kv_cache_dtype),
    )


CUDAGRAPH_MODES = ("NONE", "PIECEWISE", "FULL", "FULL_DECODE_ONLY", "FULL_AND_PIECEWISE")


def _graphs(ns: argparse.Namespace, seqs: int, spec_k: int, profile: Profile) -> dict[str, Any]:
    """The cudagraph mode and the largest captured decode batch. vLLM's default size is
    twice the decode rows ``max_num_seqs`` can hold, capped at 512; ``--enforce-eager``
    captures nothing."""
    text = ns.compilation_config or ""
    cc = _compilation_json(text) if text.strip().startswith("{") else {}
    mode = str(cc.get("cudagraph_mode", profile.defaults.cudagraph_mode)).upper()
    if mode not in CUDAGRAPH_MODES:
        raise _refuse(f"ValueError: invalid cudagraph_mode {mode!r}, expected {CUDAGRAPH_MODES}")
    sizes = cc.get("cudagraph_capture_sizes")
    default = min(2 * seqs * (1 + spec_k), 512)
    top = cc.get("max_cudagraph_capture_size") or ns.max_cudagraph_capture_size
    top = max(sizes) if sizes else int(top or default)
    # -O0 compiles nothing and captures nothing, as --enforce-eager.
    eager = ns.enforce_eager or ns.optimization_level == 0
    return {"cudagraph_mode": "NONE" if eager else mode, "max_capture": top}


def _compilation_json(text: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError as err:
        raise EngineRefused(
            f"vllm serve: error: argument --compilation-config/-O: {err}",
            FailureKind.REFUSED,
            exit_code=2,
        ) from err
    return value if isinstance(value, dict) else {}


def _refuse(line: str, kind: FailureKind = FailureKind.REFUSED) -> EngineRefused:
    return EngineRefused(line, kind)


def _check_scheduler(
    ns: argparse.Namespace, mnbt: int, seqs: int, max_len: int, profile: Profile
) -> None:
    if ns.max_num_partial_prefills != 1 or ns.max_long_partial_prefills != 1:
        raise _refuse(
            "NotImplementedError: Concurrent Partial Prefill (--max-num-partial-prefills / "
            "--max-long-partial-prefills > 1) is not supported by the V1 engine."
        )
    if mnbt < seqs:
        raise _refuse(
            f"ValueError: max_num_batched_tokens ({mnbt}) must be greater than or equal to "
            f"max_num_seqs ({seqs})."
        )
    if ns.enable_chunked_prefill is False and mnbt < max_len:
        raise _refuse(
            f"ValueError: max_num_batched_tokens ({mnbt}) is smaller than max_model_len "
            f"({max_len}). This effectively limits the maximum sequence length to "
            "max_num_batched_tokens and makes vLLM reject longer sequences. Please increase "
            "max_num_batched_tokens or decrease max_model_len."
        )
    if max_len > profile.model.max_model_len:
        raise _refuse(
            f"ValueError: User-specified max_model_len ({max_len}) is greater than the derived "
            f"max_model_len (max_position_embeddings={profile.model.max_model_len} in "
            "model's config.json)."
        )
    if ns.tensor_parallel_size > profile.hardware.devices:
        raise _refuse(
            f"ValueError: World size ({ns.tensor_parallel_size}) is larger than the number of "
            f"available {_device_word(profile)}s ({profile.hardware.devices}) in this node."
        )


def _device_word(profile: Profile) -> str:
    return {"cuda": "GPU", "cpu": "CPU"}.get(profile.hardware.platform, "NPU")


def _kv_space(e: Env, profile: Profile) -> float | None:
    """The CPU build sizes its KV cache from VLLM_CPU_KVCACHE_SPACE (GiB), not from memory
    utilization (vllm/platforms/cpu.py)."""
    if profile.hardware.platform != "cpu":
        return None
    raw = e.str("VLLM_CPU_KVCACHE_SPACE")
    try:
        return float(raw) if raw else None
    except ValueError:
        raise _refuse(f"ValueError: could not convert string to float: {raw!r}") from None


def _attention(flag: str | None, e: Env, profile: Profile, notes: list[str]) -> str:
    name = flag or e.str("VLLM_ATTENTION_BACKEND") or profile.defaults.attention_backend
    name = name.upper()
    if name not in KNOWN_ATTENTION:
        raise EngineRefused(
            f"vllm serve: error: argument --attention-backend: invalid choice: {name!r}",
            FailureKind.REFUSED,
            exit_code=2,
        )
    if name not in profile.attention_backends:
        raise _refuse(
            f"ValueError: Selected backend AttentionBackendEnum.{name} is not valid for this "
            f"configuration. Reason: not supported on {profile.hardware.accelerator} "
            f"(platform {profile.hardware.platform}); valid: "
            f"{', '.join(sorted(profile.attention_backends))}"
        )
    if profile.hardware.platform != "cpu":  # the CPU build logs no backend choice
        notes.append(f"Using {name} attention backend.")
    return name


def _moe(flag: str, e: Env, profile: Profile, ep: bool, notes: list[str]) -> str:
    name = flag.lower()
    if name not in KNOWN_MOE:
        raise EngineRefused(
            f"vllm serve: error: argument --moe-backend: invalid choice: {flag!r}",
            FailureKind.REFUSED,
            exit_code=2,
        )
    if name == "auto":
        name = _auto_moe(e, profile)
    if name not in profile.moe_backends:
        raise _refuse(
            f"ValueError: MoE backend {name!r} is not supported on "
            f"{profile.hardware.accelerator}; valid: {', '.join(sorted(profile.moe_backends))}"
        )
    if name == "deep_gemm" and not ep:
        notes.append("DeepGEMM MoE needs N > 512 per expert shard: using Triton fused MoE.")
        name = "triton" if "triton" in profile.moe_backends else name
    if profile.model.experts > 1:  # a dense model's one "expert" is its MLP: nothing to log
        notes.append(f"Using {name} MoE kernels.")
    return name


def _auto_moe(e: Env, profile: Profile) -> str:
    if profile.hardware.platform != "cuda":
        return profile.defaults.moe_backend
    # vLLM's FP8 MoE oracle (select_fp8_moe_backend) handles an explicit FlashInfer env before
    # DeepGEMM's, so the FlashInfer env wins while VLLM_USE_DEEP_GEMM stays at its default 1.
    fp8, fp16 = "VLLM_USE_FLASHINFER_MOE_FP8", "VLLM_USE_FLASHINFER_MOE_FP16"
    if e.flag(fp8, False) or e.flag(fp16, False):
        mode = (e.str("VLLM_FLASHINFER_MOE_BACKEND") or "throughput").lower()
        if mode not in FLASHINFER_MOE_ENV:
            raise _refuse(
                f"ValueError: VLLM_FLASHINFER_MOE_BACKEND={mode!r}; valid: throughput, latency"
            )
        return FLASHINFER_MOE_ENV[mode]
    if e.flag("VLLM_USE_DEEP_GEMM", True) and e.flag("VLLM_MOE_USE_DEEP_GEMM", True):
        return "deep_gemm"
    return profile.defaults.moe_backend


def _speculative(cfg: dict[str, object] | None, profile: Profile) -> tuple[str | None, int]:
    if not cfg:
        return None, 0
    method = str(cfg.get("method", "")).lower()
    k = cfg.get("num_speculative_tokens")
    if method not in profile.speculative:
        raise _refuse(
            f"ValueError: speculative method {method!r} is not supported for "
            f"{profile.model.name} here; valid: {', '.join(sorted(profile.speculative))}"
        )
    if not isinstance(k, int) or k < 1:
        raise _refuse(f"ValueError: num_speculative_tokens must be a positive integer, got {k!r}")
    return method, k


def _async(flag: bool | None, spec: str | None, default: bool, notes: list[str]) -> bool:
    if spec == "suffix":
        if flag:
            raise _refuse(
                "ValueError: Currently, async scheduling is not supported with suffix "
                "decoding. Please remove --async-scheduling or choose another method."
            )
        if flag is None and default:
            notes.append("Async scheduling is disabled: suffix decoding does not support it.")
        return False
    return default if flag is None else flag


def _kv_bytes(dtype: str, profile: Profile) -> int:
    full = profile.memory.kv_bytes_per_token_16bit
    return full // 2 if dtype.startswith("fp8") else full


def _ascend(ns: argparse.Namespace, e: Env, profile: Profile) -> dict[str, Any]:
    if profile.hardware.platform != "ascend":
        return {}
    extra = ns.additional_config
    mc2 = e.int("VLLM_ASCEND_ENABLE_FUSED_MC2", 0)
    if "enable_fused_mc2" in extra:
        mc2 = _as_int(extra["enable_fused_mc2"])
    ep = ns.enable_expert_parallel and ns.tensor_parallel_size > 1
    if mc2 not in (0, 1, 2):
        raise _refuse(f"ValueError: VLLM_ASCEND_ENABLE_FUSED_MC2 must be 0, 1 or 2, got {mc2}")
    if mc2 and not ep:
        raise _refuse(
            "ValueError: fused MC2 (enable_fused_mc2) requires expert parallel: pass "
            "--enable-expert-parallel with an EP size > 1."
        )
    fc1 = e.flag("VLLM_ASCEND_ENABLE_FLASHCOMM1", False)
    if fc1 and ns.tensor_parallel_size < 2:
        raise _refuse("AssertionError: FlashComm1 (VLLM_ASCEND_ENABLE_FLASHCOMM1) needs TP > 1.")
    tq = e.int("TASK_QUEUE_ENABLE", profile.defaults.task_queue)
    if tq not in (0, 1, 2):
        raise _refuse(f"ValueError: TASK_QUEUE_ENABLE must be 0, 1 or 2, got {tq}")
    aiv = (e.str("HCCL_OP_EXPANSION_MODE") or "").upper() == "AIV"
    binding = extra.get("enable_cpu_binding") in (True, "true", "True", 1)
    return {
        "hccl_aiv": aiv,
        "fused_mc2": mc2,
        "flashcomm1": fc1,
        "task_queue": tq,
        "cpu_binding": binding,
    }


def _as_int(value: object) -> int:
    """``true``/``false``/``1``/``2`` from a JSON config value."""
    text = str(value).strip().lower()
    return {"true": 1, "false": 0}.get(text) or int(text) if text not in {"false", "0"} else 0
