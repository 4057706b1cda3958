"""The engine core: scheduler + KV pool + step-time model on one clock.

``step()`` runs one scheduler step and advances the clock by the step's modelled time;
``decode_stretch()`` runs a run of decode-only steps at once when nothing can change the batch
before its end (no admission possible, no prefill pending): the same steps, token by token,
with their times computed as one numpy array. Both the virtual-time runner and the paced HTTP
server drive this class.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence

import numpy as np

from launchers.simengine.kvcache import BlockPool
from launchers.simengine.model import StepModel, StepWork
from launchers.simengine.scheduler import Scheduler, SchedulerConfig, SimRequest

MAX_STRETCH = 2048  # steps per bulk stretch (bounds the arrays)
LOG_INTERVAL_S = 10.0  # vLLM's periodic stats line


class EngineDead(Exception):
    """The engine crashed under load; the message is the line it printed."""


class EngineCore:
    """One running engine: queues, blocks, clock, counters, stats log."""

    def __init__(
        self,
        model: StepModel,
        sched_cfg: SchedulerConfig,
        num_blocks: int,
        block_size: int,
        rng: np.random.Generator,
        log: Callable[[str], None] = lambda line: None,
    ) -> None:
        self.model = model
        self.pool = BlockPool(num_blocks, block_size)
        self.sched = Scheduler(sched_cfg, pool=self.pool)
        self.rng = rng
        self.log = log
        self.clock = 0.0
        self.k = sched_cfg.spec_tokens
        self.alpha = model.acceptance()
        self.lookup = model.prompt_lookup()  # drafts come from the context: the text matters
        self.jitter = model.p.overheads.step_jitter
        # Known bugs that kill the engine under load: (tokens in one step above which, line).
        self.failures: list[tuple[int, str]] = []
        if model.moe.fails_above_tokens:
            self.failures.append((model.moe.fails_above_tokens, model.moe.fail_log))
        self.on_finish: Callable[[SimRequest], None] = lambda req: None
        self.counters = {"spec_drafts": 0.0, "spec_draft_tokens": 0.0, "spec_accepted": 0.0}
        self.counters.update(prompt_tokens=0.0, generation_tokens=0.0, finished=0.0)
        self._next_log = LOG_INTERVAL_S
        self._rid = 0
        self.bulk = True  # decode stretches at once (False: every step alone, same results)
        self._last_start = 0.0  # start of the previous step (async scheduling's horizon)
        # Prompt and generated tokens since the last stats line. vLLM counts a request's whole
        # prompt (cached part included) when its first token comes out, and not again after
        # a preemption's recompute: the line shows prompts served, not tokens computed.
        self._interval = [0.0, 0.0]

    def restart_clock(self) -> None:
        """Virtual time starts again at 0 (a new run on the same, idle engine)."""
        self.clock = 0.0
        self._last_start = 0.0
        self._next_log = LOG_INTERVAL_S

    def new_rid(self) -> int:
        """A request id unique for this engine's lifetime (block references are keyed by it)."""
        self._rid += 1
        return self._rid

    @property
    def busy(self) -> bool:
        return bool(self.sched.running or self.sched.waiting)

    def add(self, req: SimRequest) -> None:
        self.sched.add(req)

    # ---- one step ---------------------------------------------------------------------
    def step(self) -> float:
        """Runs one step; returns its duration (0.0 when nothing could be scheduled)."""
        # vLLM's engine core reads its input queue once per step and starts the next step as
        # soon as the last one's outputs are queued: a request sent in reply to an output (a
        # closed loop's next one) misses that step. With async scheduling a step is scheduled
        # while the previous one runs, so it sees only what was sent before that one began.
        async_ = self.model.k.async_scheduling
        self.sched.visible_until = self._last_start if async_ else self.clock
        self._last_start = self.clock
        plan = self.sched.schedule()
        if not plan.items:
            self.sched.visible_until = float("inf")  # idle engine: schedules on arrival
            plan = self.sched.schedule()
        if not plan.items:
            return 0.0
        work = self._work(plan.items)
        tokens = work.pf_tokens + work.n_dec * (1 + self.k)
        for limit, line in self.failures:
            if tokens > limit:
                raise EngineDead(line)
        dt = self.model.step_s(work) * self._noise(1)[0]
        self.clock += dt
        decoding = [req for req, _ in plan.items if not req.prefilling]
        accepted = iter(self._accepted(decoding)[0].tolist()) if self.k else None
        for req, n in plan.items:
            self._apply(req, n, accepted)
        self._maybe_log()
        return dt

    def _work(self, items: list[tuple[SimRequest, int]]) -> StepWork:
        n_dec = n_pf = pf_tokens = 0
        ctx_dec = pairs = pf_ctx = 0.0
        for req, n in items:
            if req.prefilling:
                n_pf += 1
                pf_tokens += n
                pairs += n * req.computed + n * (n + 1) / 2
                pf_ctx += req.computed + n
            else:
                n_dec += 1
                ctx_dec += req.computed + 1
        return StepWork(n_dec, ctx_dec, n_pf, pf_tokens, pairs, pf_ctx)

    def _apply(self, req: SimRequest, n: int, drafts: Iterator[int] | None) -> None:
        # No block registration here: the scheduler cached these blocks when it scheduled them.
        if req.prefilling:
            req.computed += n
            if req.computed >= req.num_tokens:
                if req.produced == 0:
                    self._interval[0] += req.prompt_len
                self._emit(req, 1, self.clock)
            return
        accepted = next(drafts) if drafts is not None else 0
        req.verified += 1
        req.computed += 1 + accepted
        self._emit(req, 1 + accepted, self.clock)

    def _emit(self, req: SimRequest, tokens: int, t: float) -> None:
        tokens = min(tokens, req.output_len - req.produced)
        req.produced += tokens
        req.chunk_times.append(t)
        req.chunk_tokens.append(tokens)
        self._interval[1] += tokens
        if req.done:
            self._finish(req)

    def _finish(self, req: SimRequest) -> None:
        self.sched.finish(req)
        self.counters["finished"] += 1
        self.counters["prompt_tokens"] += req.prompt_len
        self.counters["generation_tokens"] += req.produced
        self.on_finish(req)

    def _noise(self, n: int) -> np.ndarray:
        if not self.jitter:
            return np.ones(n)
        return self.rng.lognormal(0.0, self.jitter, n)

    def _alphas(self, reqs: Sequence[SimRequest]) -> np.ndarray:
        """Each request's per-token acceptance: a prompt-lookup drafter (n-gram, suffix) only
        proposes what its context repeats, so its rate scales with the context's share of
        recurring n-grams (``draft_match``), or with the model's repetition of its own output
        where that is higher; a draft model's does not."""
        if not self.lookup:
            return np.full(len(reqs), self.alpha)
        repeat = self.model.p.model.output_repeat
        return np.array([self.alpha * max(r.draft_match, repeat) for r in reqs], dtype=float)

    def _accepted(self, reqs: Sequence[SimRequest], steps: int = 1) -> np.ndarray:
        """Accepted draft tokens of ``steps`` verifications of each request (rows: steps).

        A verification keeps the leading successes of k Bernoulli draws, except where a
        prompt-lookup drafter reads a greedy output that loops (``_in_loop``): the loop, not a
        coin, decides what is accepted, so every such request accepts its expected count at
        the same pace, spread evenly over its verifications. A wave of them finishes together
        as the real engine's does (its c6 waves end within a millisecond of one another),
        where coin flips would spread it and stagger the next wave's prefill."""
        n = len(reqs)
        if not self.k:
            return np.zeros((steps, n), dtype=np.int64)
        alphas = self._alphas(reqs)
        ok = self.rng.random((steps, n, self.k)) < alphas[None, :, None]
        acc = np.cumprod(ok, axis=2).sum(axis=2)
        for j, req in enumerate(reqs):
            if self._in_loop(req):
                acc[:, j] = even_acceptance(float(alphas[j]), self.k, req.verified, steps)
        self.counters["spec_drafts"] += n * steps
        self.counters["spec_draft_tokens"] += n * steps * self.k
        self.counters["spec_accepted"] += float(acc.sum())
        return acc

    def _in_loop(self, req: SimRequest) -> bool:
        repeat = self.model.p.model.output_repeat
        return self.lookup and repeat > 0 and repeat >= req.draft_match

    # ---- bulk decode --------------------------------------------------------------------
    def decode_stretch(self, until: float = math.inf) -> bool:
        """Runs decode-only steps up to the first finish (or the first step ending after
        ``until``, or the step before KV blocks run out); False when not applicable."""
        running = self.sched.running
        if (
            not self.bulk
            or not running
            or not self.sched.blocked()
            or any(r.prefilling for r in running)
        ):
            return False
        rem = np.array([r.output_len - r.produced for r in running])
        m = int(min(rem.min(), MAX_STRETCH))
        tok = 1 + self._accepted(running, m)
        cum = np.cumsum(tok, axis=0)  # tokens after each step, per request
        first_done = np.argmax(cum >= rem, axis=0)
        m = int(min(m, (first_done + 1)[(cum >= rem).any(axis=0)].min(initial=m)))
        m = self._kv_limit(running, cum, m)
        if m < 1:
            return False
        before = np.vstack([np.zeros(len(running), dtype=np.int64), cum[: m - 1]])
        ctx0 = sum(r.computed + 1 for r in running)
        dts = self.model.decode_s(len(running), ctx0 + before.sum(axis=1)) * self._noise(m)
        times = self.clock + np.cumsum(dts)
        if until < math.inf:
            m = min(m, int(np.searchsorted(times, until)) + 1)
        self._last_start = float(times[m - 2]) if m > 1 else self.clock
        self._apply_stretch(running, cum[:m], times[:m])
        return True

    def _kv_limit(self, running: list[SimRequest], cum: np.ndarray, m: int) -> int:
        bs = self.pool.block_size
        comp = np.array([r.computed for r in running])
        held = np.array([r.held for r in running])
        before = np.vstack([np.zeros(len(running), dtype=np.int64), cum[: m - 1]])
        need = np.ceil((comp + before[:m] + 1 + self.k) / bs) - held
        total = np.maximum(need, 0).sum(axis=1)
        over = np.nonzero(total > self.pool.free)[0]
        return int(over[0]) if len(over) else m

    def _apply_stretch(self, running: list[SimRequest], cum: np.ndarray, times: np.ndarray) -> None:
        bs = self.pool.block_size
        self.clock = float(times[-1])
        start = self.clock
        tok = np.diff(np.vstack([np.zeros(cum.shape[1], dtype=np.int64), cum]), axis=0)
        for j, req in enumerate(list(running)):
            steps = tok[:, j]
            need = (
                math.ceil((req.computed + int(cum[-2, j] if len(cum) > 1 else 0) + 1 + self.k) / bs)
                - req.held
            )
            if need > 0:
                self.pool.take(need)
                req.extra += need
            req.computed += int(cum[-1, j])
            req.verified += len(cum)
            self.sched.register(req)
            take = np.minimum(
                steps,
                np.maximum(
                    req.output_len - req.produced - np.concatenate([[0], np.cumsum(steps)[:-1]]), 0
                ),
            )
            req.chunk_times.extend(times.tolist())
            req.chunk_tokens.extend(take.tolist())
            req.produced += int(take.sum())
            self._interval[1] += int(take.sum())
            if req.done:
                self._finish(req)
        self._maybe_log(start)

    # ---- stats line ---------------------------------------------------------------------
    def _maybe_log(self, now: float | None = None) -> None:
        if self.clock < self._next_log:
            return
        span = self.clock - (self._next_log - LOG_INTERVAL_S)
        p, g = self._interval
        s = self.sched
        hit = s.counters["hits"] / s.counters["queries"] * 100 if s.counters["queries"] else 0.0
        self.log(
            f"Engine 000: Avg prompt throughput: {p / span:.1f} tokens/s, Avg generation "
            f"throughput: {g / span:.1f} tokens/s, Running: {len(s.running)} reqs, Waiting: "
            f"{len(s.waiting)} reqs, GPU KV cache usage: {self.pool.usage * 100:.1f}%, "
            f"Prefix cache hit rate: {hit:.1f}%"
        )
        self._interval = [0.0, 0.0]
        self._next_log = self.clock + LOG_INTERVAL_S


def even_acceptance(alpha: float, k: int, done: int, steps: int) -> np.ndarray:
    """Accepted drafts of verifications ``done`` .. ``done + steps - 1`` of a request whose
    drafts are accepted at a fixed pace: the expected leading successes of k draws at
    ``alpha`` (``alpha + ... + alpha**k``) per verification, whole tokens spread evenly."""
    mean = sum(alpha**j for j in range(1, k + 1))
    marks = np.floor((done + np.arange(steps + 1)) * mean + 1e-9)
    return np.diff(marks).astype(np.int64)
