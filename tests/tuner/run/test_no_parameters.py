"""A space with nothing to tune is one measurement, not a budget of repeats."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from tests.objectives.servers import keyed_server
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.cli import main


@pytest.mark.parametrize("kind", ["sim", "endpoint"])
def test_no_parameters_measures_once_and_stops(
    kind: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_KEY", "sk-1")
    with keyed_server("sk-1") as url:
        space = copy.deepcopy(SMALL_SPACE)
        space["parameters"], space["rules"] = {}, []
        space["study"]["trials"] = 50
        if kind == "endpoint":
            space["engine"]["model"], space["base"] = "m", {}
            space["target"] = {"kind": "endpoint", "url": url, "api_key_env": "TEST_KEY"}
            space["workload"]["dataset"]["vocab_size"] = 500
            # The neighbour here is the suite's other worker, not the engine: the client may
            # lag as on a loaded machine without its tier being refused as client-limited.
            space["workload"]["client_lag_limit_ms"] = 200
        path = write_yaml(tmp_path / "fixed.yaml", space)
        code = main(["run", "--space", str(path), "--results-dir", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert code == 0
    trial_lines = [line for line in out.splitlines() if line.startswith("trial ")]
    assert len(trial_lines) == 1 and "[1/1]" in trial_lines[0]
    assert "duplicate" not in out and "repeated a measured launch" not in out
