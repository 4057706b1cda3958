"""The parallel-slot bench measures every slot count alike before it quotes a speed-up."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType


def test_rounds_alternate_their_order(ps: ModuleType) -> None:
    assert list(ps.schedule([1, 2, 4], 3)) == [1, 2, 4, 4, 2, 1, 1, 2, 4]


def test_a_run_launches_exactly_its_budget_with_no_confirmations(
    ps: ModuleType, tmp_path: Path
) -> None:
    # One slot: the path that once confirmed its leaders on top of the budget.
    assert ps.run_once(1, 3, 0.0, 0.0, tmp_path / "run") > 0
    assert ps.launches(tmp_path / "run") == 3


def test_the_table_quotes_medians_and_their_range(ps: ModuleType) -> None:
    walls = {1: [80.0, 84.0, 100.0], 4: [22.0, 21.0, 25.0]}
    _, one, four = ps.table(walls, [1, 4], 8)
    assert one.split()[:3] == ["1", "84.0", "80.0-100.0"] and one.split()[-2:] == ["-", "1x"]
    assert four.split() == ["4", "22.0", "21.0-25.0", "21.8", "3.82x", "3.20-4.76x", "4x"]
