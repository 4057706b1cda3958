"""How ``tune run`` ends: a study stopped by infrastructure faults is no success."""

from __future__ import annotations

import copy
import socket
from pathlib import Path

import pytest

from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.cli import main


def test_infrastructure_stop_exits_non_zero_naming_the_last_fault(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}"  # bound, never listening
        space = copy.deepcopy(SMALL_SPACE)
        space["target"] = {"kind": "endpoint", "url": url}
        space["parameters"], space["rules"], space["base"] = {}, [], {}
        space["study"]["ready_timeout_s"] = 0.3
        path = write_yaml(tmp_path / "down.yaml", space)
        code = main(["run", "--space", str(path), "--results-dir", str(tmp_path / "r")])
    captured = capsys.readouterr()
    assert code == 1
    assert "stopping: 3 infrastructure failures in a row" in captured.out
    last = captured.err.strip().splitlines()[-1]
    assert last.startswith("error: ") and "0 of" in last and "3 infrastructure failures" in last
    assert "ConnectError" in last and url in last  # what to fix: the last fault's reason
