"""vLLM V1's scheduler, one step at a time (domain.md section 3).

Each step has a token budget of ``max_num_batched_tokens``. Running requests come first, in
admission order: a decoding request takes 1 + k tokens (k speculative), one still prefilling
takes its remaining prompt capped by ``long_prefill_token_threshold`` (when > 0; releases from
0.32 drop the cap while one request alone is running or waiting) and by the budget left. When
a request's new tokens do not fit in the free KV blocks, the most recently admitted request is
preempted (blocks freed, recomputed later from scratch, reusing whatever of its cached blocks
survived) and nothing new is admitted this step. Otherwise waiting requests are admitted first
come first served while budget, ``max_num_seqs`` and KV blocks last; a request that does not
fit stops the queue. Admission looks up the longest cached prefix.

Blocks enter the prefix cache when their step is scheduled, not when it has run: vLLM's
``KVCacheManager.allocate_slots`` caches a request's full blocks up to ``computed + new
tokens`` as it allocates them. A request admitted later in the same step (or the next one) so
hits a prompt that is still being prefilled, and computes only the rest; the forward pass
writes every token's KV before attending, so the hit is safe. Identical prompts sent together
are prefilled once, not once each.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from dataclasses import dataclass, field

from launchers.simengine.kvcache import BlockPool, Entry


@dataclass(eq=False)
class SimRequest:
    """One request's scheduling state (token counts, KV blocks, timestamps)."""

    rid: int
    prompt_len: int
    output_len: int
    prefix_key: Hashable | None = None
    prefix_len: int = 0
    hashes: list[int] | None = None  # full-block hash chain of the prompt (HTTP server)
    # Share of the prompt's 3-grams that recur in it: what a prompt-lookup drafter can match
    # (1.0 for a request known only by its length, the text the profile was calibrated on).
    draft_match: float = 1.0
    arrival: float = 0.0
    computed: int = 0  # tokens whose KV is computed
    produced: int = 0  # output tokens emitted
    path: list[Entry] = field(default_factory=list)  # cached runs it references
    own: Entry | None = None  # its own run of registered blocks
    extra: int = 0  # blocks it holds that are not registered (partial, in progress)
    chunk_times: list[float] = field(default_factory=list)
    chunk_tokens: list[int] = field(default_factory=list)
    preemptions: int = 0
    verified: int = 0  # draft verifications it went through (decode steps with drafts)

    @property
    def num_tokens(self) -> int:
        return self.prompt_len + self.produced

    @property
    def prefilling(self) -> bool:
        return self.num_tokens - self.computed > 1 or self.produced == 0

    @property
    def done(self) -> bool:
        return self.produced >= self.output_len

    @property
    def held(self) -> int:
        """KV blocks it holds: its cached prefix hit, its own registered run, the rest."""
        own = self.own.start + self.own.cached if self.own is not None else 0
        return own + self.extra


@dataclass
class SchedulerConfig:
    """The scheduler's knobs, as ``vllm serve`` names them."""

    max_num_batched_tokens: int
    max_num_seqs: int
    long_prefill_token_threshold: int = 0
    cap_lone_prefill: bool = True  # False: the cap is off while one request runs or waits
    spec_tokens: int = 0
    enable_prefix_caching: bool = True


@dataclass
class Scheduled:
    """One step's decision: tokens per request and whether anything was preempted."""

    items: list[tuple[SimRequest, int]]
    preempted: list[SimRequest]


