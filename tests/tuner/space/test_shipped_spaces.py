"""Every shipped space loads, and sets the limits a serving engineer would set by default."""

from __future__ import annotations

from pathlib import Path

import pytest

from tuner.space import load_space

SPACES = sorted((Path(__file__).resolve().parents[3] / "search_spaces").glob("*.yaml"))
TTFT = {"p99_ttft_ms", "median_ttft_ms", "mean_ttft_ms", "p90_ttft_ms", "ttft"}


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.stem)
def test_every_tier_has_a_ttft_limit(path: Path) -> None:
    """Without one, a config could win a tier by keeping users waiting for their first token
    (or, holding users back, could not win it at all)."""
    space = load_space(path)
    bare = [
        t
        for t in space.workload.tiers
        if not any(s.metric in TTFT and s.max is not None and s.applies_to(t) for s in space.slos)
    ]
    assert not bare, f"{path.name}: tiers without a TTFT limit: {bare}"


@pytest.mark.parametrize("path", SPACES, ids=lambda p: p.stem)
def test_a_pick_must_keep_most_of_the_tiers_throughput(path: Path) -> None:
    assert load_space(path).study.throughput_floor >= 0.5
