"""Rendering parameter values into the exact argv and env an engine is started with."""

from __future__ import annotations

import json

from tuner.space import load_space, render_engine_config


def test_defaults_render_base_then_params(space_dict, write_space) -> None:
    cfg = render_engine_config(load_space(write_space(space_dict)), {}, port=8123)
    assert cfg.argv[:3] == ["vllm", "serve", "org/model"]
    assert cfg.args == (
        "--tensor-parallel-size",
        "4",
        "--enable-expert-parallel",
        "--max-num-batched-tokens",
        "8192",
        "--max-num-seqs",
        "256",
        "--host",
        "127.0.0.1",
        "--port",
        "8123",
    )


def test_off_value_renders_nothing(space_dict, write_space) -> None:
    space = load_space(write_space(space_dict))
    assert "--long-prefill-token-threshold" not in render_engine_config(space, {}).args
    cfg = render_engine_config(space, {"long_prefill_token_threshold": 4096})
    assert cfg.args[cfg.args.index("--long-prefill-token-threshold") + 1] == "4096"


def test_param_replaces_base_flag_in_place(space_dict, write_space) -> None:
    space_dict["base"]["args"]["max-num-seqs"] = 8
    cfg = render_engine_config(load_space(write_space(space_dict)), {"max_num_seqs": 64})
    assert cfg.args.count("--max-num-seqs") == 1
    assert cfg.args[cfg.args.index("--max-num-seqs") + 1] == "64"


def spec_space(space_dict):
    space_dict["base"]["args"]["speculative-config"] = {"prompt_lookup_max": 4}
    space_dict["parameters"]["spec_method"] = {
        "type": "categorical",
        "choices": ["ngram", "suffix"],
        "default": "ngram",
        "json": {"flag": "--speculative-config", "key": "method"},
    }
    space_dict["parameters"]["k"] = {
        "type": "int",
        "low": 0,
        "high": 5,
        "default": 0,
        "unset": 0,
        "json": {"flag": "--speculative-config", "key": "num_speculative_tokens"},
    }
    return space_dict


def test_json_flag_merges_base_and_params(space_dict, write_space) -> None:
    space = load_space(write_space(spec_space(space_dict)))
    cfg = render_engine_config(space, {"spec_method": "suffix", "k": 3})
    value = json.loads(cfg.args[cfg.args.index("--speculative-config") + 1])
    assert value == {"prompt_lookup_max": 4, "method": "suffix", "num_speculative_tokens": 3}


def test_json_flag_left_out_when_a_member_is_unset(space_dict, write_space) -> None:
    space = load_space(write_space(spec_space(space_dict)))
    a = render_engine_config(space, {"spec_method": "suffix", "k": 0})
    b = render_engine_config(space, {"spec_method": "ngram", "k": 0})
    assert "--speculative-config" not in a.args
    assert a.fingerprint() == b.fingerprint()


def test_bool_base_args_and_render_map(space_dict, write_space) -> None:
    space_dict["base"]["args"]["enable-prefix-caching"] = False
    space_dict["parameters"]["async_scheduling"] = {
        "type": "categorical",
        "choices": ["auto", "on", "off"],
        "default": "auto",
        "unset": "auto",
        "flag": "--async-scheduling",
        "render": {"on": ["--async-scheduling"], "off": ["--no-async-scheduling"]},
    }
    space = load_space(write_space(space_dict))
    assert "--no-enable-prefix-caching" in render_engine_config(space, {}).args
    off = render_engine_config(space, {"async_scheduling": "off"}).args
    assert "--no-async-scheduling" in off and "--async-scheduling" not in off
    assert "--async-scheduling" not in render_engine_config(space, {}).args


def test_secret_env_redacted(space_dict, write_space, monkeypatch) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    space_dict["engine"]["pass_env"] = ["HF_TOKEN"]
    space_dict["base"]["env"] = {"MY_API_KEY": "k-123", "PLAIN": "x"}
    cfg = render_engine_config(load_space(write_space(space_dict)), {})
    assert cfg.env["HF_TOKEN"] == "hf_secret_value"
    public = cfg.public_env()
    assert public["HF_TOKEN"] == public["MY_API_KEY"] == "<redacted>"
    assert public["PLAIN"] == "x"
    text = cfg.shell_command() + cfg.fingerprint()
    assert "hf_secret_value" not in text and "k-123" not in text


def test_env_values_are_strings(space_dict, write_space) -> None:
    space_dict["parameters"]["buf"] = {
        "type": "categorical",
        "choices": [200, 1024],
        "default": 200,
        "env": "HCCL_BUFFSIZE",
    }
    cfg = render_engine_config(load_space(write_space(space_dict)), {"buf": 1024})
    assert cfg.env["HCCL_BUFFSIZE"] == "1024"


def test_yaml_on_off_words_still_render(write_space) -> None:
    # YAML 1.1 reads bare on/off as booleans, in choices and in render keys alike.
    text = """
engine: {name: vllm, version: "0.17.1", model: m}
target: {kind: sim}
parameters:
  async_scheduling:
    type: categorical
    choices: [auto, on, off]
    default: auto
    unset: auto
    flag: --async-scheduling
    render: {on: [--async-scheduling], off: [--no-async-scheduling]}
workload:
  dataset: {kind: random, input_len: 100, output_len: 10}
  num_prompts: 2
  tiers: [1]
"""
    space = load_space(write_space(text))
    assert "--no-async-scheduling" in render_engine_config(space, {"async_scheduling": False}).args
    assert "--async-scheduling" in render_engine_config(space, {"async_scheduling": True}).args


def test_credential_flag_values_never_written(space_dict, write_space) -> None:
    space_dict["base"]["args"]["api-key"] = "sk-live-123"
    cfg = render_engine_config(load_space(write_space(space_dict)), {})
    assert "sk-live-123" in cfg.argv  # the engine still gets it
    written = cfg.shell_command() + cfg.fingerprint() + " ".join(cfg.public_argv())
    assert "sk-live-123" not in written and "--api-key '<redacted>'" in cfg.shell_command()
