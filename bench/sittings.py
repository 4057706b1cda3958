"""Real figures of bench/sim_vs_real.py from one or more sittings, and how far they agree.

A sitting is one ``measured.json``: per part (``calibration``, ``calibration_after``,
``held``, ``again``), config, tier and metric, one real engine's figure. On two shared cores
the same config lands up to a third apart on two fresh engines, so one sitting ranks close
configs partly by chance. Pooling several sittings (the geometric mean of every pass of a
config) is what the profile is fitted to and judged against; how well the real engine ranks
the held-out configs against itself, sitting against sitting, is the most any profile can be
expected to reach against one of them.

A sitting completed from an earlier one (``--measured``: the last sitting given is completed
with what it lacks and written whole) carries that one's figures verbatim. Those are one
measurement, not two: ``distinct`` keeps each config's figures in the first sitting that holds
them, so pooling, the drift, the spread and the self-agreement count every engine once.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from bench.ranks import spearman
from tuner.errors import TunerError

Figures = dict[str, dict[str, dict[str, float]]]  # config -> tier -> metric -> value
Rows = list[dict[str, Any]]
# Each pooled part and the parts of a sitting that are passes of it.
PASSES = {
    "calibration": ("calibration", "calibration_after"),
    "held": ("held",),
    "again": ("again",),
}


def read_sitting(path: Path) -> dict[str, Any]:
    """One sitting's figures (a ``measured.json``), or one line saying why not."""
    try:
        data = json.loads(path.read_text())
    except OSError as err:
        raise TunerError(f"cannot read {path} ({err.strerror})") from None
    except json.JSONDecodeError as err:
        raise TunerError(f"{path} is not a measured.json: {err}") from None
    if not isinstance(data, dict) or not set(data) <= {*PASSES, "calibration_after"}:
        raise TunerError(f"{path} is not a measured.json: parts {sorted(data)}")
    return data


def distinct(sittings: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The sittings with every config's figures a previous sitting already holds (the same
    part, config and figures: carried over, not measured again) left out of the later ones."""
    seen: set[str] = set()
    out = []
    for sitting in sittings:
        kept: dict[str, Any] = {}
        for part, configs in sitting.items():
            for key, tiers in configs.items():
                mark = json.dumps([part, key, tiers], sort_keys=True)
                if mark not in seen:
                    seen.add(mark)
                    kept.setdefault(part, {})[key] = tiers
        out.append(kept)
    return out


def pool(sittings: Sequence[dict[str, Any]]) -> dict[str, Figures]:
    """Per part, config, tier and metric, the geometric mean over every pass that has it."""
    out: dict[str, Figures] = {}
    for part, names in PASSES.items():
        seen: dict[tuple[str, str, str], list[float]] = {}
        for sitting in sittings:
            for name in names:
                for (key, tier, metric), v in _flat(sitting.get(name, {})):
                    seen.setdefault((key, tier, metric), []).append(v)
        figures: Figures = {}
        for (key, tier, metric), values in seen.items():
            gm = values[0] if len(values) == 1 else float(np.exp(np.mean(np.log(values))))
            figures.setdefault(key, {}).setdefault(tier, {})[metric] = gm
        out[part] = figures
    return out


def _flat(figures: Figures) -> list[tuple[tuple[str, str, str], float]]:
    return [
        ((key, tier, metric), float(v))
        for key, tiers in figures.items()
        for tier, metrics in tiers.items()
        for metric, v in metrics.items()
        if v and v > 0
    ]


def drift_rows(sittings: Sequence[dict[str, Any]], shown: Sequence[str]) -> Rows:
    """Per metric, how far the calibration configs moved from their first pass to their
    second within a sitting (median over sittings, configs and tiers)."""
    out = []
    for k in shown:
        ratios = [
            after[k] / first[k] - 1
            for s in sittings
            for key, tiers in s.get("calibration", {}).items()
            for t, first in tiers.items()
            if first.get(k)
            and (after := s.get("calibration_after", {}).get(key, {}).get(t, {})).get(k)
        ]
        if ratios:
            out.append({"metric": k, "drift": float(np.median(ratios)), "runs": len(ratios)})
    return out


def spread_rows(sittings: Sequence[dict[str, Any]], shown: Sequence[str]) -> Rows:
    """Per tier and metric, how far two fresh engines serving the defaults in one sitting
    landed apart (the median over sittings)."""
    apart: dict[tuple[str, str], list[float]] = {}
    for s in sittings:
        first = s.get("held", {}).get("defaults", {})
        again = s.get("again", {}).get("defaults", {})
        for t, metrics in first.items():
            for k in shown:
                if metrics.get(k) and again.get(t, {}).get(k):
                    apart.setdefault((t, k), []).append(abs(again[t][k] / metrics[k] - 1))
    return [
        {"tier": t, "metric": k, "spread": float(np.median(v)), "sittings": len(v)}
        for (t, k), v in apart.items()
    ]


def self_rank_rows(sittings: Sequence[dict[str, Any]], shown: Sequence[str]) -> Rows:
    """Per tier and metric, the rank correlation of the held-out configs between two
    sittings' real figures (the mean over every pair of sittings); none from one sitting."""
    held = [s["held"] for s in sittings if s.get("held")]
    tiers = sorted({t for h in held for c in h.values() for t in c}, key=int)
    out = []
    for tier in tiers:
        for k in shown:
            rhos = [_rank_between(a, b, tier, k) for a, b in combinations(held, 2)]
            rhos = [r for r in rhos if np.isfinite(r)]
            if rhos:
                out.append({"tier": tier, "metric": k, "spearman": float(np.mean(rhos))})
    return out


def _rank_between(a: Figures, b: Figures, tier: str, k: str) -> float:
    common = [c for c in a if a[c].get(tier, {}).get(k) and b.get(c, {}).get(tier, {}).get(k)]
    return spearman([a[c][tier][k] for c in common], [b[c][tier][k] for c in common])
