"""V1 scheduling rules: token budget, long-prefill cap, max-num-seqs, preemption, prefix hits."""

from __future__ import annotations

from launchers.simengine.kvcache import BlockPool
from launchers.simengine.scheduler import Scheduler, SchedulerConfig, SimRequest


def make(
    blocks: int = 1000,
    budget: int = 256,
    seqs: int = 8,
    cap: int = 0,
    bs: int = 16,
    caching: bool = True,
    cap_lone: bool = True,
) -> Scheduler:
    cfg = SchedulerConfig(
        budget, seqs, cap, enable_prefix_caching=caching, cap_lone_prefill=cap_lone
    )
    return Scheduler(cfg, BlockPool(blocks, bs))


def req(rid: int, prompt: int, out: int = 4, key: str | None = None, plen: int = 0) -> SimRequest:
    return SimRequest(rid, prompt, out, key, plen)


def run_step(s: Scheduler) -> dict[int, int]:
    """One step, applied as the engine applies it (prefill progress, one token per decode)."""
    plan = s.schedule()
    for r, n in plan.items:
        if r.prefilling:
            r.computed += n
            if r.computed >= r.num_tokens:
                r.produced += 1
        else:
            r.computed += 1
            r.produced += 1
        s.register(r)
        if r.done:
            s.finish(r)
    s.pool.check()
    return {r.rid: n for r, n in plan.items}


def test_token_budget_chunks_prefill_and_serves_running_first() -> None:
    s = make(budget=256)
    s.add(req(1, 300))
    s.add(req(2, 100))
    assert run_step(s) == {1: 256}  # the budget is spent on the first prompt
    assert run_step(s) == {1: 44, 2: 100 - 0}  # the rest of it, then the next in line
    assert run_step(s) == {1: 1, 2: 1}  # both decode


def test_long_prefill_cap_limits_one_request_per_step() -> None:
    s = make(budget=256, cap=64)
    s.add(req(1, 300))
    s.add(req(2, 300))
    assert run_step(s) == {1: 64, 2: 64}


def test_a_lone_request_takes_the_whole_budget_where_the_release_lets_it() -> None:
    """vLLM 0.32's scheduler drops the cap while one request alone is running or waiting: it
    would starve nobody. A second one brings the cap back, for both."""
    s = make(budget=256, cap=64, cap_lone=False)
    s.add(req(1, 200))
    assert run_step(s) == {1: 200}
    s.add(req(2, 200))
    s.add(req(3, 200))
    assert run_step(s) == {1: 1, 2: 64, 3: 64}


def test_whether_the_queue_is_blocked_reads_the_cap_of_the_step_to_come() -> None:
    """A lone request prefilled whole; a second one arriving brings the cap back, so its first
    chunk fits in the KV blocks left where its whole prompt would not."""
    s = make(blocks=20, budget=256, cap=64, bs=16, cap_lone=False)
    s.add(req(1, 200))
    assert run_step(s) == {1: 200}
    s.add(req(2, 200))
    assert not s.blocked()
    assert run_step(s) == {1: 1, 2: 64}


def test_older_releases_cap_a_lone_request_too() -> None:
    s = make(budget=256, cap=64)
    s.add(req(1, 200))
    assert run_step(s) == {1: 64}


def test_a_request_sent_as_a_step_starts_waits_for_the_next_one() -> None:
    """The engine core has started the step by the time the request reaches it: one sent at
    the step's start is not in it, nor does it count as a second request for the cap."""
    s = make(budget=256, cap=64, cap_lone=False)
    s.add(req(1, 200))
    late = req(2, 50)
    late.arrival = s.visible_until = 1.0
    s.add(late)
    assert run_step(s) == {1: 200}
    s.visible_until = 1.5
    assert run_step(s) == {1: 1, 2: 50}


def test_max_num_seqs_limits_admission() -> None:
    s = make(budget=1000, seqs=2)
    for i in range(3):
        s.add(req(i, 10))
    assert set(run_step(s)) == {0, 1}
    assert len(s.waiting) == 1


