"""Per-tier recommendations pool every launch of a config and weigh leads against the noise."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import CategoricalDistribution
from optuna.trial import FrozenTrial, TrialState

from objectives.objective import get_objective
from tests.tuner.conftest import write_yaml
from tuner.export.recommend_table import format_recommendations
from tuner.record.trial import TrialRecord
from tuner.run.study import RunOptions, run_study
from tuner.score.eligible import Policy
from tuner.score.recommend import recommend

P99 = get_objective("p99_tpot")
DIST = {"chunk": CategoricalDistribution([2048, 8192, 32768, 131072])}


class Trials:
    """An in-memory study filled with hand-made finished trials (p99 TPOT per tier)."""

    def __init__(self) -> None:
        self.study = optuna.create_study(directions=["minimize", "minimize"])

    def add(self, chunk: int, c1: float, c8: float, **attrs: Any) -> int:
        feasible = attrs.pop("feasible", True)
        tiers: dict[str, dict[str, Any]] = {"1": {"p99_tpot_ms": c1}, "8": {"p99_tpot_ms": c8}}
        for tier, n in zip(("1", "8"), attrs.pop("samples", ()), strict=False):
            tiers[tier]["tpot_samples"] = n
        if (tput := attrs.pop("tput", None)) is not None:
            tiers["1"]["output_throughput"] = tput
        if (ttft := attrs.pop("ttft", None)) is not None:
            tiers["1"]["p99_ttft_ms"] = ttft
        keys = ("users_held", "num_preemptions", "kv_cache_usage_peak")
        server = {k: attrs.pop(k) for k in keys if k in attrs}
        tiers["1"]["server"] = server
        trial = optuna.trial.create_trial(
            params={"chunk": chunk},
            distributions=DIST,
            values=[c1, c8] if feasible else [float("inf")] * 2,
            user_attrs={"tiers": tiers, "feasible": feasible, **attrs},
            state=TrialState.COMPLETE,
        )
        self.study.add_trial(trial)
        return len(self.study.trials) - 1

    @property
    def all(self) -> list[FrozenTrial]:
        return self.study.get_trials()


def test_launches_of_one_config_are_pooled_and_copies_are_not() -> None:
    t = Trials()
    base = t.add(8192, 30.0, 100.0, baseline=True)
    t.add(8192, 31.0, 104.0, confirm_of=base)
    best = t.add(131072, 20.0, 90.0)
    t.add(131072, 22.0, 86.0, confirm_of=best)
    t.add(131072, 20.0, 90.0, duplicate_of=best)  # a copied measurement, not a launch
    t.add(2048, 1.0, 1.0, failure_kind="rules", feasible=False)
    c1, c8 = recommend(t.all, P99, [1, 8])
    assert c1.trial == best and c1.runs == [best, best + 1]
    assert c1.values == [20.0, 22.0] and c1.value == 21.0
    assert abs(c1.spread - 1.41421356) < 1e-6  # type: ignore[operator]
    assert c1.baseline_runs == [base, base + 1] and c1.baseline_value == 30.5
    assert c8.value == 88.0 and c8.baseline_value == 102.0
    assert c1.noise_cv is not None and c1.noise_cv > 0


def test_a_config_that_misses_one_tiers_slo_is_still_the_answer_at_another() -> None:
    t = Trials()
    t.add(8192, 30.0, 100.0, baseline=True)
    fast_c1 = t.add(131072, 20.0, 80.0, feasible=False, tier_ok={"1": True, "8": False})
    steady = t.add(32768, 25.0, 90.0)
    c1, c8 = recommend(t.all, P99, [1, 8])
    assert c1.trial == fast_c1  # commands.md: "served every request of that tier and met its SLOs"
    assert c8.trial == steady


def test_one_lucky_launch_does_not_outrank_a_confirmed_config() -> None:
    t = Trials()
    base = t.add(8192, 30.0, 100.0, baseline=True)
    t.add(8192, 32.0, 104.0, confirm_of=base)  # with the pair below: 2-3% run-to-run noise
    confirmed = t.add(32768, 20.0, 80.0)
    t.add(32768, 20.4, 81.0, confirm_of=confirmed)
    lucky = t.add(131072, 20.05, 80.2)  # one draw, a hair ahead of the confirmed mean
    c1, c8 = recommend(t.all, P99, [1, 8])
    assert c1.trial == confirmed and c8.trial == confirmed
    t.add(131072, 19.0, 76.0, confirm_of=lucky)  # confirmed well ahead: now it leads
    c1, c8 = recommend(t.all, P99, [1, 8])
    assert c1.trial == lucky and c8.trial == lucky


def test_lead_within_the_noise_is_not_called_better() -> None:
    t = Trials()
    base = t.add(8192, 30.0, 100.0, baseline=True)
    t.add(8192, 31.5, 106.0, confirm_of=base)
    other = t.add(32768, 30.0, 60.0)
    t.add(32768, 28.5, 63.0, confirm_of=other)
    c1, c8 = recommend(t.all, P99, [1, 8])
    assert c1.trial == other and c1.gain is not None and c1.gain > 0
    assert c1.verdict == "within noise"  # 29.25 vs 30.75 with ~5% run-to-run noise
    assert c8.verdict == "better"  # 61.5 vs 103


def test_verdicts_without_repeats_baseline_best_and_baseline_infeasible() -> None:
    t = Trials()
    t.add(8192, 30.0, 100.0, baseline=True)
    t.add(32768, 25.0, 90.0)
    assert [r.verdict for r in recommend(t.all, P99, [1, 8])] == ["unconfirmed"] * 2
    t = Trials()
    base = t.add(8192, 20.0, 100.0, baseline=True)
    t.add(8192, 20.5, 101.0, confirm_of=base)
    t.add(32768, 25.0, 90.0)
    c1, c8 = recommend(t.all, P99, [1, 8])
    assert c1.verdict == "baseline" and c1.gain == 0.0
    assert c8.verdict == "better"
    t = Trials()
    t.add(8192, 20.0, 100.0, baseline=True, feasible=False)
    t.add(32768, 25.0, 90.0)
    assert recommend(t.all, P99, [1])[0].verdict == "baseline infeasible"


def test_config_that_failed_on_a_confirmation_launch_is_not_recommended() -> None:
    t = Trials()
    t.add(8192, 30.0, 100.0, baseline=True)
    flaky = t.add(131072, 10.0, 50.0)
    t.add(131072, 10.0, 50.0, confirm_of=flaky, feasible=False, failure_kind="oom")
    steady = t.add(32768, 25.0, 80.0)
    c1, c8 = recommend(t.all, P99, [1, 8])
    assert c1.trial == steady and c8.trial == steady


def test_table_shows_spread_launches_and_verdict() -> None:
    t = Trials()
    base = t.add(8192, 30.0, 100.0, baseline=True)
    t.add(8192, 32.0, 104.0, confirm_of=base)
    best = t.add(32768, 20.0, 60.0)
    t.add(32768, 22.0, 62.0, confirm_of=best)
    text = format_recommendations(recommend(t.all, P99, [1, 8]), P99)
    assert "21.0 ±1.4 (2)" in text and "31.0 ±1.4 (2)" in text
    assert "better" in text and "c8: chunk=32768" in text
    empty = format_recommendations(recommend([], P99, [1]), P99)
    assert "c1: no feasible trial yet" in empty


def test_a_p99_shows_what_it_rests_on_and_below_100_values_reads_as_their_maximum() -> None:
    t = Trials()
    t.add(8192, 30.0, 100.0, baseline=True, samples=(20, 250))
    best = t.add(32768, 20.0, 60.0, samples=(20, 250))
    t.add(32768, 22.0, 62.0, confirm_of=best, samples=(19, 250))  # pooled as the thinnest
    recs = recommend(t.all, P99, [1, 8])
    assert [(r.samples, r.baseline_samples) for r in recs] == [(19, 20), (250, 250)]
    rows = format_recommendations(recs, P99).splitlines()
    assert "rests on" in rows[0]
    c1, c8 = (next(r for r in rows if r.lstrip().startswith(f"c{c} ")) for c in (1, 8))
    assert "21.0 ±1.4 (2)  max of 19" in c1 and "30.0 (1)  max of 20" in c1
    assert "61.0 ±1.4 (2)  n=250" in c8 and "100.0 (1)  n=250" in c8


def test_a_figure_that_is_no_percentile_has_no_count_column() -> None:
    t = Trials()
    t.add(8192, 30.0, 100.0, baseline=True, tput=50.0, samples=(20, 20))
    tput = get_objective("output_throughput")
    assert "rests on" not in format_recommendations(recommend(t.all, tput, [1]), tput)


def test_a_tier_no_launch_could_measure_says_why() -> None:
    t = Trials()
    note = "steady-state window holds 3 requests, fewer than the tier's 8 streams"
    t.add(8192, 30.0, 100.0, baseline=True)
    trials = t.all
    trials[0].user_attrs["tiers"]["8"] = {"p99_ttft_ms": 1.0, "notes": [note]}  # no p99 TPOT
    (c8,) = recommend(trials, P99, [8])
    assert c8.trial is None and c8.choice == f"c8: no eligible config; {note}"


def test_a_capped_chunk_that_preempts_is_not_the_pick(
    space_file: Path, tmp_path: Path, small_space: dict[str, Any]
) -> None:
    # Long shared-prefix prompts (as in the 50K-token coding sessions of the published runs):
    # at 20 requests in flight, capping each request's prefill chunk fills the KV cache
    # (preemptions, half the prefix-cache hits) and costs about a third of the throughput.
    # With the throughput floor off, it is never the pick; big uncapped chunks serve both
    # tiers. (That a preempting config ranks after the others whatever its P99 is pinned by
    # test_a_config_that_preempted_ranks_after_those_that_did_not.)
    small_space["parameters"] = {
        "max_num_batched_tokens": {
            "type": "categorical",
            "choices": [8192, 262144],
            "default": 8192,
            "flag": "--max-num-batched-tokens",
        },
        "long_prefill_token_threshold": {
            "type": "categorical",
            "choices": [0, 6000],
            "default": 0,
            "unset": 0,
            "flag": "--long-prefill-token-threshold",
        },
    }
    small_space["base"]["args"]["max-num-seqs"] = 40
    small_space["study"]["throughput_floor"] = 0.0
    small_space["workload"] = {
        "dataset": {
            "kind": "prefix_repetition",
            "num_prefixes": 8,
            "prefix_len": 50000,
            "suffix_len": 500,
            "repeats": 3,
            "output_len": 300,
        },
        "warmup": 0,
        "tiers": [4, 20],
        "seed": 1,
    }
    write_yaml(space_file, small_space)
    opts = RunOptions(
        space_path=space_file, results_dir=tmp_path / "r", trials=4, confirm=1, sampler="grid"
    )
    low, high = run_study(opts, report=lambda _: None).recommendations

    capped = {"max_num_batched_tokens": 262144, "long_prefill_token_threshold": 6000}
    study = optuna.load_study(study_name="small", storage=f"sqlite:///{tmp_path}/r/small/study.db")
    preempted = [t.params for t in study.trials if TrialRecord.of(t).server(20, "num_preemptions")]
    assert preempted and all(p == capped for p in preempted)
    assert high.params != capped and "preempt" not in high.choice
    assert low.params["max_num_batched_tokens"] == high.params["max_num_batched_tokens"] == 262144
    assert low.verdict == "better" or high.verdict == "better"


def test_a_pick_keeps_the_throughput_floor_and_says_what_it_gave_up() -> None:
    """A config 4% better on P99 TPOT at half the throughput is not worth deploying: the floor
    leaves it out, the pick is the best of the rest, and the choice line says so."""
    t = Trials()
    t.add(8192, 30.0, 1.0, baseline=True, tput=100.0)
    t.add(2048, 25.0, 1.0, tput=90.0)  # 90% of the best throughput: eligible
    t.add(32768, 24.0, 1.0, tput=40.0)  # the best P99 TPOT, 40% of the best throughput
    floor = Policy(throughput_floor=0.8)
    (pick,) = recommend(t.all, P99, [1], floor)
    assert pick.trial == 1
    assert "gives up 10.0% of output throughput" in pick.choice and "trial 0" in pick.choice
    assert "1 below 80% of the tier's best throughput left out" in pick.choice
    (no_floor,) = recommend(t.all, P99, [1], Policy())
    assert no_floor.trial == 2


def test_a_config_that_holds_users_back_wins_only_within_slos() -> None:
    """Held users (a seat limit under the tier's concurrency) rule a config out of a tier that
    has no SLO; where an SLO bounds the wait, it may win, and the line gives the SLO as proof."""
    t = Trials()
    t.add(8192, 30.0, 1.0, baseline=True, tput=100.0, ttft=900.0)
    t.add(8192, 30.0, 1.0, confirm_of=0, tput=101.0, ttft=910.0)
    t.add(32768, 20.0, 1.0, tput=100.0, users_held=12.0, ttft=900.0)
    (unbounded,) = recommend(t.all, P99, [1], Policy())
    assert unbounded.trial == 0 and "1 held users waiting with no SLO" in unbounded.choice
    bounded = Policy(slo_tiers=frozenset({1}), slo_text={1: "p99_ttft_ms <= 60000"})
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == 2 and pick.users_held == 12.0
    assert "never ran 12 of its 1 users at once" in pick.choice
    assert "p99_ttft_ms <= 60000" in pick.choice


def test_a_held_config_wins_only_within_the_noise_of_a_seated_ones_tail_and_throughput() -> None:
    """Within a P99 TTFT limit a seat limit still wins P99 TPOT by queueing: the last of a
    burst waits twice as long for a first token as where everyone is seated (48 s against 25 s
    at c40 on the H200 space). It is left out; a held config whose P99 TTFT and throughput are
    within the noise of the seated config's may win, and its line gives both TTFTs."""
    bounded = Policy(slo_tiers=frozenset({1}), slo_text={1: "p99_ttft_ms <= 60000"})
    t = Trials()
    base = t.add(8192, 30.0, 1.0, baseline=True, tput=100.0, ttft=25000.0)
    t.add(8192, 31.0, 1.0, confirm_of=base, tput=102.0, ttft=25500.0)  # 2% noise
    queued = t.add(32768, 20.0, 1.0, tput=100.0, ttft=48400.0, users_held=8.0)
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == base
    assert "1 held more users back at a P99 TTFT or throughput beyond the noise" in pick.choice
    slower = t.add(2048, 21.0, 1.0, tput=80.0, ttft=25400.0, users_held=2.0)
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == base  # its tail is within the noise, its throughput is not
    close = t.add(131072, 22.0, 1.0, tput=99.0, ttft=25600.0, users_held=2.0)
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == close and queued != slower != close
    assert "a P99 TTFT of 25600 ms against 25250 ms where every user was seated" in pick.choice


def test_a_config_that_preempted_sets_no_yardstick_for_seating_users() -> None:
    """At 40 users a config that seats everyone runs out of KV cache and preempts: it put
    running users back in the queue. A seat cap that held 8 and preempted none is not judged
    against its P99 TTFT; it stays in the pool, and the ranking puts the preempting one last."""
    bounded = Policy(slo_tiers=frozenset({1}), slo_text={1: "p99_ttft_ms <= 120000"})
    t = Trials()
    base = t.add(8192, 30.0, 1.0, baseline=True, tput=100.0, ttft=50000.0, num_preemptions=2.0)
    t.add(8192, 30.3, 1.0, confirm_of=base, tput=101.0, ttft=50500.0, num_preemptions=2.0)
    capped = t.add(32768, 31.0, 1.0, tput=98.0, ttft=68000.0, users_held=8.0)
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == capped and pick.users_held == 8.0, pick.choice
    assert "trial 0's engine preempted requests, which ranks it last" in pick.choice
    assert "and is 2.8% worse on p99_tpot" in pick.choice, pick.choice
    assert "the fewest any eligible config held without preempting" in pick.choice
    steady = t.add(2048, 32.0, 1.0, tput=99.0, ttft=51000.0)  # seats all, no preemption
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == steady, pick.choice


def test_a_pick_whose_kv_cache_ran_full_says_it_is_at_the_edge_of_preempting() -> None:
    t = Trials()
    t.add(8192, 30.0, 1.0, baseline=True, kv_cache_usage_peak=0.6)
    (pick,) = recommend(t.all, P99, [1], Policy())
    assert "KV cache" not in pick.choice
    t.add(32768, 20.0, 1.0, kv_cache_usage_peak=0.994)
    (pick,) = recommend(t.all, P99, [1], Policy())
    assert pick.trial == 1 and "its KV cache peaked 99.4% full, at the edge of preempting" in (
        pick.choice
    )


def test_a_held_config_is_left_out_while_the_noise_is_unknown() -> None:
    bounded = Policy(slo_tiers=frozenset({1}), slo_text={1: "p99_ttft_ms <= 60000"})
    t = Trials()
    t.add(8192, 30.0, 1.0, baseline=True, tput=100.0, ttft=25000.0)
    t.add(131072, 22.0, 1.0, tput=100.0, ttft=25000.0, users_held=2.0)
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == 0


def test_a_baseline_that_queued_users_is_named_so_beside_a_slower_pick() -> None:
    """llama-server's 4 default slots at 8 users: a lower P99 TPOT than a config that seats
    all 8, won by making half of them wait. The pick is the seated config, and the verdict says
    why its gain is negative instead of calling it worse."""
    bounded = Policy(slo_tiers=frozenset({1}), slo_text={1: "p99_ttft_ms <= 1000"})
    t = Trials()
    base = t.add(8192, 6.0, 1.0, baseline=True, tput=300.0, ttft=300.0, users_held=4.0)
    t.add(8192, 6.2, 1.0, confirm_of=base, tput=300.0, ttft=310.0, users_held=4.0)
    seated = t.add(32768, 9.0, 1.0, tput=340.0, ttft=210.0)
    t.add(32768, 9.4, 1.0, confirm_of=seated, tput=345.0, ttft=215.0)
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == seated and pick.gain is not None and pick.gain < 0
    assert pick.verdict == "baseline queued"
    (unbounded,) = recommend(t.all, P99, [1], Policy())  # held with no SLO to bound the wait
    assert unbounded.trial == seated and unbounded.verdict == "baseline queued"
    t = Trials()  # a seated pick that is also faster is simply better
    base = t.add(8192, 6.0, 1.0, baseline=True, tput=300.0, ttft=300.0, users_held=4.0)
    t.add(8192, 6.2, 1.0, confirm_of=base, tput=300.0, ttft=310.0, users_held=4.0)
    seated = t.add(32768, 3.0, 1.0, tput=340.0, ttft=210.0)
    t.add(32768, 3.1, 1.0, confirm_of=seated, tput=345.0, ttft=215.0)
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == seated and pick.verdict == "better"


def test_where_every_config_holds_users_the_one_holding_the_fewest_sets_the_wait() -> None:
    """At a tier no config seats entirely (KV runs out), a seat limit that holds 24 of 40
    users cannot win by queueing them behind one that holds 8."""
    bounded = Policy(slo_tiers=frozenset({1}), slo_text={1: "p99_ttft_ms <= 120000"})
    t = Trials()
    t.add(8192, 30.0, 1.0, baseline=True, tput=100.0, ttft=23000.0, users_held=8.0)
    t.add(32768, 20.0, 1.0, tput=90.0, ttft=63000.0, users_held=24.0)
    (pick,) = recommend(t.all, P99, [1], bounded)
    assert pick.trial == 0
    assert "never ran 8 of its 1 users" in pick.choice
    assert "the fewest any eligible config held" in pick.choice


def test_a_config_that_preempted_ranks_after_those_that_did_not() -> None:
    t = Trials()
    t.add(8192, 30.0, 1.0, baseline=True, tput=100.0)
    t.add(32768, 20.0, 1.0, tput=100.0, num_preemptions=5.0)
    (pick,) = recommend(t.all, P99, [1], Policy())
    assert pick.trial == 0
