"""The simulated engine's start-up: weights, compile, and what vLLM's compile cache saves.

vLLM keeps compiled graphs under ``VLLM_CACHE_ROOT/torch_compile_cache/<hash>``, the hash
covering what shapes the compiled model (model, parallelism, token budget, kernels, graph
capture sizes). A launch whose hash is there loads its graphs in a second or two instead of
compiling them, and only graph capture and the profiling run are left of its start-up. The
simulator keeps one empty folder per hash in the same layout, so a study's later launches of
a compile key start faster as they would on the hardware, and the log says which it was in
vLLM's words (``launchers._compile_log`` reads them back, for real engines too).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from launchers.simengine.config import SimConfig
from launchers.simengine.profile import Profile

LOAD_S = 1.5  # reading cached graphs back, as vLLM logs it on H200-class hosts (0.7-1.9 s)


@dataclass(frozen=True)
class CompileRun:
    """One launch's compile: its key, whether the cache held it, and the init seconds."""

    key: str
    cached: bool
    init_s: float  # profile, KV cache, compile or cache load, graph capture


def weights_load_s(profile: Profile, cfg: SimConfig) -> float:
    """Seconds loading the weights takes (fastsafetensors reads them faster)."""
    o = profile.overheads
    return o.fast_load_s if cfg.fast_load else o.load_s


def compile_key(profile: Profile, cfg: SimConfig) -> str:
    """A stable 10-hex hash of what the compiled graphs depend on (vLLM's hash is 10 hex too).

    Port, host, memory share, scheduling limits other than the token budget and the graph
    sizes, prefix caching and weight loading leave the compiled graphs as they are."""
    parts = (profile.name, cfg.model, cfg.tp, cfg.expert_parallel, cfg.max_num_batched_tokens)
    text = repr((*parts, cfg.max_model_len, cfg.knobs))
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def compile_once(profile: Profile, cfg: SimConfig, cache_dir: Path | None) -> CompileRun:
    """The compile of one launch; with ``cache_dir``, the key is looked up and then stored."""
    key = compile_key(profile, cfg)
    folder = entry(cache_dir, key) if cache_dir is not None else None
    cached = folder is not None and folder.is_dir()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)  # parallel slots may race: both compiled
    o = profile.overheads
    warm = o.compile_cached_s if o.compile_cached_s is not None else o.compile_s
    return CompileRun(key, cached, warm if cached else o.compile_s)


def entry(cache_dir: Path, key: str) -> Path:
    return cache_dir / "torch_compile_cache" / key


def log_lines(run: CompileRun, profile: Profile, cache_dir: Path | None) -> list[str]:
    """What vLLM logs about its compile, with or without a cache to use."""
    lines = []
    if cache_dir is not None:
        folder = entry(cache_dir, run.key) / "rank_0_0" / "backbone"
        lines.append(f"Using cache directory: {folder} for vLLM's torch.compile")
    o = profile.overheads
    if run.cached:
        lines.append(
            "Directly load the compiled graph(s) for dynamic shape from the cache, "
            f"took {LOAD_S:.3f} s"
        )
    else:
        saved = o.compile_s - (o.compile_cached_s or 0.0)
        lines.append(f"Compiling a graph for dynamic shape takes {max(saved, LOAD_S):.2f} s")
    return lines
