"""Real figures of several sittings of the cpu profile's bench: pooled, and how far they agree."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from bench import sittings as st
from tuner.errors import TunerError

SHOWN = ("median_tpot_ms", "output_throughput")


def figs(tpot: float, thr: float) -> dict[str, float]:
    return {"median_tpot_ms": tpot, "output_throughput": thr}


def test_pooling_takes_the_geometric_mean_of_every_pass_of_a_config() -> None:
    one = {
        "calibration": {"d/short": {"1": figs(4.0, 100.0)}},
        "calibration_after": {"d/short": {"1": figs(9.0, 100.0)}},
        "held": {"a": {"2": figs(2.0, 10.0)}},
    }
    two = {
        "calibration": {"d/short": {"1": figs(6.0, 100.0)}},
        "calibration_after": {"d/short": {"1": figs(6.0, 100.0)}},
        "held": {"a": {"2": figs(8.0, 10.0)}},
    }
    pooled = st.pool([one, two])
    assert pooled["calibration"]["d/short"]["1"]["median_tpot_ms"] == pytest.approx(6.0)
    assert pooled["held"]["a"]["2"] == pytest.approx(figs(4.0, 10.0))
    assert pooled["again"] == {}
    alone = st.pool([one])["calibration"]["d/short"]["1"]  # one sitting: its passes' mean
    assert alone == pytest.approx(figs(6.0, 100.0))


def test_a_config_some_sittings_lack_is_pooled_at_the_sittings_common_speed() -> None:
    slow = {"held": {"x": {"2": figs(2.0, 100.0)}, "y": {"2": figs(4.0, 50.0)}}}
    # The same engine on a machine twice as fast, and a config only it measured.
    fast = {
        "held": {"x": {"2": figs(1.0, 200.0)}, "y": {"2": figs(2.0, 100.0)}},
        "calibration": {"z/long": {"1": figs(8.0, 20.0)}},
    }
    pooled = st.pool([slow, fast])
    assert pooled["held"]["x"]["2"] == pytest.approx(figs(2**0.5, 100 * 2**0.5))
    # z measured on the fast machine: at the common speed it is sqrt(2) slower.
    assert pooled["calibration"]["z/long"]["1"] == pytest.approx(
        figs(8.0 * 2**0.5, 20.0 / 2**0.5), rel=1e-3
    )


def test_drift_and_spread_are_read_within_each_sitting() -> None:
    one: dict[str, Any] = {
        "calibration": {"d/short": {"1": figs(4.0, 100.0)}},
        "calibration_after": {"d/short": {"1": figs(5.0, 100.0)}},
        "held": {"defaults": {"2": figs(10.0, 100.0)}},
        "again": {"defaults": {"2": figs(12.0, 100.0)}},
    }
    drift = {r["metric"]: (r["drift"], r["runs"]) for r in st.drift_rows([one], SHOWN)}
    assert drift == {"median_tpot_ms": (pytest.approx(0.25), 1), "output_throughput": (0.0, 1)}
    spread = {r["metric"]: r["spread"] for r in st.spread_rows([one], SHOWN)}
    assert spread == {"median_tpot_ms": pytest.approx(0.2), "output_throughput": 0.0}
    assert st.drift_rows([{"calibration": one["calibration"]}], SHOWN) == []


def test_the_real_engine_ranked_against_itself_between_sittings() -> None:
    a = {"held": {c: {"2": figs(t, 1.0)} for c, t in zip("wxyz", [1, 2, 3, 4], strict=True)}}
    b = {"held": {c: {"2": figs(t, 1.0)} for c, t in zip("wxyz", [1, 2, 4, 3], strict=True)}}
    c = {"held": {c: {"2": figs(t, 1.0)} for c, t in zip("wxyz", [4, 3, 2, 1], strict=True)}}
    rho = {r["metric"]: r["spearman"] for r in st.self_rank_rows([a, b], SHOWN)}
    assert rho["median_tpot_ms"] == pytest.approx(0.8)
    three = {r["metric"]: r["spearman"] for r in st.self_rank_rows([a, b, c], SHOWN)}
    assert three["median_tpot_ms"] == pytest.approx((0.8 - 1.0 - 0.8) / 3)
    assert st.self_rank_rows([a], SHOWN) == []  # one sitting says nothing about itself


def test_a_sitting_completed_from_another_counts_its_carried_figures_once() -> None:
    first = {
        "calibration": {"d/short": {"1": figs(4.0, 100.0)}},
        "held": {c: {"2": figs(t, 1.0)} for c, t in zip("wxyz", [1, 2, 3, 4], strict=True)},
    }
    # Completed from ``first``: its figures verbatim, plus a config measured anew.
    completed = {
        "calibration": {"d/short": {"1": figs(4.0, 100.0)}, "d/long": {"1": figs(9.0, 10.0)}},
        "held": first["held"],
    }
    # Measured anew, ranked otherwise (no figure of it equal to another: real ones never are).
    other = {"held": {c: {"2": figs(t, 1.5)} for c, t in zip("wxyz", [1, 2, 4, 3], strict=True)}}
    kept = st.distinct([first, completed, other])
    assert kept[1] == {"calibration": {"d/long": {"1": figs(9.0, 10.0)}}}
    assert kept[0] == first and kept[2] == other
    pooled = st.pool(kept)
    assert pooled["held"]["z"]["2"]["median_tpot_ms"] == pytest.approx((4 * 3) ** 0.5)
    # The carried copy is no second sitting agreeing perfectly with the first.
    rho = {r["metric"]: r["spearman"] for r in st.self_rank_rows(kept, SHOWN)}
    assert rho["median_tpot_ms"] == pytest.approx(0.8)


def test_a_sitting_that_cannot_be_read_is_one_line_naming_it(tmp_path: Path) -> None:
    with pytest.raises(TunerError, match=r"cannot read .*none\.json"):
        st.read_sitting(tmp_path / "none.json")
    (tmp_path / "other.json").write_text('{"trials": []}')
    with pytest.raises(TunerError, match=r"not a measured\.json"):
        st.read_sitting(tmp_path / "other.json")
    kept = tmp_path / "kept.json"
    kept.write_text('{"held": {"a": {"2": {"median_tpot_ms": 3.0}}}}')
    assert st.read_sitting(kept)["held"]["a"]["2"]["median_tpot_ms"] == 3.0
