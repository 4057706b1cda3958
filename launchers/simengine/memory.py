"""Start-up memory plan: weights, activations, KV block pool (as vLLM's profiling run does).

Per device, vLLM budgets ``gpu_memory_utilization x HBM``; from it go the weights (sharded
over the tensor-parallel ranks), the runtime (context, communication buffers, graphs) and the
peak activations of a profiling forward pass with ``max_num_batched_tokens`` tokens; what
remains is the KV block pool. KV heads are split over ranks, replicated when there are fewer
KV heads than ranks. Refusals: weights that do not fit (out of memory while loading), an
empty pool, or a pool too small for one ``max_model_len`` request.
"""

from __future__ import annotations

from dataclasses import dataclass

from launchers.simengine.config import SimConfig
from launchers.simengine.errors import EngineRefused
from launchers.simengine.profile import Profile
from tuner.errors import FailureKind

GIB = 1024**3


@dataclass(frozen=True)
class MemoryPlan:
    """Per-device budget (bytes) and the resulting KV pool."""

    weights: float
    activations: float
    kv_pool: float
    kv_tokens: int
    num_blocks: int
    oom_under_load: bool  # too little left outside the budget for load-time peaks
    budget: float = 0.0  # the memory the pool was carved from

    def lines(self, cfg: SimConfig) -> list[str]:
        conc = self.kv_tokens / cfg.max_model_len
        if cfg.kv_space_gib is not None:  # the CPU build's own two lines
            return [
                f"Explicitly set ({cfg.kv_space_gib}/{self.budget / GIB:.2f}) GiB for KV cache "
                "on node 0.",
                f"CPU KV cache size: {self.kv_tokens:,} tokens, Maximum concurrency for "
                f"{cfg.max_model_len:,} tokens per request: {conc:.2f}x",
            ]
        return [
            f"Model loading took {self.weights / GIB:.2f} GiB memory",
            f"Available KV cache memory: {self.kv_pool / GIB:.2f} GiB",
            f"GPU KV cache size: {self.kv_tokens:,} tokens",
            f"Maximum concurrency for {cfg.max_model_len:,} tokens per request: {conc:.2f}x",
        ]


def plan_memory(cfg: SimConfig, profile: Profile) -> MemoryPlan:
    """The KV pool of one launch; raises ``EngineRefused`` (OOM) where vLLM runs out."""
    hw, m, mem = profile.hardware, profile.model, profile.memory
    hbm = hw.hbm_gb * 1e9
    budget = cfg.gpu_memory_utilization * hbm
    weights = m.total_params_b * 1e9 * m.weight_bytes / cfg.tp
    runtime = mem.runtime_gb * 1e9
    if cfg.knobs.task_queue == 2:
        runtime += profile.ascend.task_queue2_extra_gb * 1e9
    if weights + runtime > budget:
        raise _oom_loading(profile, hbm, weights + runtime)
    act = mem.activation_kb_per_token * 1e3 * cfg.max_num_batched_tokens
    pool = budget - weights - runtime - act
    if cfg.kv_space_gib is not None:  # the CPU build takes the size it is told
        pool, budget = cfg.kv_space_gib * GIB, hbm

    if pool <= 0:
        raise EngineRefused(
            "ValueError: No available memory for the cache blocks. Try increasing "
            "`gpu_memory_utilization` when initializing the engine.",
            FailureKind.OOM,
        )
    per_token = cfg.knobs.kv_bytes_per_token / min(cfg.tp, m.kv_heads)
    blocks = int(pool // (per_token * cfg.block_size))
    tokens = blocks * cfg.block_size
    if tokens < cfg.max_model_len:
        raise _too_small(cfg, pool, per_token, tokens)
    headroom = (1 - cfg.gpu_memory_utilization) * hbm
    oom = headroom < mem.headroom_gb * 1e9
    return MemoryPlan(weights, act, pool, tokens, blocks, oom, budget)


def _oom_loading(profile: Profile, hbm: float, need: float) -> EngineRefused:
    dev = {"cuda": "CUDA", "cpu": "CPU"}.get(profile.hardware.platform, "NPU")
    return EngineRefused(
        f"torch.OutOfMemoryError: {dev} out of memory. Tried to allocate 1.50 GiB. Device 0 "
        f"has a total capacity of {hbm / GIB:.2f} GiB; the model needs {need / GIB:.2f} GiB "
        "per device at this tensor-parallel size.",
        FailureKind.OOM,
    )


def _too_small(cfg: SimConfig, pool: float, per_token: float, tokens: int) -> EngineRefused:
    need = cfg.max_model_len * per_token
    return EngineRefused(
        f"ValueError: To serve at least one request with the models's max seq len "
        f"({cfg.max_model_len}), ({need / GIB:.2f} GiB KV cache is needed, which is larger "
        f"than the available KV cache memory ({pool / GIB:.2f} GiB). Based on the available "
        f"memory, the estimated maximum model length is {tokens}. Try increasing "
        "`gpu_memory_utilization` or decreasing `max_model_len` when initializing the engine.",
        FailureKind.OOM,
    )
