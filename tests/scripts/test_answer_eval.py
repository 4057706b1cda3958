"""scripts/answer_eval.py: a server's greedy probe answers scored against gold answers."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from tests.launchers.simengine.conftest import sim_server  # noqa: F401 (a fixture)

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "answer_eval.py"


def _run(url: str, gold: Path, *extra: str) -> str:
    cmd = [sys.executable, str(SCRIPT), "--url", url, "--model", "m", "--gold", str(gold), *extra]
    return subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=60).stdout


def test_gold_from_one_server_scores_another(
    sim_server: Callable[..., str],  # noqa: F811
    tmp_path: Path,
) -> None:
    gold = tmp_path / "gold.json"
    auto = sim_server()
    assert "wrote 8 gold answers" in _run(auto, gold, "--write-gold")
    assert len(json.loads(gold.read_text())["answers"]) == 8
    assert _run(auto, gold).split() == ["exact_match:", "1.0000", "token_match:", "1.0000"]
    fp8 = _run(sim_server(["--kv-cache-dtype", "fp8"]), gold).split()
    assert fp8[0] == "exact_match:" and float(fp8[1]) < 1.0
    assert fp8[2] == "token_match:" and float(fp8[3]) < 1.0
