"""The recipe's hardware id, vendor and strategy, read from the space."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from tests.tuner.export.conftest import space_dict
from tuner.export.recipe_hardware import hardware_id, strategy, vendor
from tuner.space.schema import Space


def _space(**fields: Any) -> Space:
    return Space.model_validate({**space_dict(), **fields})


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("4x NVIDIA H200 141GB (NVLink), TP4 + expert parallel", "h200"),
        ("1x Ascend 910C (A3) node, 16 dies of 64 GB", "910c"),
        ("4-GPU GB300 tray", "gb300"),  # not read as b300
        ("8x MI355X", "mi355x"),
        ("2 x86-64 CPU cores", "cpu"),
        ("a machine", None),
    ],
)
def test_hardware_id_is_read_from_the_hardware_text(text: str, want: str | None) -> None:
    assert hardware_id(_space(hardware=text)) == want


def test_a_space_sets_the_hardware_id_itself() -> None:
    space = _space(hardware="4x NVIDIA H200", hardware_id="h200_nvl")
    assert hardware_id(space) == "h200_nvl"
    with pytest.raises(ValidationError, match="hardware_id"):
        _space(hardware_id="H200 x4")


def test_vendor_follows_the_id_then_the_engine() -> None:
    assert vendor(_space(hardware="8x MI300X")) == "amd"
    assert vendor(_space(hardware="1x Ascend 910C")) == "ascend"
    assert vendor(_space(hardware="4x H200")) == "nvidia"
    ascend = space_dict()
    ascend["engine"] = {**ascend["engine"], "name": "vllm-ascend", "version": "0.14.0"}
    assert vendor(Space.model_validate({**ascend, "hardware": "a machine"})) == "ascend"


def test_strategy_names_expert_parallel_over_tp_or_dp() -> None:
    assert strategy(["--tensor-parallel-size", "4"]) == "single_node_tp"
    tep = ["--tensor-parallel-size", "4", "--enable-expert-parallel"]
    assert strategy(tep) == "single_node_tep"
    assert strategy([*tep, "--data-parallel-size", "4"]) == "single_node_dep"
