"""``tune run`` end to end with a docker target: the simulated engine served from containers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.launchers.docker_env import PYTHON, ROOT, mounts, ours
from tests.launchers.helpers import free_port

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_tune_run_restarts_a_container_per_trial(
    docker_client: Any, tmp_path: Path, study: str
) -> None:
    space = yaml.safe_load((ROOT / "search_spaces/sim_docker.yaml").read_text())
    # The example's mounts name this project's machines; point them at this run's paths.
    space["target"]["volumes"] = mounts()
    space["engine"]["command"] = [PYTHON, *space["engine"]["command"][1:]]
    space["target"]["cache_root"] = str(tmp_path / "cache")
    space["engine"]["port"] = free_port()
    # Restarts are judged here, not timing: the client shares two cores with dockerd and the
    # engine, and a virtual machine wakes its event loop a few ms late even when idle.
    space["workload"]["client_lag_limit_ms"] = 200
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    cli = [
        sys.executable,
        "-m",
        "tuner",
        "run",
        "--space",
        str(path),
        "--trials",
        "2",
        "--study",
        study,
        "--results-dir",
        str(tmp_path / "results"),
    ]
    done = subprocess.run(cli, capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "recommended config per concurrency tier" in done.stdout
    trials = sorted((tmp_path / "results" / study / "trials").iterdir())
    assert len(trials) >= 2
    for trial in trials:
        assert "non-default args" in (trial / "engine.log").read_text()
        assert (trial / "knobs.json").exists()
    assert any((trial / "bench_c4.json").exists() for trial in trials)
    assert ours(docker_client, study) == []
