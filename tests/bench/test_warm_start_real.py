"""The real-engine warm-start bench: its truth is the real space's, its priors are simulated
studies of the same space, and a complete table is replayed without launching anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest
import yaml

from bench import warm_start_real as wsr
from bench.sweep import all_points
from tuner.space.schema import Space


def test_the_truth_is_measured_on_the_real_engine_without_the_spaces_slos() -> None:
    space = Space.model_validate(wsr.space_data())
    assert space.target.kind == "process" and space.slos == []
    points = all_points(space)
    assert len(points) == 8 and len({wsr.real_key(space, p) for p in points}) == 8
    assert all(
        "--enforce-eager" in wsr.real_key(space, p) for p in points if p["execution"] == "eager"
    )


def test_the_misleading_profile_gets_drafts_and_eager_backwards(tmp_path: Path) -> None:
    wsr.write_profiles(tmp_path)
    shipped = yaml.safe_load(wsr.PROFILE.read_text())
    assert yaml.safe_load((tmp_path / "cpu_helpful.yaml").read_text()) == shipped
    bad = yaml.safe_load((tmp_path / "cpu_misleading.yaml").read_text())
    assert (
        bad["speculative"]["ngram"]["acceptance"]
        == 0.0
        < shipped["speculative"]["ngram"]["acceptance"]
    )
    assert bad["overheads"]["eager_rest_us"] == 0.0 < shipped["overheads"]["eager_rest_us"]


def _table(space: Space) -> dict[str, dict]:
    """A made-up real table: drafts help, eager costs, a small budget costs a little."""
    table = {}
    for p in all_points(space):
        base = 10.0 * (0.6 if p["num_speculative_tokens"] else 1.0)
        base *= 1.3 if p["execution"] == "eager" else 1.0
        base *= 1.05 if p["max_num_batched_tokens"] == 256 else 1.0
        for r, noise in (("a", 1.0), ("b", 1.01)):
            table[f"{r}|{wsr.real_key(space, p)}"] = {
                "values": [base * noise, 2 * base * noise, 4 * base * noise],
                "constraints": {"rules": 0.0, "engine": 0.0, "failed_requests": 0.0, "slo": 0.0},
                "kind": None,
                "tier_ok": [True, True, True],
            }
    return table


@pytest.mark.slow  # earlier studies and searches: about 5 s
def test_a_complete_table_is_replayed_cold_and_warm(tmp_path: Path) -> None:
    space = Space.model_validate(wsr.space_data())
    path = tmp_path / "truth.json"
    path.write_text(json.dumps(_table(space)))
    args = argparse.Namespace(
        seeds=1, budget=8, prior_budget=3, replicates=2, tolerance=0.03, workers=1, table=path
    )
    text = wsr.run_bench(args)
    assert "truth: 8 configs of the discretised vllm_cpu space on the real vLLM CPU build" in text
    assert "configs within 3% of each tier's best: c1 1 of 8  c4 1 of 8  c16 1 of 8" in text
    for prior in ("helpful", "misleading"):
        assert f"prior {prior}: earlier studies of 3 launches" in text
    rows = [
        line.split()[0]
        for line in text.splitlines()
        if line.strip().startswith(("c1 ", "c4 ", "c16 ", "all "))
    ]
    assert rows == ["c1", "c4", "c16", "all"] * 2