class Scheduler:
    """Waiting and running queues over one ``BlockPool``."""

    def __init__(self, cfg: SchedulerConfig, pool: BlockPool) -> None:
        self.cfg = cfg
        self.pool = pool
        self.bs = pool.block_size
        self.waiting: deque[SimRequest] = deque()
        self.running: list[SimRequest] = []
        self.registry: dict[Hashable, Entry] = {}  # prefix key / block hash -> best run
        self.counters = {"preemptions": 0.0, "queries": 0.0, "hits": 0.0}
        # Requests sent at or after this time are not seen by the step being scheduled (the
        # engine core had started it, or with async scheduling scheduled it, by then).
        self.visible_until = float("inf")

    def add(self, req: SimRequest) -> None:
        self.waiting.append(req)

    # ---- one step -------------------------------------------------------------------------
    def schedule(self) -> Scheduled:
        cap = self._step_cap()
        budget = self.cfg.max_num_batched_tokens
        items: list[tuple[SimRequest, int]] = []
        preempted: list[SimRequest] = []
        i = 0
        while i < len(self.running) and budget > 0:
            req = self.running[i]
            n = min(self._want(req, cap), budget)
            if not self._allocate(req, n) and not self._preempt_until_fits(req, n, preempted):
                break
            items.append((req, n))
            self.register(req, req.computed + n)
            budget -= n
            i += 1
        if not preempted:
            budget = self._admit(budget, cap, items)
        return Scheduled(items, preempted)

    def _step_cap(self) -> int:
        """This step's long-prefill cap: off where the release lets a lone request (the only
        one running or waiting) take the whole budget, as it starves nobody."""
        cap = self.cfg.long_prefill_token_threshold
        if cap and not self.cfg.cap_lone_prefill and len(self.running) <= 1:
            seen = sum(1 for r in self.waiting if r.arrival < self.visible_until)
            if len(self.running) + seen <= 1:
                return 0
        return cap

    def _want(self, req: SimRequest, cap: int) -> int:
        if not req.prefilling:
            return 1 + self.cfg.spec_tokens
        return _capped(req.num_tokens - req.computed, cap)

    def _preempt_until_fits(self, req: SimRequest, n: int, preempted: list[SimRequest]) -> bool:
        while True:
            victim = self.running.pop()
            self._free(victim)
            victim.computed = 0
            victim.preemptions += 1
            self.counters["preemptions"] += 1
            self.waiting.appendleft(victim)
            preempted.append(victim)
            if victim is req:
                return False
            if self._allocate(req, n):
                return True

    def _admit(self, budget: int, cap: int, items: list[tuple[SimRequest, int]]) -> int:
        while self.waiting and budget > 0 and len(self.running) < self.cfg.max_num_seqs:
            req = self.waiting[0]
            if req.arrival >= self.visible_until:
                break
            entry, hit = self._lookup(req)
            n = min(self._prefill_want(req, hit, cap), budget)
            if self._blocks_needed(hit, n) > self.pool.free - self._touch_cost(entry, hit):
                break
            self.waiting.popleft()
            self.counters["queries"] += req.num_tokens
            self.counters["hits"] += hit * self.bs
            self._take_hit(req, entry, hit)
            self._allocate(req, n)
            self.register(req, req.computed + n)
            self.running.append(req)
            items.append((req, n))
            budget -= n
        return budget

    def _prefill_want(self, req: SimRequest, hit: int, cap: int) -> int:
        return _capped(req.num_tokens - hit * self.bs, cap)

    def blocked(self) -> bool:
        """True when the waiting head cannot be admitted until something finishes."""
        if not self.waiting:
            return True
        if len(self.running) >= self.cfg.max_num_seqs:
            return True
        req = self.waiting[0]
        if req.arrival >= self.visible_until:
            return False  # admissible once the next step is scheduled
        entry, hit = self._lookup(req)
        # The cap of the step to come: this request waits beside the running ones.
        n = min(self._prefill_want(req, hit, self._step_cap()), self.cfg.max_num_batched_tokens)
        return self._blocks_needed(hit, n) > self.pool.free - self._touch_cost(entry, hit)

    # ---- KV blocks --------------------------------------------------------------------------
    def _blocks_needed(self, held: int, n_tokens_after_hit: int) -> int:
        return math.ceil((held * self.bs + n_tokens_after_hit) / self.bs) - held

    def _touch_cost(self, entry: Entry | None, hit: int) -> int:
        # Cached-but-free blocks a hit takes out of the free queue.
        cost, e, upto = 0, entry, hit
        while e is not None and upto > e.start:
            cost += max(0, min(upto - e.start, e.cached) - e.ref)
            upto, e = e.start, e.parent
        return cost

    def _lookup(self, req: SimRequest) -> tuple[Entry | None, int]:
        """Longest cached chain for ``req``: (run it ends in, hit blocks)."""
        if not self.cfg.enable_prefix_caching:
            return None, 0
        cap = (req.num_tokens - 1) // self.bs
        best: tuple[Entry | None, int] = (None, 0)
        for entry, limit in self._candidates(req):
            hit = min(entry.avail(), limit, cap)
            if hit > best[1]:
                best = (entry, hit)
        return best

    def _candidates(self, req: SimRequest) -> list[tuple[Entry, int]]:
        out: list[tuple[Entry, int]] = []
        if req.own is not None:
            out.append((req.own, 1 << 62))
        if req.prefix_key is not None and req.prefix_key in self.registry:
            out.append((self.registry[req.prefix_key], req.prefix_len // self.bs))
        if req.hashes:
            out.extend(self._hash_candidates(req.hashes))
        return out

    def _hash_candidates(self, hashes: list[int]) -> list[tuple[Entry, int]]:
        lo, hi = 0, len(hashes)  # chains are prefix-closed: binary search the deepest hit
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if hashes[mid - 1] in self.registry:
                lo = mid
            else:
                hi = mid - 1
        return [(self.registry[hashes[lo - 1]], lo)] if lo else []

    def _take_hit(self, req: SimRequest, entry: Entry | None, hit: int) -> None:
        req.path = []
        e, upto = entry, hit
        while e is not None and upto > e.start:
            self.pool.reference(e, req.rid, min(upto - e.start, e.cached))
            req.path.append(e)
            upto, e = e.start, e.parent
        if req.own is not None and req.own is entry and hit == entry.start + entry.cached:
            if entry in req.path:  # resuming its own run: keep extending it
                req.path.remove(entry)
            self.pool.reference(entry, req.rid, entry.cached)
        else:
            req.own = Entry(("run", req.rid, req.preemptions), entry, hit)
        req.extra = 0
        req.computed = hit * self.bs

    def _allocate(self, req: SimRequest, n: int) -> bool:
        lookahead = self.cfg.spec_tokens if not req.prefilling else 0
        need = math.ceil((req.computed + n + lookahead) / self.bs) - req.held
        if need > self.pool.free:
            return False
        if need > 0:
            self.pool.take(need)
            req.extra += need
        return True

    def register(self, req: SimRequest, upto: int | None = None) -> None:
        """Registers ``req``'s newly full blocks in its own run (prefix caching): those of its
        first ``upto`` tokens (default: its computed ones), never past the tokens it has, so
        unverified draft tokens are not cached."""
        own = req.own
        assert own is not None
        upto = min(req.num_tokens, req.computed if upto is None else upto)
        new = upto // self.bs - own.start - own.cached
        new = min(new, req.extra)
        if new <= 0:
            return
        req.extra -= new
        self.pool.grow(own, req.rid, new)
        if not self.cfg.enable_prefix_caching:
            return
        if req.prefix_key is not None:
            best = self.registry.get(req.prefix_key)
            if best is None or self._covers(own, req) > self._covers(best, req):
                self.registry[req.prefix_key] = own
        if req.hashes:
            lo = own.start + own.cached - new
            for h in req.hashes[lo : own.start + own.cached]:
                self.registry[h] = own  # the freshest run holding this block

    def _covers(self, entry: Entry, req: SimRequest) -> int:
        return min(entry.avail(), req.prefix_len // self.bs)

    def _free(self, req: SimRequest) -> None:
        for e in req.path:
            self.pool.release(e, req.rid)
        req.path = []
        if req.own is not None:
            self.pool.release(req.own, req.rid)
        self.pool.give_plain(req.extra)
        req.extra = 0

    def finish(self, req: SimRequest) -> None:
        self.running.remove(req)
        self._free(req)


def _capped(tokens: int, cap: int) -> int:
    """A prefill chunk: ``tokens`` left, held to the step's long-prefill cap (0: none)."""
    return min(tokens, cap) if cap > 0 else tokens
