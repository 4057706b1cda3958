"""A short study end to end against the real ``llama-server``: tune run, export, re-measure.

The shipped space (search_spaces/llamacpp_cpu.yaml) is run as is except for what makes it short:
the small model, 6 requests of 16 tokens per tier, tiers 1 and 4, 3 trials. Then the bench
script measures the top tier's recommendation against the defaults on fresh servers.
"""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import yaml

from tests.scripts._llama import build_llama_server, free_port, load_script

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]

ROOT = Path(__file__).resolve().parents[2]
SPACE = ROOT / "search_spaces" / "llamacpp_cpu.yaml"
PROMPTS, OUTPUT_LEN, TIERS = 6, 16, [1, 4]


@pytest.fixture(scope="module")
def short_space(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shipped space, pointed at a small model and a cached binary, with a short workload."""
    root = tmp_path_factory.mktemp("llamacpp")
    gguf: ModuleType = load_script("make_gguf_model")
    model = gguf.write_model(root / "small.gguf", gguf.Shape(**gguf.PRESETS["small"]), 0)
    space: dict[str, Any] = yaml.safe_load(SPACE.read_text())
    space["engine"].update(
        model=str(model),
        command=[str(build_llama_server()), "--model", "{model}"],
        port=free_port(),
    )
    space["workload"].update(num_prompts=PROMPTS, warmup=1, tiers=TIERS, request_timeout_s=60)
    space["workload"]["dataset"].update(input_len=32, output_len=OUTPUT_LEN)
    space["study"].update(name="llamacpp_short", trials=3)
    # The shipped limits are sized for its workload on a quiet machine; this test checks the
    # loop end to end, so its limits only rule out a server that stopped answering.
    space["slos"] = [{"metric": "p99_ttft_ms", "max": 60_000}]
    path = root / "llamacpp_short.yaml"
    path.write_text(yaml.safe_dump(space, sort_keys=False))
    return path


def _run(*argv: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [sys.executable, *argv], cwd=cwd, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{argv} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done


def test_short_study_then_recommendation_vs_default(short_space: Path) -> None:
    results = short_space.parent / "results"
    out = _run(
        "-m",
        "tuner",
        "run",
        "--space",
        str(short_space),
        "--objective",
        "p99_tpot",
        "--trials",
        "3",
        "--results-dir",
        str(results),
        cwd=ROOT,
        timeout=900,
    ).stdout
    study = results / "llamacpp_short"
    assert "recommended config per concurrency tier" in out

    rows = list(csv.DictReader((study / "trials.csv").open()))
    # The search's own trials: not a confirmation, nor a pick launched with knobs put back.
    explored = [r for r in rows if not r.get("confirm_of") and not r.get("revert_of")]
    assert [r["state"] for r in explored].count("COMPLETE") == 3
    # The leaders were launched again on fresh servers to measure their spread.
    assert any(r.get("confirm_of") and r["state"] == "COMPLETE" for r in rows)
    # Any other trial failed for the infrastructure (a loaded machine) and was run again.
    assert all(r["state"] == "COMPLETE" or "infrastructure" in r["failure"] for r in rows)
    (first,) = [r for r in explored if r["baseline"] == "True" and r["state"] == "COMPLETE"]
    trial_dir = study / "trials" / f"{int(first['trial']):04d}"
    baseline = json.loads((trial_dir / "engine.json").read_text())
    assert baseline["argv"][1:] == [
        "--model",
        str(yaml.safe_load(short_space.read_text())["engine"]["model"]),
        "--alias",
        "rand-llama",
        "--metrics",
        "--ctx-size",
        "4096",
        "--host",
        "127.0.0.1",
        "--port",
        baseline["argv"][-1],
    ]  # the baseline is llama-server as its users start it: no tuned flag rendered
    for tier in TIERS:
        bench = json.loads((trial_dir / f"bench_c{tier}.json").read_text())
        assert bench["completed"] == PROMPTS and bench.get("failed", 0) == 0
        assert bench["total_output_tokens"] == PROMPTS * OUTPUT_LEN  # exact lengths, no early EOS
    assert "llama_server" in (trial_dir / "engine.log").read_text()

    recs = json.loads((study / "recommendations.json").read_text())
    assert recs["objective"] == "p99_tpot"
    assert {r["concurrency"] for r in recs["tiers"]} == set(TIERS)
    top = next(r for r in recs["tiers"] if r["concurrency"] == max(TIERS))
    assert top["trial"] is not None and top["value"] >= 0

    table = _run(
        "-m",
        "bench.llamacpp_recommendation",
        "--space",
        str(short_space),
        "--results",
        str(study),
        "--repeats",
        "1",
        cwd=ROOT,
        timeout=600,
    ).stdout
    assert f"tier {max(TIERS)}: recommended" in table
    assert any(line.startswith("p99_tpot_ms") for line in table.splitlines())
    assert "run failed" not in table
