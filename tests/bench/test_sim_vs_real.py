"""The cpu profile's calibration bench: its fit, its held-out tables and its profile writer (the
real engines it measures run only when the bench is run)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from bench import profile_fit as fit
from bench import sim_vs_real as svr
from bench import sim_vs_real_runs as runs
from bench import sim_vs_real_table as table
from tuner.errors import TunerError
from tuner.space import load_space


def test_nelder_mead_finds_the_minimum_of_a_bowl() -> None:
    target = np.array([0.3, -1.2, 2.0])
    best = fit.nelder_mead(lambda x: float(np.sum((x - target) ** 2)), np.zeros(3), 400)
    assert best == pytest.approx(target, abs=1e-2)


def held(tpot: float, thr: float) -> dict[str, float]:
    return {"median_tpot_ms": tpot, "output_throughput": thr}


def test_held_out_rows_and_their_ranks() -> None:
    real = {"a": {"2": held(10.0, 100.0)}, "b": {"2": held(20.0, 50.0)}, "c": {"2": held(5, 9)}}
    predicted = {"a": {"2": held(11.0, 90.0)}, "b": {"2": held(18.0, 60.0)}, "c": {"2": {}}}
    rows = table.held_rows(predicted, real)
    assert {(r["config"], r["metric"]): round(r["error"], 3) for r in rows} == {
        ("a", "median_tpot_ms"): 0.1,
        ("a", "output_throughput"): -0.1,
        ("b", "median_tpot_ms"): -0.1,
        ("b", "output_throughput"): 0.2,
    }  # c was not predicted: no row, rather than a made-up error
    ranks = {r["metric"]: r["configs"] for r in table.rank_rows(rows)}
    assert ranks["median_tpot_ms"] == 2


def base_profile() -> dict[str, Any]:
    return yaml.safe_load(runs.PROFILE.read_text())


def test_the_predictor_ties_the_dense_layers_to_the_mlp_and_caps_fractions(tmp_path: Path) -> None:
    pred = fit.Predictor(load_space(runs.SPACE), base_profile(), tmp_path)
    assert "overheads.dense_eff" not in pred.paths  # set from the MLP's, not fitted on its own
    x = pred.start()
    x[pred.paths.index("speculative.ngram.acceptance")] = np.log(3.0)
    profile = pred.profile(x)
    assert fit.get_factor(profile, "speculative.ngram.acceptance") == 1.0
    gemm = fit.get_factor(profile, "moe_backends.dense_mlp.gemm_eff")
    assert fit.get_factor(profile, "overheads.dense_eff") == gemm


def test_the_simulated_engine_reports_what_the_fit_compares(tmp_path: Path) -> None:
    pred = fit.Predictor(load_space(runs.SPACE), base_profile(), tmp_path)
    figures = pred.run(pred.start(), "long", {"num_speculative_tokens": 2})
    assert sorted(figures) == ["1", "4"]
    assert set(runs.FIT_KEYS) <= set(figures["1"])  # the server's acceptance rate included
    assert fit.log_errors(figures, figures) == [0.0] * (2 * len(runs.FIT_KEYS))


def test_writing_the_profile_changes_only_the_fitted_values_and_keeps_comments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    original = runs.PROFILE.read_text()
    copy = tmp_path / "cpu.yaml"
    copy.write_text(original)
    monkeypatch.setattr(fit, "PROFILE", copy)
    values = {"overheads.sched_ms": 7.25, "speculative.ngram.acceptance": 0.5}
    fit.write_profile(values)
    written = copy.read_text()
    assert yaml.safe_load(written) == fit.set_factors(yaml.safe_load(original), values)
    comments = [line.split("#", 1)[1] for line in original.splitlines() if "#" in line]
    assert [line.split("#", 1)[1] for line in written.splitlines() if "#" in line] == comments


def test_the_fit_leaves_out_calibration_configs_a_sitting_lacks(tmp_path: Path) -> None:
    pred = fit.Predictor(load_space(runs.SPACE), base_profile(), tmp_path)
    figures = pred.run(pred.start(), "long", {})
    calls = pred.calls
    best = fit.fit(pred, {"calibration": {"defaults/long": figures}}, evals=3)
    assert len(best) == len(pred.paths)
    evaluations = pred.calls - calls
    assert 0 < evaluations <= len(pred.paths) + 6  # one simulated config per evaluation, not six


def test_offline_fits_and_judges_on_the_stored_sittings_without_a_real_engine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def no_engine(*args: object) -> None:
        raise AssertionError("offline measured a real engine")

    monkeypatch.setattr(svr, "measure_all", no_engine)
    sittings = sorted((runs.ROOT / "bench" / "sim_vs_real_sittings").glob("*.json"))
    argv = ["--offline", "--evals", "1", "--out", str(tmp_path), "--measured", *map(str, sittings)]
    assert svr.main(argv) == 0
    out = capsys.readouterr().out
    assert f"fitted factors (from the calibration configs only, {len(sittings)} sittings)" in out
    assert "overheads.eager_token_us" in out and "CPU_ATTN.varlen_decode_rows" in out
    held = json.loads((tmp_path / "held_out.json").read_text())
    assert {r["config"] for r in held["rows"]} == {label for label, _ in runs.HELD_OUT}
    with pytest.raises(TunerError, match="--offline needs the sittings"):
        svr.main(["--offline", "--out", str(tmp_path)])
