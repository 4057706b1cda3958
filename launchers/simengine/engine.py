"""``SimEngine``: one simulated vLLM launch, serving workloads in virtual time.

``SimEngine.from_argv(argv, env, profile, seed)`` checks the launch as vLLM would (refusals
raise ``EngineRefused`` with vLLM's log line and a ``FailureKind``) and builds the engine core.
``run()`` serves a workload in virtual seconds: a closed loop keeps ``concurrency`` requests in
flight (a new one is sent when one finishes); with ``request_rate`` arrivals are a gamma
process (``burstiness`` 1 = Poisson) capped at ``concurrency`` in flight, as ``vllm bench
serve`` sends them. Records carry one chunk time per streamed chunk.

A known bug that kills the engine under load (a MoE kernel past its token limit, an
out-of-memory spike with too little headroom) raises ``LaunchError(kind=CRASH or OOM)`` from
``run()``, and the engine stays dead as vLLM's does: every later ``run()`` raises too.

Noise: each launch draws a speed factor (``run_jitter``) and every step a lognormal jitter
(``step_jitter``) from ``seed``, so reruns differ by a few percent, reproducibly.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from launchers._vllm_facts import caps_lone_prefill, parse_version
from launchers.simengine.answers import greedy_answer
from launchers.simengine.config import SimConfig, resolve
from launchers.simengine.core import EngineCore, EngineDead
from launchers.simengine.memory import MemoryPlan, plan_memory
from launchers.simengine.model import StepModel
from launchers.simengine.profile import Profile, load_profile
from launchers.simengine.scheduler import SchedulerConfig, SimRequest
from launchers.simengine.startup import CompileRun, compile_once, weights_load_s
from launchers.simengine.startup import log_lines as compile_lines
from launchers.simengine.tokens import recurring_share, token_ids
from objectives.records import BenchRequest, RequestRecord
from tuner.errors import FailureKind, LaunchError

OOM_UNDER_LOAD = (
    "torch.OutOfMemoryError: {dev} out of memory. Tried to allocate 2.00 GiB. Device 0 has "
    "less than 2 GiB free: gpu_memory_utilization {util} leaves too little outside the "
    "engine's budget for communication buffers and workspaces"
)
MC2_OVERFLOW = (
    "RuntimeError: HCCL error: the MC2 dispatch of {tokens} tokens needs {need} MB, more than "
    "HCCL_BUFFSIZE={have} MB (EI0002)"
)


class SimEngine:
    """A simulated vLLM engine (see module docstring); implements ``VirtualEngine``."""

    def __init__(
        self,
        profile: Profile,
        cfg: SimConfig,
        seed: int = 0,
        log: Callable[[str], None] | None = None,
        cache_dir: Path | None = None,
    ) -> None:
        self.profile = profile
        self.cfg = cfg
        self.seed = seed
        self.lines: list[str] = []
        self._log_sink = log
        self.memory: MemoryPlan = plan_memory(cfg, profile)
        self._cache_dir = cache_dir
        self.compiled: CompileRun = compile_once(profile, cfg, cache_dir)
        self.rng = np.random.default_rng(seed)
        speed = float(self.rng.lognormal(0.0, profile.overheads.run_jitter))
        self.model = StepModel(profile, cfg.knobs, speed=speed)
        self.core = self._new_core()
        self.dead: str | None = None
        self.peaks: dict[str, float] = {}
        self._startup_lines()

    @classmethod
    def from_argv(
        cls,
        args: Sequence[str],
        env: Mapping[str, str],
        profile: str = "h200x4",
        seed: int = 0,
        cache_dir: Path | None = None,
        version: str | None = None,
    ) -> SimEngine:
        """Builds an engine from ``vllm serve`` flags and env as vLLM ``version`` would
        (None: the release the profile imitates); raises ``EngineRefused``."""
        prof = load_profile(profile)
        return cls(prof, resolve(args, env, prof, version), seed, cache_dir=cache_dir)

    def set_log_sink(self, sink: Callable[[str], None]) -> None:
        """Where log lines go from now on (besides ``lines``)."""
        self._log_sink = sink

    def log(self, line: str) -> None:
        self.lines.append(line)
        if self._log_sink is not None:
            self._log_sink(line)

    def _new_core(self) -> EngineCore:
        c = self.cfg
        sc = SchedulerConfig(
            max_num_batched_tokens=c.max_num_batched_tokens,
            max_num_seqs=c.max_num_seqs,
            long_prefill_token_threshold=c.long_prefill_token_threshold,
            cap_lone_prefill=caps_lone_prefill(parse_version(c.version)),
            spec_tokens=c.knobs.spec_tokens,
            enable_prefix_caching=c.enable_prefix_caching,
        )
        core = EngineCore(self.model, sc, self.memory.num_blocks, c.block_size, self.rng, self.log)
        core.failures.extend(self._load_failures())
        return core

    def _load_failures(self) -> list[tuple[int, str]]:
        """Failures under load this launch is exposed to: (step tokens above which, line)."""
        c, m = self.cfg, self.profile.model
        out = []
        if self.memory.oom_under_load:  # big activation peaks meet too little headroom
            dev = "CUDA" if self.profile.hardware.platform == "cuda" else "NPU"
            line = OOM_UNDER_LOAD.format(dev=dev, util=c.gpu_memory_utilization)
            out.append((c.max_num_batched_tokens // 2, line))
        if c.knobs.fused_mc2 == 1:  # mode 1 also fuses prefill steps: big dispatches
            per_token = m.top_k * m.hidden * 2 / 1e6  # MB a token's routed copies take
            limit = int(c.hccl_buffsize_mb / per_token)
            need = int(c.max_num_batched_tokens * per_token)
            if need > c.hccl_buffsize_mb:
                line = MC2_OVERFLOW.format(tokens=limit + 1, need=need, have=c.hccl_buffsize_mb)
                out.append((limit, line))
        return out

    def _startup_lines(self) -> None:
        c = self.cfg
        self.log(f"vLLM API server version {c.version} (simulated, profile {self.profile.name})")
        # The two lines the tuner's knob check reads, in vLLM's own forms: the parsed flags
        # unlike their defaults, then the engine core's resolved config.
        self.log(f"non-default args: {c.non_default!r}")
        for note in c.notes:
            self.log(note)
        version = c.version.split()[0]  # "0.14 (vllm-ascend)": 0.14
        self.log(f"Initializing a V1 LLM engine (v{version}) with config: {self._engine_config()}")
        self.log(f"Loading weights took {weights_load_s(self.profile, c):.2f} seconds")
        for line in compile_lines(self.compiled, self.profile, self._cache_dir):
            self.log(line)
        for line in self.memory.lines(c):
            self.log(line)
        init = self.compiled.init_s
        self.log(f"init engine (profile, create kv cache, warmup model) took {init:.2f} s")

    def _engine_config(self) -> str:
        """The resolved values vLLM's engine-core line prints that the simulator knows."""
        c, k = self.cfg, self.cfg.knobs
        spec = {"method": k.spec_method, "num_speculative_tokens": k.spec_tokens}
        return (
            f"model={c.model!r}, speculative_config={spec if k.spec_method else None}, "
            f"max_seq_len={c.max_model_len}, tensor_parallel_size={c.tp}, "
            f"enforce_eager={k.cudagraph_mode == 'NONE'}, served_model_name={c.served_name}, "
            f"enable_prefix_caching={c.enable_prefix_caching}, enable_chunked_prefill=True"
        )

    @property
    def startup_s(self) -> float:
        """Seconds the real engine would take to become ready (load + compile, or load and
        graphs read from the compile cache)."""
        return weights_load_s(self.profile, self.cfg) + self.compiled.init_s

    # ---- VirtualEngine -----------------------------------------------------------------
    def run(
        self,
        requests: Sequence[BenchRequest],
        concurrency: int,
        request_rate: float | None = None,
        burstiness: float = 1.0,
    ) -> list[RequestRecord]:
        """Serves ``requests``; records in virtual seconds (see module docstring)."""
        if self.dead is not None:
            raise LaunchError(f"engine is dead: {self.dead}", FailureKind.CRASH, self.dead)
        core = self.core
        core.restart_clock()  # each run has its own virtual time; the KV cache stays warm
        arrivals = self._arrivals(len(requests), request_rate, burstiness)
        sims = [self._sim_request(i, r) for i, r in enumerate(requests)]
        runner = _Runner(core, sims, arrivals, max(1, concurrency), self.cfg.max_model_len)
        try:
            runner.loop()
        except EngineDead as dead:
            self._die(str(dead))
        finally:
            self.peaks = runner.peaks
        return [self._record(s, sent) for s, sent in zip(sims, runner.sent, strict=True)]

    def answer(self, prompt: Sequence[int], max_tokens: int) -> list[int]:
        """A greedy answer (``launchers.simengine.answers``): the same for every launch but
        where the profile says a lossy setting in force changes it."""
        return greedy_answer(prompt, max_tokens, self.profile.model.vocab, self.answer_changes())

    def answer_changes(self) -> dict[str, float]:
        """Each lossy setting in force (``kv_cache_dtype=fp8``) with the share of answers
        the profile says it changes."""
        out = {}
        for name, value in self.cfg.answer_settings().items():
            change = self.profile.answers.get(name, {}).get(value)
            if change is not None and change.changed > 0:
                out[f"{name}={value}"] = change.changed
        return out

    def gauge_peaks(self) -> dict[str, float]:
        """The gauges' largest values during the last ``run``, as a scrape would sample them:
        after each scheduler step, so a request counts as waiting only when a step left it."""
        return dict(self.peaks)

    def server_counters(self) -> dict[str, float]:
        """Cumulative counters and current gauges, named as vLLM's ``/metrics`` names them."""
        s, c = self.core.sched, self.core.counters
        return {
            "vllm:num_preemptions": s.counters["preemptions"],
            "vllm:prefix_cache_queries": s.counters["queries"],
            "vllm:prefix_cache_hits": s.counters["hits"],
            "vllm:kv_cache_usage_perc": self.core.pool.usage,
            "vllm:num_requests_running": float(len(s.running)),
            "vllm:num_requests_waiting": float(len(s.waiting)),
            "vllm:prompt_tokens": c["prompt_tokens"],
            "vllm:generation_tokens": c["generation_tokens"],
            "vllm:request_success": c["finished"],
            "vllm:spec_decode_num_drafts": c["spec_drafts"],
            "vllm:spec_decode_num_draft_tokens": c["spec_draft_tokens"],
            "vllm:spec_decode_num_accepted_tokens": c["spec_accepted"],
        }

    # ---- helpers ------------------------------------------------------------------------
    def _arrivals(self, n: int, rate: float | None, burstiness: float) -> list[float] | None:
        if rate is None or math.isinf(rate):
            return None
        shape = burstiness
        gaps = self.rng.gamma(shape, 1.0 / (rate * shape), n)
        return np.concatenate([[0.0], np.cumsum(gaps)[:-1]]).tolist()

    def _sim_request(self, i: int, r: BenchRequest) -> SimRequest:
        key = ("prefix", r.prefix_key) if r.prefix_key is not None else None
        req = SimRequest(
            self.core.new_rid(), r.prompt_len, max(1, r.output_len), key, r.prefix_len if key else 0
        )
        if self.core.lookup and len(r.prompt):
            req.draft_match = _draft_match(r)
        return req

    def _record(self, s: SimRequest, sent: float | None) -> RequestRecord:
        rec = RequestRecord(
            prompt_len=s.prompt_len,
            output_len=s.output_len,
            send_time=sent if sent is not None else 0.0,
        )
        if sent is None:
            rec.error = f"engine is dead: {self.dead}" if self.dead else "not sent"
            return rec
        if s.prompt_len + s.output_len > self.cfg.max_model_len:
            rec.error = "HTTP 400: prompt + max_tokens longer than max_model_len"
            return rec
        rec.chunk_times = list(s.chunk_times)
        rec.output_tokens = s.produced
        rec.prompt_tokens = s.prompt_len
        rec.success = s.done
        if not s.done:
            rec.error = f"engine is dead: {self.dead}" if self.dead else "stream broken"
        return rec

    def _die(self, line: str) -> None:
        self.dead = line
        self.log(f"ERROR EngineCore encountered a fatal error. {line}")
        self.log(
            "ERROR AsyncLLM output_handler failed. EngineDeadError: EngineCore encountered "
            "an issue. See stack trace (above) for the root cause."
        )
        kind = FailureKind.OOM if "OutOfMemory" in line else FailureKind.CRASH
        raise LaunchError(f"engine died under load: {line}", kind, "\n".join(self.lines[-20:]))


