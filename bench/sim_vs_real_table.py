"""The held-out table of ``bench.sim_vs_real``: predicted against measured per config, tier
and metric, the rank correlations, the run-to-run spread and the sittings' drift."""

from __future__ import annotations

from typing import Any

import numpy as np

from bench.ranks import spearman
from bench.sim_vs_real_runs import SHOWN
from bench.sittings import drift_rows, self_rank_rows, spread_rows


def held_rows(predicted: dict[str, Any], real: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per held-out config, tier and metric: predicted, measured, error."""
    rows = []
    for label, tiers in real.items():
        for tier, metrics in tiers.items():
            for key in SHOWN:
                p, m = predicted[label].get(tier, {}).get(key), metrics.get(key)
                if p is not None and m:
                    rows.append(
                        {
                            "config": label,
                            "tier": tier,
                            "metric": key,
                            "predicted": p,
                            "measured": m,
                            "error": p / m - 1,
                        }
                    )
    return rows


def rank_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per tier and metric, the rank correlation of configs, predicted against measured."""
    out = []
    for tier in sorted({r["tier"] for r in rows}, key=int):
        for key in SHOWN:
            sel = [r for r in rows if r["tier"] == tier and r["metric"] == key]
            rho = spearman([r["predicted"] for r in sel], [r["measured"] for r in sel])
            out.append({"tier": tier, "metric": key, "configs": len(sel), "spearman": rho})
    return out


def render(
    rows: list[dict[str, Any]],
    ranks: list[dict[str, Any]],
    fitted: dict[str, float],
    sittings: list[Any],
) -> str:
    lines = [f"{'config':<15} {'tier':>4} {'metric':<18} {'predicted':>10} {'measured':>10} error"]
    for r in rows:
        lines.append(
            f"{r['config']:<15} {'c' + r['tier']:>4} {r['metric']:<18} {r['predicted']:>10.1f} "
            f"{r['measured']:>10.1f} {r['error']:+6.0%}"
        )
    lines += ["", *error_lines(rows), ""]
    own = {(r["tier"], r["metric"]): r["spearman"] for r in self_rank_rows(sittings, SHOWN)}
    for r in ranks:
        mine = own.get((r["tier"], r["metric"]))
        against = f" (real against itself {mine:+.2f})" if mine is not None else ""
        lines.append(
            f"c{r['tier']:<3} {r['metric']:<18} Spearman {r['spearman']:+.2f} "
            f"over {r['configs']} configs{against}"
        )
    lines += ["", "run to run (the defaults on two fresh engines in one sitting):"]
    spread = spread_rows(sittings, SHOWN)
    lines += [f"c{r['tier']:<3} {r['metric']:<18} {r['spread']:6.0%}" for r in spread]
    drift = drift_rows(sittings, SHOWN)
    lines += ["", "drift of a sitting (calibration configs, second pass against first):"]
    lines += [f"{r['metric']:<18} {r['drift']:+6.0%} median of {r['runs']}" for r in drift]
    lines += ["", f"fitted factors (from the calibration configs only, {len(sittings)} sittings):"]
    lines += [f"  {path} = {value:.4g}" for path, value in sorted(fitted.items())]
    return "\n".join(lines)


def error_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per metric, the median absolute error and how many rows are within its bar."""
    out = []
    for key in SHOWN:
        errs = [abs(r["error"]) for r in rows if r["metric"] == key]
        within = 0.3 if "ttft" in key else 0.2
        ok = sum(e <= within for e in errs)
        out.append(
            f"{key:<18} median |error| {np.median(errs):5.0%}, {ok} of {len(errs)} within "
            f"{within:.0%}"
        )
    return out
