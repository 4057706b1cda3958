"""The quality floor: a config answering below it is recorded, marked, and never a pick."""

from __future__ import annotations

import numpy as np
from optuna.study import StudyDirection

from objectives.objective import get_objective
from tests.tuner.score.test_recommend import Trials
from tuner.samplers.observed import Observed
from tuner.score.eligible import Policy
from tuner.score.quality import Gate, judge, score_ratio
from tuner.score.recommend import recommend
from tuner.score.tiers import build_tiers

P99 = get_objective("p99_tpot")
BASE = [[1, 2, 3, 4], [5, 6, 7, 8]]
CHANGED = [[1, 2, 9, 9], [5, 6, 7, 8]]  # one probe of two differs from token 2 on: 75% tokens


def study(changed_c1: float = 10.0) -> tuple[Trials, int, int]:
    t = Trials()
    t.add(8192, 30.0, 100.0, baseline=True, answers=BASE, tput=100.0)
    lossy = t.add(131072, changed_c1, 50.0, answers=CHANGED, tput=120.0)
    same = t.add(32768, 20.0, 80.0, answers=BASE, tput=110.0)
    return t, lossy, same


def test_a_config_below_the_floor_is_not_a_pick_but_a_front_point_marked_so() -> None:
    t, lossy, same = study()
    policy = Policy(gate=Gate(on=True, floor=0.9))
    c1, _ = recommend(t.all, P99, [1, 8], policy)
    assert c1.trial == same  # the faster config answers otherwise
    assert c1.quality is not None and c1.quality["agreement"]["identical"] == 2
    assert "1 answered below the quality floor (90%)" in c1.choice
    tier = build_tiers(t.all, [c1], P99, policy)[0]
    point = tier.point(lossy)
    assert point is not None and point.lower_quality and not point.eligible
    assert point.quality.agreement is not None and point.quality.agreement.tokens == 0.75
    assert lossy in tier.front and same in tier.front


def test_a_floor_below_its_agreement_lets_it_be_the_pick() -> None:
    t, lossy, _ = study()
    c1, _ = recommend(t.all, P99, [1, 8], Policy(gate=Gate(on=True, floor=0.7)))
    assert c1.trial == lossy
    assert c1.quality is not None and c1.quality["agreement"]["tokens"] == 0.75


def test_without_the_gate_agreement_is_recorded_and_gates_nothing() -> None:
    t, lossy, _ = study()
    c1, _ = recommend(t.all, P99, [1, 8], Policy(gate=Gate(on=False, floor=0.99)))
    assert c1.trial == lossy and c1.quality is not None
    assert c1.quality["lower_quality"] is False


def test_the_exact_measure_reads_identical_probes() -> None:
    t, lossy, same = study()
    exact = Policy(gate=Gate(on=True, floor=0.6, measure="exact"))
    assert recommend(t.all, P99, [1, 8], exact)[0].trial == same  # 1 of 2 identical: 0.5
    tokens = Policy(gate=Gate(on=True, floor=0.6))
    assert recommend(t.all, P99, [1, 8], tokens)[0].trial == lossy  # 75% of the tokens
    half = Policy(gate=Gate(on=True, floor=0.5, measure="exact"))
    assert recommend(t.all, P99, [1, 8], half)[0].trial == lossy


def test_a_command_score_is_read_relative_to_the_baselines() -> None:
    t = Trials()
    t.add(8192, 30.0, 100.0, baseline=True, answers=BASE, quality_score=0.80)
    worse = t.add(131072, 10.0, 50.0, answers=BASE, quality_score=0.60)  # 0.75 of it
    ok = t.add(32768, 20.0, 80.0, answers=CHANGED, quality_score=0.79)
    gate = Gate(on=True, floor=0.95, scored=True)
    c1, _ = recommend(t.all, P99, [1, 8], Policy(gate=gate))
    assert c1.trial == ok  # its probes differ, but the score is what the floor reads
    assert c1.quality is not None and c1.quality["score_ratio"] == 0.79 / 0.80
    assert worse != ok


def test_score_ratio_for_an_error_rate_and_a_zero_baseline() -> None:
    assert score_ratio(0.1, 0.2, higher_is_better=False) == 2.0
    assert score_ratio(0.4, 0.2, higher_is_better=False) == 0.5
    assert score_ratio(0.0, 0.0, higher_is_better=True) == 1.0
    assert score_ratio(None, 0.5, higher_is_better=True) is None


def test_unmeasured_answers_are_never_below_the_floor() -> None:
    q = judge(None, None, (BASE, None), Gate(on=True, floor=1.0))
    assert q.value is None and not q.below and q.words() == "not measured"


def test_the_sampler_learns_a_lower_quality_trial_as_a_failure_at_every_tier() -> None:
    t, lossy, same = study()
    frozen = t.all
    frozen[lossy].set_constraint("quality", 0.2)  # what the run loop stores below the floor
    for trial in frozen:
        trial.user_attrs["tier_ok"] = {"1": True, "8": True}
    directions = [StudyDirection.MINIMIZE] * 2
    seen = Observed(frozen, directions, 0, [1, 8])
    assert not seen.ok_at[lossy].any()
    assert seen.ok_at[same].all() and np.isfinite(seen.y[same]).all()
