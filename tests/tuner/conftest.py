"""A small space on the simulated engine: short prompts, two tiers, a study in seconds."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

SMALL_SPACE: dict[str, Any] = {
    "description": "test space",
    "hardware": "simulated 4x H200",
    "engine": {"name": "vllm", "version": "0.17.1", "model": "org/model"},
    "target": {"kind": "sim", "profile": "h200x4"},
    "base": {"args": {"tensor-parallel-size": 4, "enable-expert-parallel": True}},
    "parameters": {
        "max_num_batched_tokens": {
            "type": "categorical",
            "choices": [2048, 8192, 32768],
            "default": 8192,
            "flag": "--max-num-batched-tokens",
        },
        "max_num_seqs": {
            "type": "categorical",
            "choices": [4, 16, 64],
            "default": 64,
            "flag": "--max-num-seqs",
        },
        "long_prefill_token_threshold": {
            "type": "categorical",
            "choices": [0, 1024, 4096],
            "default": 0,
            "unset": 0,
            "flag": "--long-prefill-token-threshold",
        },
    },
    "rules": ["long_prefill_token_threshold <= max_num_batched_tokens"],
    "workload": {
        "dataset": {"kind": "random", "input_len": 2000, "output_len": 32, "range_ratio": 0.5},
        "num_prompts": 8,
        "warmup": 1,
        "tiers": [1, 4],
        "seed": 3,
    },
    "study": {"objective": "p99_tpot", "trials": 6, "seed": 1},
}


@pytest.fixture
def small_space() -> dict[str, Any]:
    return copy.deepcopy(SMALL_SPACE)


@pytest.fixture
def space_file(tmp_path: Path, small_space: dict[str, Any]) -> Path:
    path = tmp_path / "small.yaml"
    path.write_text(yaml.safe_dump(small_space, sort_keys=False))
    return path


def write_yaml(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path
