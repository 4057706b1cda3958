"""tune run on the simulated engine, then the export: the commands start the recommended engine.

The recipe's and commands.md's launches are run through bash (``vllm`` is a recorder on PATH),
then the simulated engine is started with exactly the argv and env bash produced: the settings
it applies must be the ones the recommended trial ran with (its ``engine.json``), knob for knob.
The same command, with ``vllm`` swapped for the simulated engine's HTTP server
(``python -m launchers.sim``, same flags), starts a server that logs those settings and serves.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from launchers.sim import SimLauncher, SimSettings
from launchers.simengine import SimEngine, load_profile
from launchers.simengine.config import SimConfig, resolve
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tests.tuner.export.conftest import deployed
from tests.tuner.export.shell import run_pasted as _run
from tuner.engine import EngineConfig
from tuner.export.dashboard import free_port
from tuner.export.recipe import point_launch
from tuner.run.study import RunOptions, run_study

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    tmp = tmp_path_factory.mktemp("e2e")
    space = {**SMALL_SPACE, "base": {**SMALL_SPACE["base"], "env": {"VLLM_LOGGING_LEVEL": "INFO"}}}
    space_file = write_yaml(tmp / "small.yaml", space)
    opts = RunOptions(space_path=space_file, results_dir=tmp / "results", trials=5)
    run_study(opts, report=lambda _: None)
    return tmp / "results" / "small"


def test_run_writes_every_export_file(study_dir: Path) -> None:
    for name in ("recipe.yaml", "commands.md", "trials.csv", "report.html"):
        assert (study_dir / name).stat().st_size > 0
    for c in SMALL_SPACE["workload"]["tiers"]:
        assert (study_dir / f"pareto_c{c}.csv").exists()


def _stored(study_dir: Path, trial: int) -> dict[str, Any]:
    return dict(json.loads((study_dir / "trials" / f"{trial:04d}" / "engine.json").read_text()))


def test_recipe_points_are_the_measured_launches(study_dir: Path) -> None:
    recipe = yaml.safe_load((study_dir / "recipe.yaml").read_text())
    profile = load_profile("h200x4")
    points = recipe["presets"]["small"]["points"]
    assert sorted(points) == ["c1", "c4"]
    for key, point in points.items():
        launch = point_launch(recipe, "small", key)
        stored = _stored(study_dir, point["trial"])
        assert launch.program == stored["argv"][:3] and launch.env == stored["env"]
        applied = resolve(launch.args, launch.env, profile)
        assert applied == resolve(deployed(stored["argv"][3:]), stored["env"], profile)
        assert point["verified"] is True


def test_pasted_serve_commands_start_the_recommended_settings(
    study_dir: Path, tmp_path: Path
) -> None:
    text = (study_dir / "commands.md").read_text()
    trials = [int(n) for n in re.findall(r"^Trial (\d+)\.", text, flags=re.M)]
    trials.append(int(re.findall(r"^## Baseline \(trial (\d+)\)", text, flags=re.M)[0]))
    blocks = [b for b in re.findall(r"```sh\n(.*?)\n```", text, flags=re.S) if "docker" not in b]
    assert len(blocks) == len(trials) == 3  # c1, c4, then the baseline
    profile = load_profile("h200x4")
    for block, trial in zip(blocks, trials, strict=True):
        got = _run(block, tmp_path, {})
        stored = _stored(study_dir, trial)
        assert got["argv"] == deployed(stored["argv"][1:])  # `vllm` is the recorder's argv[0]
        env = {k: got["env"][k] for k in stored["env"]}
        assert env == stored["env"]
        applied = _start_sim(got["argv"], env, tmp_path / f"t{trial}")
        assert applied == resolve(deployed(stored["argv"][3:]), stored["env"], profile)
        assert applied.max_num_seqs == int(stored["params"]["max_num_seqs"])
        assert applied.max_num_batched_tokens == int(stored["params"]["max_num_batched_tokens"])


def _start_sim(argv: list[str], env: dict[str, str], trial_dir: Path) -> SimConfig:
    """Start the simulated engine with the pasted command's argv/env; what it applied."""
    config = EngineConfig(
        command=("vllm", *argv[:2]), args=tuple(argv[2:]), env=env, model=argv[1], port=8000
    )
    with SimLauncher(SimSettings(profile="h200x4")) as launcher:
        launcher.start(config, trial_dir)
        engine = launcher.wait_ready(10).virtual
        assert isinstance(engine, SimEngine)
        return engine.cfg


SHIM = """#!/bin/sh
# `vllm serve ...` -> the simulated engine's HTTP server with the same flags, on a free port.
exec {python} -m launchers.sim vllm "$@" --port "$SIM_PORT"
"""


def test_pasted_serve_command_starts_the_sim_http_server(study_dir: Path, tmp_path: Path) -> None:
    text = (study_dir / "commands.md").read_text()
    block = next(b for b in re.findall(r"```sh\n(.*?)\n```", text, flags=re.S) if "docker" not in b)
    trial = int(re.findall(r"^Trial (\d+)\.", text, flags=re.M)[0])
    params = _stored(study_dir, trial)["params"]
    (tmp_path / "bin").mkdir()
    shim = tmp_path / "bin" / "vllm"
    shim.write_text(SHIM.format(python=sys.executable))
    shim.chmod(0o755)
    port = free_port()
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "SIM_PORT": str(port)}
    env["PYTHONPATH"] = str(REPO)
    proc = subprocess.Popen(["bash", "-c", block], env=env, stderr=subprocess.PIPE, text=True)
    try:
        lines = _lines_until(proc, "Starting vLLM API server")
        started = next(line for line in lines if "non-default args" in line)
        parsed = ast.literal_eval(started.split("non-default args: ", 1)[1])
        assert parsed["max_num_batched_tokens"] == params["max_num_batched_tokens"]
        assert parsed["max_num_seqs"] == params["max_num_seqs"]
        _wait_healthy(f"http://127.0.0.1:{port}/health")
        body = {"model": "org/model", "prompt": "hello", "max_tokens": 4}
        done = httpx.post(f"http://127.0.0.1:{port}/v1/completions", json=body, timeout=30)
        assert done.status_code == 200 and done.json()["usage"]["completion_tokens"] == 4
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def _wait_healthy(url: str) -> None:
    deadline = time.monotonic() + 30  # uvicorn binds just after the engine's last line
    while True:
        try:
            if httpx.get(url, timeout=2).status_code == 200:
                return
        except httpx.TransportError:
            pass
        assert time.monotonic() < deadline, f"{url} never answered 200"
        time.sleep(0.05)


def _lines_until(proc: subprocess.Popen[str], marker: str) -> list[str]:
    assert proc.stderr is not None
    lines: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError("the engine exited:\n" + "".join(lines))
        lines.append(line)
        if marker in line:
            return lines
    raise AssertionError("the engine did not start in time")