def test_waiting_head_that_does_not_fit_blocks_the_queue() -> None:
    s = make(blocks=10, budget=1000, bs=16)  # 160 tokens of KV
    s.add(req(1, 150))
    s.add(req(2, 8))  # would fit, but stands behind a request that does not
    s.add(req(3, 20))
    run_step(s)
    assert [r.rid for r in s.running] == [1]
    s2 = make(blocks=10, budget=1000, bs=16)
    s2.add(req(1, 100))
    s2.add(req(2, 100))  # 7 blocks: does not fit next to the first one's 7
    s2.add(req(3, 8))
    assert run_step(s2) == {1: 100}


def test_preemption_frees_the_most_recent_request_and_recomputes_it() -> None:
    s = make(blocks=8, budget=1000, bs=16)
    s.add(req(1, 63, out=40))  # 4 blocks
    s.add(req(2, 63, out=40))  # 4 blocks: the pool is full
    run_step(s)
    assert len(s.running) == 2
    run_step(s)  # both decode into their 4th block's last slot
    run_step(s)  # request 1 needs a 5th block: request 2 (newest) is preempted
    assert s.counters["preemptions"] == 1
    assert [r.rid for r in s.running] == [1]
    victim = s.waiting[0]
    assert victim.rid == 2 and victim.computed == 0 and victim.produced == 2


def test_preempted_request_reuses_its_cached_blocks_on_resume() -> None:
    s = make(blocks=13, budget=1000, bs=16)
    s.add(req(1, 63, out=20))  # grows to 6 blocks
    s.add(req(2, 95, out=20))  # grows to 8 blocks: both do not fit in 13
    run_step(s)
    while s.counters["preemptions"] == 0:
        run_step(s)
    while any(r.rid == 2 for r in s.waiting):
        run_step(s)
    assert s.counters["preemptions"] == 1
    assert s.counters["hits"] >= 4 * 16  # request 2 found most of its own blocks again


def test_prefix_cache_hits_full_blocks_of_a_shared_prefix() -> None:
    s = make(budget=4096, bs=16)
    s.add(req(1, 1000, out=2, key="doc", plen=1000))
    while s.running or s.waiting:
        run_step(s)
    s.add(req(2, 1000, out=2, key="doc", plen=1000))
    plan = run_step(s)
    assert plan == {2: 1000 - 992}  # 62 full blocks hit; the partial one is recomputed
    assert s.counters["hits"] == 992
    assert s.counters["queries"] == 2000


def test_prefix_caching_off_never_hits() -> None:
    s = make(budget=4096, caching=False)
    for rid in (1, 2):
        s.add(req(rid, 500, out=2, key="doc", plen=500))
        while s.running or s.waiting:
            run_step(s)
    assert s.counters["hits"] == 0


def test_evicted_prefix_is_recomputed() -> None:
    s = make(blocks=70, budget=4096, bs=16)
    s.add(req(1, 1000, out=2, key="a", plen=1000))
    while s.running or s.waiting:
        run_step(s)
    s.add(req(2, 1000, out=2, key="b", plen=1000))  # needs most of the pool: evicts "a"
    while s.running or s.waiting:
        run_step(s)
    s.add(req(3, 1000, out=2, key="a", plen=1000))
    assert run_step(s)[3] > 500


def test_identical_prompts_admitted_together_are_prefilled_once() -> None:
    # vLLM caches blocks when it schedules them: the second copy hits the first copy's
    # blocks in the same step and computes only the last, partial block.
    s = make(budget=4096, bs=16)
    s.add(req(1, 1000, out=2, key="doc", plen=1000))
    s.add(req(2, 1000, out=2, key="doc", plen=1000))
    assert run_step(s) == {1: 1000, 2: 1000 - 992}
    assert s.counters["hits"] == 992


def test_a_prompt_still_prefilling_is_hit_up_to_its_scheduled_chunks() -> None:
    s = make(budget=4096, cap=320, bs=16)
    s.add(req(1, 1000, out=2, key="doc", plen=1000))
    run_step(s)  # request 1: tokens 0-320 scheduled and cached
    s.add(req(2, 1000, out=2, key="doc", plen=1000))
    # Request 1 schedules 320-640 first; request 2 then hits all 640 and takes the next chunk.
    assert run_step(s) == {1: 320, 2: 320}
    assert s.counters["hits"] == 640
