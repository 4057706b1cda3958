from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

MINIMAL: dict[str, Any] = {
    "engine": {"name": "vllm", "version": "0.17.1", "model": "org/model"},
    "target": {"kind": "sim", "profile": "h200x4"},
    "base": {"args": {"tensor-parallel-size": 4, "enable-expert-parallel": True}},
    "parameters": {
        "max_num_batched_tokens": {
            "type": "int",
            "low": 8192,
            "high": 131072,
            "log": True,
            "default": 8192,
            "flag": "--max-num-batched-tokens",
        },
        "max_num_seqs": {
            "type": "categorical",
            "choices": [16, 64, 256],
            "default": 256,
            "flag": "--max-num-seqs",
        },
        "long_prefill_token_threshold": {
            "type": "categorical",
            "choices": [0, 4096, 32768],
            "default": 0,
            "unset": 0,
            "flag": "--long-prefill-token-threshold",
        },
    },
    "rules": [
        "long_prefill_token_threshold <= max_num_batched_tokens",
        "max_num_batched_tokens >= max_num_seqs",
    ],
    "workload": {
        "dataset": {"kind": "random", "input_len": 1000, "output_len": 50},
        "num_prompts": 8,
        "tiers": [1, 4],
        "seed": 1,
    },
}


@pytest.fixture
def space_dict() -> dict[str, Any]:
    return copy.deepcopy(MINIMAL)


@pytest.fixture
def write_space(tmp_path: Path):
    def write(data: dict[str, Any] | str, name: str = "space.yaml") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path

    return write
