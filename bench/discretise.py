"""The finite spaces the sample-efficiency bench measures exhaustively, one per search space.

A space named in ``DISCRETE`` (by its file's stem) keeps, for each knob listed there, only the
values given; the knobs not listed keep every value the space gives them. A space not named
there is discretised by a rule: categorical knobs keep their choices, and each int or float
range gets ``SPREAD`` values evenly spaced from low to high on its own scale (log ranges on a
log scale), snapped to its step and rounded for ints, plus its default. Either way a knob whose
default is not among its values defaults to the nearest of them (the first, for names), and the
space's rules still hold: the bench never measures a point that breaks one.

``minimax_h200`` is the landscape the default sampler was developed on; its values stay as they
were, so its cached table and published figures still hold. ``minimax_910c`` is held out: it
keeps every value of every Ascend knob (HCCL AIV, fused MC2, FlashComm1, task queue, CPU
binding, async scheduling), the knobs this space adds, and thins the rest as the H200 one does:
suffix drafts off or 3 tokens, the token budget at vLLM's 2048 and 16384, the prefill cap off,
256 seats (every tier fits) and the memory fraction at its default. That keeps its exhaustive
sweep to a few hundred launches, which two cores measure on four engine seeds in minutes.

``PROMPTS`` is each space's measured requests per tier, where the bench shortens its workload;
elsewhere the space's own count stands (the 910C space's 20 prompts are 100K tokens each).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tuner.space.schema import Space

SPREAD = 3  # values per numeric range under the generic rule: its ends and its middle
DISCRETE: dict[str, dict[str, list[Any]]] = {
    "minimax_h200": {
        "max_num_batched_tokens": [8192, 32768, 131072, 262144],
        "long_prefill_token_threshold": [0, 6000],
        "max_num_seqs": [16, 64, 256],
        "num_speculative_tokens": [0, 3],
        # Held at one value, so the landscape keeps the size the sampler was developed on.
        "gpu_memory_utilization": [0.92],
        "kv_cache_dtype": ["auto"],
        "cudagraph_mode": ["FULL_AND_PIECEWISE"],
    },
    "minimax_910c": {
        "max_num_batched_tokens": [2048, 16384],
        "long_prefill_token_threshold": [0],
        "max_num_seqs": [256],
        "gpu_memory_utilization": [0.9],
        "num_speculative_tokens": [0, 3],
    },
}
PROMPTS: dict[str, int] = {"minimax_h200": 40}


def default_prompts(path: Path) -> int:
    """The bench's measured requests per tier for this space (``--prompts`` overrides it)."""
    if path.stem in PROMPTS:
        return PROMPTS[path.stem]
    return int(yaml.safe_load(path.read_text())["workload"]["num_prompts"])


def bench_space(path: Path, prompts: int, seed: int = 0) -> Space:
    """The discretised space on the simulated engine, ``prompts`` per tier."""
    return Space.model_validate(bench_space_data(path, prompts, seed))


def bench_space_data(
    path: Path, prompts: int, seed: int = 0, narrow: dict[str, list[Any]] | None = None
) -> dict[str, Any]:
    """``bench_space`` as YAML data (for a study run from a file), ``narrow`` fixing more
    knobs to the values given."""
    data = yaml.safe_load(path.read_text())  # the schema reads YAML's on/off keys back
    data["target"] = {"kind": "sim", **(data.get("sim") or {})}
    thinned = {**discretisation(path.stem, data["parameters"]), **(narrow or {})}
    for name, values in thinned.items():
        _pin(data["parameters"][name], values)
    data["workload"].update(num_prompts=prompts, warmup=1)
    data["study"]["seed"] = seed
    return data


def discretisation(stem: str, parameters: dict[str, dict[str, Any]]) -> dict[str, list[Any]]:
    """The values each thinned knob keeps: the space's entry, else the generic rule."""
    if stem in DISCRETE:
        return DISCRETE[stem]
    return {name: spread(p) for name, p in parameters.items() if p["type"] != "categorical"}


def spread(p: dict[str, Any]) -> list[Any]:
    """``SPREAD`` values over a numeric range on its own scale, and its default."""
    low, high = float(p["low"]), float(p["high"])
    if p.get("log"):
        points = [low * (high / low) ** (i / (SPREAD - 1)) for i in range(SPREAD)]
    else:
        points = [low + (high - low) * i / (SPREAD - 1) for i in range(SPREAD)]
    if p.get("step"):
        points = [low + round((v - low) / p["step"]) * p["step"] for v in points]
    if p.get("default") is not None:
        points.append(p["default"])
    return sorted({round(v) if p["type"] == "int" else v for v in points})


def _pin(p: dict[str, Any], values: list[Any]) -> None:
    for key in ("low", "high", "log", "step"):
        p.pop(key, None)
    p.update(type="categorical", choices=values)
    if p.get("default") not in values:  # the engine's own default is not on the grid:
        p["default"] = nearest(values, p.get("default"))
        p.pop("unset", None)  # every value is then rendered, the default included


def nearest(values: list[Any], target: Any) -> Any:
    """The value closest to ``target``; the first one when they are not numbers."""
    numeric = all(isinstance(v, int | float) for v in [*values, target])
    if not numeric or isinstance(target, bool):
        return values[0]
    return min(values, key=lambda v: abs(v - target))
