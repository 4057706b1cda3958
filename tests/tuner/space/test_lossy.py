"""Lossy knobs: which the table marks, and the quality gate they turn on by default."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.tuner.conftest import SMALL_SPACE
from tuner.space.load import load_space
from tuner.space.lossy import lossy_parameters, lossy_reason
from tuner.space.params import Parameter
from tuner.space.schema import Space

CHOICES: dict[str, Any] = {"type": "categorical", "choices": ["a", "b"], "default": "a"}


@pytest.mark.parametrize(
    ("binding", "lossy"),
    [
        ({"flag": "--kv-cache-dtype"}, True),
        ({"flag": "kv_cache_dtype"}, True),  # one flag however it is spelled
        ({"flag": "--quantization"}, True),
        ({"json": {"flag": "--speculative-config", "key": "method"}}, True),
        ({"knob": "attention_backend"}, True),
        ({"env": "VLLM_USE_DEEP_GEMM"}, True),
        ({"flag": "--cache-type-k"}, True),
        ({"flag": "--max-num-seqs"}, False),
        ({"flag": "--block-size"}, False),
        ({"json": {"flag": "--compilation-config", "key": "cudagraph_mode"}}, False),
        ({"env": "VLLM_CPU_KVCACHE_SPACE"}, False),
    ],
)
def test_the_table_marks_lossy_knobs_and_leaves_lossless_ones(
    binding: dict[str, Any], lossy: bool
) -> None:
    assert (lossy_reason(Parameter(**CHOICES, **binding)) is not None) is lossy


def _space(tmp_path: Path, **changes: Any) -> Space:
    data: dict[str, Any] = yaml.safe_load(yaml.safe_dump(SMALL_SPACE))
    data.update(changes)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(data))
    return load_space(path)


def test_the_gate_is_on_by_default_where_a_lossy_knob_is_tuned(tmp_path: Path) -> None:
    assert not _space(tmp_path).quality_gated()
    params = dict(SMALL_SPACE["parameters"])
    params["kv"] = {**CHOICES, "choices": ["auto", "fp8"], "default": "auto"}
    params["kv"]["flag"] = "--kv-cache-dtype"
    space = _space(tmp_path, parameters=params)
    assert space.quality_gated() and list(lossy_parameters(space.parameters)) == ["kv"]
    assert not _space(tmp_path, parameters=params, quality={"gate": False}).quality_gated()
    assert _space(tmp_path, quality={"gate": True}).quality_gated()


def test_the_shipped_cpu_space_tunes_the_kv_cache_dtype_under_the_gate() -> None:
    root = Path(__file__).parents[3]
    for name in ("vllm_cpu.yaml", "vllm_cpu_docker.yaml"):
        space = load_space(root / "search_spaces" / name)
        assert space.parameters["kv_cache_dtype"].choices == ["auto", "fp8"]
        assert space.quality_gated() and space.quality.min_agreement == 0.95
