"""--objective as a list: the study optimises the first, each tier's front trades it against
the others, and every reader of the study (tables, show, export) uses that trade."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from objectives.objective import parse_objectives
from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.errors import TunerError
from tuner.export.build import build_export
from tuner.export.show import show_study
from tuner.run.study import RunOptions, run_study
from tuner.storage.study_data import load_study_data


def test_a_list_names_the_objective_then_what_it_is_traded_against() -> None:
    first, rest = parse_objectives("p99_tpot, p99_ttft")
    assert first.key == "p99_tpot_ms" and [o.key for o in rest] == ["p99_ttft_ms"]
    assert parse_objectives("median_tpot")[1] == ()
    for bad in ("", "p99_tpot,", "p99_tpot,p99_tpot", "p99_tpot,nosuch"):
        with pytest.raises(TunerError):
            parse_objectives(bad)


def test_a_study_with_a_pair_trades_those_metrics_everywhere(tmp_path: Path) -> None:
    space = write_yaml(tmp_path / "small.yaml", SMALL_SPACE)
    opts = RunOptions(
        space_path=space, results_dir=tmp_path, trials=4, objective="p99_tpot,p99_ttft"
    )
    recs = run_study(opts, report=lambda _: None).recommendations
    assert all("throughput" not in r.choice or "p99 ttft" in r.choice for r in recs)
    written = json.loads((tmp_path / "small" / "recommendations.json").read_text())
    assert written["objective"] == "p99_tpot" and written["trade_off"] == ["p99_ttft"]
    export = build_export(load_study_data("small", None, tmp_path))
    for t in export.tiers:
        assert [o.key for o in t.tier.axes] == ["p99_tpot_ms", "p99_ttft_ms"]
        assert t.tier.x.key == "p99_ttft_ms" and t.tier.y.key == "p99_tpot_ms"
    assert "objective p99_tpot" in show_study("small", None, tmp_path)
    # A rerun with the objective alone goes back to trading against throughput.
    opts.objective = "p99_tpot"
    run_study(opts, report=lambda _: None)
    export = build_export(load_study_data("small", None, tmp_path))
    assert [o.key for o in export.tiers[0].tier.axes] == ["p99_tpot_ms", "output_throughput"]
