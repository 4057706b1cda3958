"""Space files: valid ones load, each kind of bad input is one line naming path, rule, value."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.errors import SpaceError
from tuner.space import load_space

REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize("name", ["minimax_h200.yaml", "minimax_910c.yaml"])
def test_shipped_spaces_load(name: str) -> None:
    space = load_space(REPO / "search_spaces" / name)
    assert space.parameters
    assert space.workload.tiers


def test_minimal_space_loads(space_dict, write_space) -> None:
    space = load_space(write_space(space_dict))
    assert space.defaults() == {
        "max_num_batched_tokens": 8192,
        "max_num_seqs": 256,
        "long_prefill_token_threshold": 0,
    }


def error_of(path: Path) -> str:
    with pytest.raises(SpaceError) as info:
        load_space(path)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(str(path))
    return message


def test_malformed_yaml_names_line(write_space) -> None:
    message = error_of(write_space("engine: {name: vllm\nparameters: [\n"))
    assert "malformed YAML at line" in message


def test_unknown_key_names_path(space_dict, write_space) -> None:
    space_dict["parameters"]["max_num_seqs"]["colour"] = "red"
    message = error_of(write_space(space_dict))
    assert "parameters.max_num_seqs.colour" in message
    assert "Extra inputs are not permitted" in message


def test_wrong_type_shows_value(space_dict, write_space) -> None:
    space_dict["workload"]["num_prompts"] = "many"
    message = error_of(write_space(space_dict))
    assert "workload.num_prompts" in message and "'many'" in message


def test_low_above_high(space_dict, write_space) -> None:
    p = space_dict["parameters"]["max_num_batched_tokens"]
    p["low"], p["high"] = 300000, 8192
    message = error_of(write_space(space_dict))
    assert "parameters.max_num_batched_tokens" in message
    assert "low (300000) is above high (8192)" in message


def test_rule_naming_unknown_parameter(space_dict, write_space) -> None:
    space_dict["rules"].append("max_num_seqs <= max_num_sequences")
    message = error_of(write_space(space_dict))
    assert "rules[2]" in message and "'max_num_sequences'" in message


def test_rule_syntax_error(space_dict, write_space) -> None:
    space_dict["rules"] = ["max_num_seqs <= __import__('os')"]
    message = error_of(write_space(space_dict))
    assert "rules[0]" in message


def test_empty_tier_list(space_dict, write_space) -> None:
    space_dict["workload"]["tiers"] = []
    message = error_of(write_space(space_dict))
    assert "workload" in message and "tiers" in message


def test_unknown_launcher_kind_lists_valid(space_dict, write_space) -> None:
    space_dict["target"] = {"kind": "kubernetes"}
    message = error_of(write_space(space_dict))
    assert "unknown launcher kind 'kubernetes'" in message and "sim" in message


def test_bad_launcher_setting(space_dict, write_space) -> None:
    space_dict["target"]["turbo"] = True
    message = error_of(write_space(space_dict))
    assert "target.turbo" in message


def test_default_outside_choices(space_dict, write_space) -> None:
    space_dict["parameters"]["max_num_seqs"]["default"] = 40
    message = error_of(write_space(space_dict))
    assert "default 40 is outside" in message


def test_baseline_must_obey_rules(space_dict, write_space) -> None:
    space_dict["parameters"]["long_prefill_token_threshold"]["default"] = 32768
    space_dict["parameters"]["long_prefill_token_threshold"]["unset"] = None
    message = error_of(write_space(space_dict))
    assert (
        "baseline" in message
        and "long_prefill_token_threshold <= max_num_batched_tokens" in message
    )


def test_partial_prefills_other_than_one_refused(space_dict, write_space) -> None:
    space_dict["parameters"]["partial"] = {
        "type": "categorical",
        "choices": [1, 2],
        "default": 1,
        "flag": "--max-num-partial-prefills",
    }
    message = error_of(write_space(space_dict))
    assert "only accepts --max-num-partial-prefills 1" in message


def test_missing_file() -> None:
    with pytest.raises(SpaceError, match="cannot read space file"):
        load_space("/nonexistent/space.yaml")


def test_top_level_not_mapping(write_space) -> None:
    assert "must be a YAML mapping" in error_of(write_space("- a\n- b\n"))
