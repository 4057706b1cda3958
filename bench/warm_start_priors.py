"""The warm-start bench's priors: earlier deployments, as perturbed copies of the h200x4 profile.

``helpful`` is a neighbouring deployment that ranks configs mostly as the truth does (less HBM
bandwidth and FLOP/s, other engine noise); ``misleading`` one whose kernels rank the other way
round (the MoE and attention backends' efficiencies swapped). Each is written to a folder of
its own, with the space files its earlier studies run from.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from bench.discretise import bench_space_data
from bench.sweep import SPACE
from launchers.simengine.profile import PROFILE_DIR

PROFILE = PROFILE_DIR / "h200x4.yaml"

Perturb = Callable[[dict[str, Any]], None]


def _slower_node(p: dict[str, Any]) -> None:
    """A neighbouring node: 10% less HBM bandwidth, 12% fewer FLOP/s, every kernel alike."""
    hw = p["hardware"]
    hw["hbm_tbs"] *= 0.90
    hw["tflops_8bit"] *= 0.88
    hw["tflops_16bit"] *= 0.88


def _kernels_reversed(p: dict[str, Any]) -> None:
    """Another engine release whose kernels rank the other way round: the MoE backends'
    efficiencies swapped in pairs (triton with flashinfer_cutlass, deep_gemm with cutlass) and
    FLASH_ATTN's with FLASHINFER's; triton keeps its overflow, which is no efficiency."""
    _swap(p["moe_backends"], "triton", "flashinfer_cutlass", ("gemm_eff", "half_rows", "bw_eff"))
    _swap(p["moe_backends"], "triton", "flashinfer_cutlass", ("layer_us",))
    _swap(p["moe_backends"], "deep_gemm", "cutlass", ("gemm_eff", "half_rows", "bw_eff"))
    attn = p["attention_backends"]  # every factor of the two, their mixed-batch handling too
    attn["FLASH_ATTN"], attn["FLASHINFER"] = attn["FLASHINFER"], attn["FLASH_ATTN"]


def _swap(table: dict[str, dict[str, Any]], a: str, b: str, keys: Sequence[str]) -> None:
    for k in keys:
        table[a][k], table[b][k] = table[b][k], table[a][k]


PRIORS: dict[str, Perturb] = {"helpful": _slower_node, "misleading": _kernels_reversed}


def space_data(
    prompts: int, seed: int = 0, narrow: dict[str, list[Any]] | None = None
) -> dict[str, Any]:
    """``sample_efficiency``'s space as YAML data (a study is run from a file), with
    ``narrow`` fixing more knobs (a test's small space)."""
    return bench_space_data(SPACE, prompts, seed, narrow)


def perturbed_profile(name: str, folder: Path) -> Path:
    """The h200x4 profile with prior ``name``'s perturbation, as a file of its own."""
    profile = yaml.safe_load(PROFILE.read_text())
    PRIORS[name](profile)
    path = folder / f"h200x4_{name}.yaml"
    path.write_text(yaml.safe_dump(profile, sort_keys=False))
    return path


def earlier_space_file(data: dict[str, Any], profile: Path, engine_seed: int, folder: Path) -> Path:
    """The space on the perturbed profile with its own engine noise, as a space file."""
    data = copy.deepcopy(data)
    data["target"] = {"kind": "sim", "profile_file": str(profile), "seed": engine_seed}
    path = folder / f"{profile.stem}_{engine_seed}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
