"""An earlier study's config in this space: kept, moved to the nearest value, or dropped."""

from __future__ import annotations

from typing import Any

from tuner.space.schema import Space
from tuner.space.translate import nearest, queued, translate


def space(data: dict[str, Any]) -> Space:
    data["parameters"]["attention_backend"] = {
        "type": "categorical",
        "choices": ["FLASH_ATTN", "FLASHINFER"],
        "default": "FLASH_ATTN",
        "knob": "attention_backend",
    }
    return Space.model_validate(data)


def test_a_value_this_space_takes_is_kept(space_dict: dict[str, Any]) -> None:
    s = space(space_dict)
    old = {"max_num_seqs": 64, "attention_backend": "FLASHINFER", "max_num_batched_tokens": 16384}
    assert translate(old, s) == {**old, "long_prefill_token_threshold": None}


def test_numbers_move_to_the_nearest_choice_on_a_log_scale_and_into_the_range(
    space_dict: dict[str, Any],
) -> None:
    s = space(space_dict)
    seqs, budget = s.parameters["max_num_seqs"], s.parameters["max_num_batched_tokens"]
    assert nearest(seqs, 40) == 64  # 40/16 = 2.5 against 64/40 = 1.6
    assert nearest(seqs, 1024) == 256
    assert nearest(budget, 262144) == 131072 and nearest(budget, 1000) == 8192
    assert nearest(budget, 20000.4) == 20000 and isinstance(nearest(budget, 20000.4), int)


def test_a_kernel_this_space_does_not_list_has_no_nearest(space_dict: dict[str, Any]) -> None:
    s = space(space_dict)
    assert nearest(s.parameters["attention_backend"], "TRITON_ATTN") is None
    assert nearest(s.parameters["max_num_seqs"], "auto") is None
    assert nearest(s.parameters["max_num_batched_tokens"], True) is None


def test_a_queued_config_fills_its_gaps_with_defaults_and_keeps_the_rules(
    space_dict: dict[str, Any],
) -> None:
    s = space(space_dict)
    old = {"attention_backend": "TRITON_ATTN", "max_num_seqs": 16, "gone_knob": 3}
    assert queued(old, s) == {
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 16,
        "long_prefill_token_threshold": 0,
        "attention_backend": "FLASH_ATTN",
    }
    # 32768-token prefill cap over an 8192 budget: the rule refuses it, nothing is queued
    assert queued({"long_prefill_token_threshold": 32768}, s) is None
