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
from collections.abc import Iterable, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np

from bench.ranks import spearman
from tuner.errors import TunerError

Figures = dict[str, dict[str, dict[str, float]]]  # config -> tier -> metric -> value
Rows = list[dict[str, Any]]
# Rounds of alternating means fitting the sittings' speeds: the shifts settle within a
# thousandth in a few dozen when every sitting shares a config with another.
SPEED_ROUNDS = 200
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
    """Per part, config, tier and metric, the geometric mean over every pass that has it, at
    the sittings' common speed.

    Sittings ran on machines (or machine states) of different speed: one sitting's real engine
    served everything up to 1.7x faster than another's. A config that some sittings lack would
    otherwise carry the speed of the sittings that hold it into the pool. Each sitting's speed
    per metric is estimated from the configs it shares with the others (least squares on log
    figures: a level per config and tier, a shift per sitting); a config measured in every
    sitting pools to its plain geometric mean.
    """
    observed = _observations(sittings)
    out: dict[str, Figures] = {part: {} for part in PASSES}
    for metric in sorted({m for _, _, m, _ in observed}):
        logs = [(i, item, float(np.log(v))) for i, item, m, v in observed if m == metric]
        for (part, key, tier), level in _levels(logs, len(sittings)).items():
            out[part].setdefault(key, {}).setdefault(tier, {})[metric] = float(np.exp(level))
    return out


Item = tuple[str, str, str]  # pooled part, config, tier


def _observations(sittings: Sequence[dict[str, Any]]) -> list[tuple[int, Item, str, float]]:
    """Every figure of every pass: (sitting, item, metric, value)."""
    return [
        (i, (part, key, tier), metric, v)
        for i, sitting in enumerate(sittings)
        for part, names in PASSES.items()
        for name in names
        for (key, tier, metric), v in _flat(sitting.get(name, {}))
    ]


def _levels(logs: list[tuple[int, Item, float]], n: int) -> dict[Item, float]:
    """Each item's log level, fitted with a log shift per sitting (alternating means), at the
    sittings' mean shift: log figure = level + shift."""
    shift = np.zeros(n)
    level: dict[Item, float] = {}
    for _ in range(SPEED_ROUNDS):
        level = _means((item, y - shift[i]) for i, item, y in logs)
        by_sitting = _means((i, y - level[item]) for i, item, y in logs)
        shift = np.array([by_sitting.get(i, 0.0) for i in range(n)])
    centre = float(np.mean([shift[i] for i in {i for i, _, _ in logs}]))
    return {item: v + centre for item, v in level.items()}


def _means(pairs: Iterable[tuple[Any, float]]) -> dict[Any, float]:
    sums: dict[Any, list[float]] = {}
    for key, value in pairs:
        sums.setdefault(key, []).append(value)
    return {key: float(np.mean(v)) for key, v in sums.items()}


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