# A client's loop sends one request at a time (about half a millisecond apart here), so a
# closed loop's first requests reach the engine a step apart: the first prefills alone and the
# others join the next steps, beside its decodes. Sent all at one instant, every wave of equal
# requests stays in phase and never mixes a prefill with decodes, which an HTTP run does.
SEND_GAP_S = 0.0005


class _Runner:
    """Feeds one workload into the core: closed loop, or timed arrivals capped in flight."""

    def __init__(
        self,
        core: EngineCore,
        sims: list[SimRequest],
        arrivals: list[float] | None,
        concurrency: int,
        max_len: int,
    ) -> None:
        self.core = core
        self.max_len = max_len
        self.sims = sims
        self.arrivals = arrivals
        self.concurrency = concurrency
        self.sent: list[float | None] = [None] * len(sims)
        self.next = 0
        self.in_flight = 0
        self.backlog: list[tuple[float, int]] = []  # arrived, not yet sent (limit reached)
        self.peaks: dict[str, float] = {}
        core.on_finish = self._finished

    def _finished(self, req: SimRequest) -> None:
        self.in_flight -= 1

    def _send(self, i: int, t: float) -> None:
        req = self.sims[i]
        self.sent[i] = t
        if req.prompt_len + req.output_len > self.max_len:
            return  # refused by the API server (HTTP 400), never reaches the engine
        req.arrival = t
        self.in_flight += 1
        self.core.add(req)

    def _feed(self) -> None:
        now = self.core.clock
        if self.arrivals is None:
            while self.in_flight < self.concurrency and self.next < len(self.sims):
                first = self._first_wave(self.next)
                if first > now:
                    return
                self._send(self.next, min(first, now) if self.next < self.concurrency else now)
                self.next += 1
            return
        while self.next < len(self.sims) and self.arrivals[self.next] <= now:
            heapq.heappush(self.backlog, (self.arrivals[self.next], self.next))
            self.next += 1
        while self.backlog and self.in_flight < self.concurrency:
            _, i = heapq.heappop(self.backlog)
            self._send(i, now)

    def _first_wave(self, i: int) -> float:
        """When a closed loop's request ``i`` is sent: the first ``concurrency`` one client
        send apart, as a client's loop sends them, the rest as a slot frees (0 here)."""
        return i * SEND_GAP_S if i < self.concurrency else 0.0

    def _next_arrival(self) -> float:
        if self.next >= len(self.sims):
            return math.inf
        if self.arrivals is None:
            return self._first_wave(self.next) if self.next < self.concurrency else math.inf
        return self.arrivals[self.next]

    def loop(self) -> None:
        core = self.core
        while True:
            self._feed()
            if not core.busy:
                nxt = self._next_arrival()
                if math.isinf(nxt):
                    return
                core.clock = nxt
                continue
            if core.decode_stretch(self._next_arrival()):
                self._sample()
                continue
            if core.step() == 0.0:
                raise RuntimeError("scheduler made no progress")  # a bug, not a config fault
            self._sample()

    def _sample(self) -> None:
        s, now = self.core.sched, self.peaks
        for name, value in (
            ("vllm:num_requests_waiting", float(len(s.waiting))),
            ("vllm:num_requests_running", float(len(s.running))),
            ("vllm:kv_cache_usage_perc", self.core.pool.usage),
        ):
            now[name] = max(now.get(name, value), value)


# Workloads are built once per process and sent to every trial: a request's draft match is
# worked out once. Entries hold their request, so an id is never reused while cached.
_MATCHES: dict[int, tuple[BenchRequest, float]] = {}


def _draft_match(r: BenchRequest) -> float:
    hit = _MATCHES.get(id(r))
    if hit is not None and hit[0] is r:
        return hit[1]
    if len(_MATCHES) > 4096:
        _MATCHES.clear()
    share = recurring_share(token_ids(r.prompt))
    _MATCHES[id(r)] = (r, share)
    return share
