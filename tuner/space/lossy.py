"""Which knobs may change what the model answers (lossy), and which only how fast.

A scheduler limit, a CUDA-graph mode or a block size reorders and batches the same arithmetic,
so a greedy answer stays the model's (lossless by design). A lower-precision KV cache or
weights, a kernel with other numerics (another attention or MoE backend, DeepGEMM's FP8 block
GEMMs) or a speculative decoder (lossless in theory; a broken one is not) can change it. A
space tuning any knob of this table gets a quality gate by default
(``tuner.space.schema.QualitySpec``); the gate itself compares answers, never trusts the table.
"""

from __future__ import annotations

from collections.abc import Mapping

from tuner.space.params import Parameter

# Engine flag (as the engine spells it, leading dashes) -> why it is lossy.
LOSSY_FLAGS: Mapping[str, str] = {
    "--kv-cache-dtype": "KV cache precision (FP8 rounds what attention reads)",
    "--quantization": "weight quantization",
    "--dtype": "compute precision",
    "--speculative-config": "speculative decoding (lossless in theory; a broken drafter is not)",
    "--attention-backend": "attention kernels with other numerics",
    "--moe-backend": "MoE kernels with other numerics",
    "--cache-type-k": "llama.cpp K cache precision",
    "--cache-type-v": "llama.cpp V cache precision",
}
LOSSY_KNOBS: Mapping[str, str] = {
    "attention_backend": LOSSY_FLAGS["--attention-backend"],
    "moe_backend": LOSSY_FLAGS["--moe-backend"],
}
LOSSY_ENV: Mapping[str, str] = {
    "VLLM_USE_DEEP_GEMM": "DeepGEMM's FP8 block GEMMs for dense layers",
    "VLLM_MOE_USE_DEEP_GEMM": "DeepGEMM's FP8 block GEMMs for the experts",
}


def lossy_reason(p: Parameter) -> str | None:
    """Why a parameter may change the model's answers (None: lossless by design)."""
    if p.json_key is not None:
        return LOSSY_FLAGS.get(_flag(p.json_key.flag))
    if p.flag is not None:
        return LOSSY_FLAGS.get(_flag(p.flag))
    if p.env is not None:
        return LOSSY_ENV.get(p.env)
    return LOSSY_KNOBS.get(p.knob or "")


def lossy_parameters(parameters: Mapping[str, Parameter]) -> dict[str, str]:
    """The lossy parameters of a space, each with why."""
    return {name: why for name, p in parameters.items() if (why := lossy_reason(p)) is not None}


def _flag(flag: str) -> str:
    # --kv-cache-dtype, --kv_cache_dtype and kv-cache-dtype are one flag to the engine.
    return "--" + flag.lstrip("-").replace("_", "-")
