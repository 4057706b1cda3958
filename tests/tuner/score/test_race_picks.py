"""A tier stopped early (its launch out of contention there) is never a pick or a front point."""

from __future__ import annotations

from objectives.objective import get_objective
from tests.tuner.score.test_recommend import Trials
from tuner.score.eligible import Policy
from tuner.score.recommend import recommend
from tuner.score.tiers import build_tiers

P99 = get_objective("p99_tpot")


def test_a_tier_stopped_early_is_never_the_pick_nor_on_the_front() -> None:
    t = Trials()
    t.add(8192, 30.0, 100.0, baseline=True, tput=100.0)
    full = t.add(32768, 20.0, 90.0, tput=100.0)
    # Its c1 figure rests on 10 of the tier's requests: out of contention, an estimate that
    # reads better than it is. At c8 it was measured in full and may win there.
    cut = t.add(131072, 10.0, 80.0, tput=120.0)
    stored = t.all
    stored[cut].user_attrs["tiers"]["1"]["decided_after"] = 10
    recs = recommend(stored, P99, [1, 8], Policy())
    assert [r.trial for r in recs] == [full, cut]
    tiers = build_tiers(stored, recs, P99, Policy())
    assert cut not in tiers[0].front and full in tiers[0].front
    point = tiers[0].point(cut)
    assert point is not None and not point.feasible and not point.eligible
