"""The recommendations as a plain-text table (``recommendations.txt`` and ``tune show``) and
as data (``recommendations.json``).

One row per tier: the pooled best config beside the baseline, each ``mean ±std (n launches)``,
the gain, the verdict and how its answers agree with the baseline's (``tuner.score.quality``),
the pick's smoothness beside its TPOT (P99 ITL and the longest inter-token gap, ms) and its
P99 TTFT (ms); then each tier's settings, each knob changed from the engine's default with how
its effect was measured (``tuner.score.evidence``), and why each pick was made. Where the
objective is a percentile, each figure is followed by what it rests on per launch: ``max of 60``
below 100 values for a p99 (``objectives.tails``), else ``n=250``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from objectives.objective import Objective, front_axes
from objectives.tails import percentile, rests_on
from tuner.score.recommend import TierRecommendation
from tuner.storage.results import json_text
from tuner.storage.study_data import StudyData


def format_recommendations(recs: Sequence[TierRecommendation], objective: Objective) -> str:
    """A plain-text table: one row per tier, pooled best vs baseline, then each tier's settings.

    Values read ``mean ±std (n launches)``; the verdict says whether the gain beats the noise.
    A percentile objective is followed by what it rests on per launch (``max of 60``).
    """
    tail = percentile(objective.key)
    head = _line(_head(objective), tail)
    lines = [head, "-" * len(head)]
    lines += [_line(_cells(r, tail), tail) for r in recs]
    lines.append("")
    for r in recs:
        if r.trial is not None:
            settings = ", ".join(f"{k}={v}" for k, v in r.params.items())
            lines.append(f"c{r.concurrency}: {settings}")
            lines += [f"    {k}={n['value']}: {n['words']}" for k, n in r.knobs.items()]
        else:
            lines.append(f"c{r.concurrency}: no feasible trial yet")
    choices = [r.choice for r in recs if r.choice]
    if choices:
        lines += ["", "why each pick:", *choices]
    return "\n".join(lines)


def recommendations_json(data: StudyData, recs: Sequence[TierRecommendation]) -> str:
    """Every tier's recommendation with every figure it rests on, and what it traded against."""
    trade_off = front_axes(data.objective, data.against)[1:]
    return json_text(
        {
            "study": data.name,
            "objective": data.objective.name,
            "trade_off": [o.name for o in trade_off],
            "tiers": [r.to_json() for r in recs],
        }
    )


_WIDTHS = {
    "tier": ">6",
    "trial": ">5",
    "value": ">22",
    "rests": "<9",
    "baseline": ">18",
    "base_rests": "<9",
    "gain": ">7",
    "verdict": "<18",
    "median_tpot": ">11",
    "p99_itl": ">8",
    "max_gap": ">8",
    "p99_ttft": ">9",
    "tput": ">9",
    "answers": ">13",
}


def _line(cells: dict[str, str], tail: float | None) -> str:
    # The "rests on" columns only where the objective is a percentile.
    shown = [k for k in _WIDTHS if tail is not None or k not in ("rests", "base_rests")]
    return "  ".join(format(cells[k], _WIDTHS[k]) for k in shown)


def _head(objective: Objective) -> dict[str, str]:
    return {
        "tier": "tier",
        "trial": "trial",
        "value": f"{objective.name} ({objective.unit})",
        "rests": "rests on",
        "baseline": "baseline",
        "base_rests": "rests on",
        "gain": "gain",
        "verdict": "verdict",
        "median_tpot": "median_tpot",
        "p99_itl": "p99_itl",
        "max_gap": "max_gap",
        "p99_ttft": "p99_ttft",
        "tput": "out tok/s",
        "answers": "answers",
    }


def _num(x: float | None, fmt: str = ".1f") -> str:
    return "-" if x is None else format(x, fmt)


def _pooled_cell(value: float | None, std: float | None, n: int) -> str:
    if value is None:
        return "-"
    if std is None:
        return f"{value:.1f} (1)"
    return f"{value:.1f} ±{std:.1f} ({n})"


def _rests(tail: float | None, n: int | None) -> str:
    return "-" if tail is None or n is None else rests_on(tail, n)


def _cells(r: TierRecommendation, tail: float | None) -> dict[str, str]:
    return {
        "tier": f"c{r.concurrency}",
        "trial": "-" if r.trial is None else str(r.trial),
        "value": _pooled_cell(r.value, r.spread, len(r.values)),
        "rests": _rests(tail, r.samples),
        "baseline": _pooled_cell(r.baseline_value, r.baseline_spread, len(r.baseline_values)),
        "base_rests": _rests(tail, r.baseline_samples),
        "gain": "-" if r.gain is None else f"{r.gain * 100:+.1f}%",
        "verdict": r.verdict or "-",
        "median_tpot": _num(r.metrics.get("median_tpot_ms")),
        "p99_itl": _num(r.metrics.get("p99_itl_ms")),
        "max_gap": _num(r.metrics.get("max_itl_ms"), ".0f"),
        "p99_ttft": _num(r.metrics.get("p99_ttft_ms"), ".0f"),
        "tput": _num(r.metrics.get("output_throughput")),
        "answers": agreement_cell(r.quality),
    }


def agreement_cell(quality: dict[str, Any] | None) -> str:
    """The pick's answers against the baseline's: ``5/8 97.7%`` (identical probes, token
    agreement), the quality command's score ratio after it (``x0.98``); ``-``: not measured."""
    agreed = (quality or {}).get("agreement")
    if not agreed:
        return "-"
    cell = f"{agreed['identical']}/{agreed['probes']} {agreed['tokens']:.1%}"
    ratio = (quality or {}).get("score_ratio")
    return cell if ratio is None else f"{cell} x{ratio:.2f}"
