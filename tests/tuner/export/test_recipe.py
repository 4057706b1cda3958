"""recipe.yaml: a recipe preset that loads back into the exact launches that were measured."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import optuna
import yaml

from tests.tuner.conftest import SMALL_SPACE
from tests.tuner.export.conftest import (
    CONFIGS,
    TIERS,
    build_study,
    deployed,
    figures,
    space_dict,
)
from tuner.export import export_study
from tuner.export.configs import flags_dict
from tuner.export.recipe import point_launch

REFERENCE = Path("/work/shared/reference/vllm-recipe-MiniMax-M3.1-Flash.json")


def _load(results: Path) -> dict[str, Any]:
    export_study("hand", None, None, results)
    return dict(yaml.safe_load((results / "hand" / "recipe.yaml").read_text()))


def _stored_launch(
    results: Path, trial: int, name: str = "hand"
) -> tuple[list[str], dict[str, str]]:
    """The argv and env a trial ran with, from the fingerprint the study stored."""
    url = f"sqlite:///{results}/{name}/study.db"
    study = optuna.load_study(study_name=name, storage=url)
    argv_text, _, env_text = study.trials[trial].user_attrs["fingerprint"].partition(" | ")
    env = dict(kv.split("=", 1) for kv in env_text.split(",") if kv)
    return shlex.split(argv_text), env


def test_points_rebuild_the_measured_launch_exactly(hand_results: Path) -> None:
    recipe = _load(hand_results)
    preset = recipe["presets"]["hand"]
    assert sorted(preset["points"]) == sorted(f"c{c}" for c in TIERS)
    for key, point in preset["points"].items():
        launch = point_launch(recipe, "hand", key)
        argv, env = _stored_launch(hand_results, point["trial"])
        assert launch.program == argv[:3]
        want = flags_dict(deployed(argv[3:]))
        assert flags_dict(launch.args) == _idle_at_defaults(want, point)
        assert launch.env == env
        assert point["verified"] is True  # the trial's own launch, as it ran
    # A seat cap of 4 cannot act with at most 4 users: the picks deploy the default.
    assert any(point.get("idle") == {"max_num_seqs": 4} for point in preset["points"].values())


def test_points_carry_figures_baseline_and_gain(hand_results: Path) -> None:
    recipe = _load(hand_results)
    for key, point in recipe["presets"]["hand"]["points"].items():
        c = point["concurrency"]
        assert key == f"c{c}"
        want = figures(*CONFIGS[point["trial"]], c)
        measured = point["measured"]
        for metric in ("median_tpot_ms", "p99_tpot_ms", "p99_ttft_ms", "output_throughput"):
            assert measured[metric] == round(want[metric], 4)
        assert measured["confirmations"] == 1 and measured["spread"] == 0.0
        base = figures(*CONFIGS[0], c)["p99_tpot_ms"]
        assert point["baseline"]["trial"] == 0
        assert point["gain"] == round((base - want["p99_tpot_ms"]) / base, 4)
        assert point["verdict"] in {"unconfirmed", "baseline"}  # one launch per config
        assert point["why"].startswith(f"{key}: trial {point['trial']} ")


def test_shape_follows_the_recipe_presets(hand_results: Path) -> None:
    recipe = _load(hand_results)
    reference = json.loads(REFERENCE.read_text())
    ref_preset = reference["presets"]["gb300_agentx_agg"]
    preset = recipe["presets"]["hand"]
    keys = ("label", "hardware", "strategy", "description", "workload", "image", "tp", "args")
    for key in (*keys, "json_args", "env", "points"):
        assert key in preset and key in ref_preset
    assert preset["hardware"] == "h200"  # read from the space's "simulated 4x H200"
    assert preset["hardware_detail"] == "simulated 4x H200"
    assert preset["strategy"] == "single_node_tep"  # TP4 with expert parallel in every point
    assert preset["image"] == {"vllm": "vllm/vllm-openai:v0.17.1"}  # per engine, as "vllm"
    assert set(reference["model"]["docker_image"]) == {"nvidia", "amd"}
    assert recipe["model"]["docker_image"] == {"nvidia": "vllm/vllm-openai:v0.17.1"}
    assert recipe["model"]["model_id"] == "org/model"
    # shared flags sit once in the preset, never again in a point
    shared = set(flags_dict(preset["args"]))
    assert "--enable-expert-parallel" in shared
    for point in preset["points"].values():
        assert {"label", "description", "concurrency", "args", "env"} <= set(point)
        assert not shared & set(flags_dict(point["args"]))
        assert point["description"].startswith(f"Tuned for {point['concurrency']} ")
        assert point["description"].endswith(f"(verdict: {point['verdict']}).")


def test_one_point_is_the_default_the_highest_tier(hand_results: Path) -> None:
    points = _load(hand_results)["presets"]["hand"]["points"]
    defaults = [key for key, point in points.items() if point.get("default")]
    assert defaults == [f"c{max(TIERS)}"]
    assert list(points[defaults[0]])[:3] == ["label", "description", "default"]


def test_host_and_port_sit_under_serve_never_in_args(hand_results: Path) -> None:
    recipe = _load(hand_results)
    preset = recipe["presets"]["hand"]
    assert set(preset["serve"]) == {"host", "port"}
    for point in [preset, *preset["points"].values()]:
        assert not {"--host", "--port"} & set(flags_dict(point["args"]))
    for key in preset["points"]:
        flags = flags_dict(point_launch(recipe, "hand", key).args)
        assert flags["--host"] == (preset["serve"]["host"],)
        assert flags["--port"] == (str(preset["serve"]["port"]),)


def test_export_is_idempotent(hand_results: Path) -> None:
    first = export_study("hand", None, None, hand_results)
    before = {p.name: p.read_bytes() for p in first.files}
    again = export_study("hand", None, None, hand_results)
    assert {p.name: p.read_bytes() for p in again.files} == before


def test_tensor_parallel_size_is_the_tp_field_not_an_arg(hand_results: Path) -> None:
    recipe = _load(hand_results)
    preset = recipe["presets"]["hand"]
    assert preset["tp"] == 4  # base.args tensor-parallel-size: 4, shared by every point
    assert "--tensor-parallel-size" not in preset["args"]
    for key, point in preset["points"].items():
        assert "tp" not in point and "--tensor-parallel-size" not in point["args"]
        assert flags_dict(point_launch(recipe, "hand", key).args)["--tensor-parallel-size"] == (
            "4",
        )


COMPILATION = {"cudagraph_mode": "FULL_AND_PIECEWISE", "cudagraph_capture_sizes": [1, 2, 4]}
SPECULATIVE = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4}


def test_json_flags_are_mappings_under_json_args(tmp_path: Path) -> None:
    space = space_dict()
    space["base"] = {
        "args": {**space["base"]["args"], "compilation-config": COMPILATION},
        "env": {},
    }
    space["base"]["args"]["speculative-config"] = SPECULATIVE
    build_study(tmp_path, space, name="json")
    export_study("json", None, None, tmp_path)
    recipe = yaml.safe_load((tmp_path / "json" / "recipe.yaml").read_text())
    preset = recipe["presets"]["json"]
    assert preset["json_args"] == {
        "--compilation-config": COMPILATION,
        "--speculative-config": SPECULATIVE,
    }
    for point in [preset, *preset["points"].values()]:
        assert not {"--compilation-config", "--speculative-config"} & set(point["args"])
        assert not any(word.startswith("{") for word in point["args"])
    for key, point in preset["points"].items():
        got = flags_dict(point_launch(recipe, "json", key).args)
        assert json.loads(got["--speculative-config"][0]) == SPECULATIVE
        argv, _ = _stored_launch(tmp_path, point["trial"], "json")
        want = flags_dict(deployed(argv[3:]))  # the measured JSON words, exactly
        assert got == _idle_at_defaults(want, point)


def _idle_at_defaults(flags: dict[str, Any], point: dict[str, Any]) -> dict[str, Any]:
    """The measured flags with each knob that cannot act at the point's tier at its default."""
    out = dict(flags)
    for knob in point.get("idle", {}):
        param = SMALL_SPACE["parameters"][knob]
        out[param["flag"]] = (str(param["default"]),)
    return out
