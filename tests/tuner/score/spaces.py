"""A space of categorical knobs for scoring tests: one tier, a tiny workload."""

from __future__ import annotations

from typing import Any


def categorical(choices: list[Any], default: Any, flag: str) -> dict[str, Any]:
    return {"type": "categorical", "choices": choices, "default": default, "flag": flag}


def knob_space(parameters: dict[str, Any], rules: list[str] | None = None) -> dict[str, Any]:
    """The space file's data: ``parameters`` on the simulated H200, tier c1."""
    return {
        "engine": {"name": "vllm", "version": "0.17.1", "model": "org/model"},
        "target": {"kind": "sim", "profile": "h200x4"},
        "parameters": parameters,
        "rules": rules or [],
        "workload": {
            "dataset": {"kind": "random", "input_len": 8, "output_len": 8},
            "num_prompts": 2,
            "tiers": [1],
        },
    }
