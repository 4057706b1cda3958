"""Flag words split the way a vLLM recipe writes them: ``tp``, ``json_args``, ``args``."""

from __future__ import annotations

import json

from tuner.export.configs import flags_dict
from tuner.export.recipe_args import launch_args, recipe_args

SPEC = {"method": "suffix", "num_speculative_tokens": 4}
ARGS = [
    "--tensor-parallel-size", "8", "--max-num-seqs", "128",
    "--speculative-config", json.dumps(SPEC), "--enable-prefix-caching",
    "--additional-config", '{"ascend_scheduler_config": {"enabled": true}}',
    "--api-key", "${VLLM_API_KEY}", "--host", "0.0.0.0", "--port", "8000",
]  # fmt: skip


def test_tp_and_json_flags_leave_args() -> None:
    got = recipe_args(ARGS)
    assert got.tp == 8
    assert got.json_args == {
        "--speculative-config": SPEC,
        "--additional-config": {"ascend_scheduler_config": {"enabled": True}},
    }
    assert got.args == [
        "--max-num-seqs", "128", "--enable-prefix-caching",
        "--api-key", "${VLLM_API_KEY}",
    ]  # fmt: skip
    assert got.serve == {"host": "0.0.0.0", "port": 8000}  # a deployment detail, apart


def test_launch_args_is_the_inverse() -> None:
    got = recipe_args(ARGS)
    back = launch_args(got.args, got.json_args, got.tp, got.serve)
    assert flags_dict(back) == flags_dict(ARGS)


def test_fields_leave_tp_out_when_the_launch_sets_none() -> None:
    got = recipe_args(["--max-num-seqs", "4", "-tp", "2"]).fields()
    assert got == {"tp": 2, "args": ["--max-num-seqs", "4"], "json_args": {}}
    assert "tp" not in recipe_args(["--ctx-size", "4096"]).fields()
    assert "serve" not in recipe_args(["--ctx-size", "4096"]).fields()


def test_a_value_that_is_no_json_object_stays_an_arg() -> None:
    args = ["--limit-mm-per-prompt", "[1, 2]", "--chat-template", "{% if x %}", "--x", "{}", "y"]
    got = recipe_args(args)
    assert got.json_args == {} and got.args == args
