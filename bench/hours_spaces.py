"""The spaces ``hours_to_answer`` searches: sample_efficiency's discretised tables, thinned
further where a sweep of every launch on two cores would take hours.

``minimax_h200`` holds DeepGEMM on for both layer kinds and keeps three of its five MoE
backends (``triton``, ``deep_gemm``, ``flashinfer_cutlass``): 648 distinct launches, against
2808 in sample_efficiency's table. ``minimax_910c``, the held-out space, is its table whole.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from bench.discretise import bench_space_data, default_prompts
from tuner.space.schema import Space

REPO = Path(__file__).resolve().parents[1]
SPACES = (
    REPO / "search_spaces" / "minimax_h200.yaml",
    REPO / "search_spaces" / "minimax_910c.yaml",
)
NARROW: dict[str, dict[str, list[Any]]] = {
    "minimax_h200": {
        "deep_gemm_dense": ["1"],
        "deep_gemm_moe": ["1"],
        "moe_backend": ["triton", "deep_gemm", "flashinfer_cutlass"],
    },
}


def hours_space(path: Path, seed: int = 0) -> Space:
    """The discretised space ``path`` as this bench searches it (its seed for the sampler)."""
    data = bench_space_data(path, default_prompts(path), seed, NARROW.get(path.stem))
    return Space.model_validate(data)
