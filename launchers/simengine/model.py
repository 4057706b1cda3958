"""Step-time model: how long one engine step takes on the profile's hardware.

A step runs every scheduled token through the model once. Its time is the sum of rooflines of
the work it holds, per device (tensor parallel over ``devices``, experts split over the same
devices under expert parallel), plus fixed costs:

- dense GEMMs (attention projections, router, LM head): ``max(weight bytes / HBM bandwidth,
  FLOPs / (8-bit peak x efficiency))``, where M rows cost as ``M + dense_half_rows`` rows
  (tile padding: small M leaves tensor cores idle); DeepGEMM (``VLLM_USE_DEEP_GEMM=1``) raises
  the efficiency for M >= 128 and falls back below.
- MoE: each of the M rows goes to top_k of the experts; a device reads the weights of the
  experts it owns that were hit at least once (``E_d x (1 - (1 - top_k/E)^M)``: this is why
  decode cost grows with batch size) and runs one GEMM per hit expert, costed as its rows plus
  the backend's ``half_rows``. DeepGEMM MoE needs >= 128 rows per expert and falls back to the
  Triton kernel below that; experts split N/TP ways (no expert parallel) run less efficiently;
  each backend has a fixed per-layer cost (routing, permutation, launches) and, for some, a
  token count above which it crashes (a known bug the profile names).
- attention: a prefill chunk does ``4 x heads x head_dim`` FLOPs per query-key pair (causal
  chunks attend to everything before them: the cost grows with the context, the linear layers'
  with the tokens) at the backend's fraction of 16-bit peak; decode reads every sequence's KV
  cache (``kv bytes/token x context``) at the backend's fraction of HBM bandwidth, which
  split-KV occupancy lowers when few sequences are decoding (``decode_half_seqs``): the reason
  a single 150K-token decode is backend sensitive. A step holding both costs both: a big chunk
  holds every decode in its step for as long as the chunk takes, a small one barely. A backend
  that serves a mixed batch with one varlen kernel (FLASH_ATTN) computes each decoding
  sequence as a query tile of ``varlen_decode_rows`` rows per head against its whole context,
  without split-KV (``varlen_decode_eff``); FlashInfer runs decode rows in its decode kernel.
- collectives: per layer one attention all-reduce and the MoE dispatch + combine, each a
  latency plus a ring transfer of ``M x hidden x 2`` bytes; Ascend's HCCL AIV shortens the
  latency, FlashComm1 the bytes, fused MC2 overlaps the MoE exchange with its GEMMs.
- fixed costs: non-GEMM kernels per layer; graph replay of a decode-only step (kernels outside
  the captured graphs pay a launch each, ``eager_attn_us`` and ``eager_rest_us`` per layer;
  uncompiled, every batched token pays the unfused ops, ``eager_token_us`` per layer); a step
  holding prefill runs attention outside the full decode graph (``mixed_step_ms``, whatever
  the chunk's size); Ascend's host op dispatch (``TASK_QUEUE_ENABLE``; the step takes ``max(
  device, host)``); CPU scheduling, hidden by async scheduling (``max`` instead of sum).
- speculative decoding: each decoding sequence carries 1 + k query rows (verification) and
  drafting costs ``draft_ms_per_token x k`` on the device (eagle3, mtp) or the CPU (ngram,
  suffix).

Datasheet figures and model shapes come from the profile; each efficiency and fixed cost there
names its source or is in the profile's ``fitted`` section with the figures it moves.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from launchers.simengine.profile import MoeBackend, Profile

# DeepGEMM's grouped GEMM needs at least this many rows per expert (its M alignment).
DEEP_GEMM_MIN_ROWS = 128
TP_SHARD_MOE_EFF = 0.8  # MoE GEMM efficiency with tensor-parallel-sharded experts
# Drafters that propose continuations found in the request's own context (and, for suffix
# decoding, earlier outputs): vLLM's n-gram prompt lookup and Arctic Inference's suffix trees.
PROMPT_LOOKUP = frozenset({"ngram", "suffix"})


@dataclass(frozen=True)
class Knobs:
    """The engine configuration the step-time model depends on (resolved from argv + env)."""

    attention: str
    moe: str
    deep_gemm_dense: bool
    async_scheduling: bool
    spec_method: str | None = None
    spec_tokens: int = 0
    kv_bytes_per_token: int = 0
    hccl_aiv: bool = False
    fused_mc2: int = 0
    flashcomm1: bool = False
    task_queue: int = 0
    cpu_binding: bool = False
    devices: int = 0  # tensor-parallel ranks (0: all of the profile's devices)
    expert_parallel: bool = True
    cudagraph_mode: str = "FULL_AND_PIECEWISE"  # vLLM's default since 0.11
    max_capture: int = 512  # largest decode batch (query rows) a full graph was captured for


@dataclass(frozen=True)
class StepWork:
    """What one step computes: decoding sequences and prefill chunks."""

    n_dec: int = 0  # sequences decoding (each 1 + spec_tokens query rows)
    ctx_dec: float = 0.0  # sum of their context lengths (KV tokens read)
    n_pf: int = 0  # sequences with a prefill chunk
    pf_tokens: int = 0  # prompt tokens computed this step
    pf_pairs: float = 0.0  # causal query-key pairs of those chunks
    pf_ctx: float = 0.0  # KV tokens the chunks read (earlier context + the chunk)


class StepModel:
    """Step time in seconds for a ``StepWork`` under a profile and a configuration."""

    def __init__(self, profile: Profile, knobs: Knobs, speed: float = 1.0) -> None:
        self.p = profile
        self.k = knobs
        self.speed = speed  # per-launch factor (run-to-run noise), 1.0 = nominal
        m, hw = profile.model, profile.hardware
        self.devices = knobs.devices or hw.devices
        self.kv_shards = min(self.devices, m.kv_heads)  # fewer KV heads than ranks: replicated
        self.bw = hw.hbm_tbs * 1e12
        self.peak8 = hw.tflops_8bit * 1e12
        self.peak16 = hw.tflops_16bit * 1e12
        attn_proj = m.hidden * (m.q_heads + 2 * m.kv_heads) * m.head_dim
        attn_proj += m.q_heads * m.head_dim * m.hidden + m.hidden * m.experts
        self.dense_params = m.layers * attn_proj
        self.lm_params = m.vocab * m.hidden
        self.expert_params = 3 * m.hidden * m.expert_ffn * m.layers
        self.attn = profile.attention_backends[knobs.attention]
        self.moe = profile.moe_backends[knobs.moe]
        self.fallback = profile.moe_backends.get("triton", self.moe)
        self.q_rows = 1 + knobs.spec_tokens

    def step_s(self, w: StepWork) -> float:
        """Seconds one step takes (scalar)."""
        return float(self._time(w.n_dec, w.ctx_dec, w))

    def decode_s(self, n_dec: int, ctx_dec: np.ndarray) -> np.ndarray:
        """Seconds of decode-only steps with ``n_dec`` sequences, one per context sum."""
        return np.asarray(self._time(n_dec, ctx_dec, StepWork()), dtype=float)

    def _time(self, n_dec: int, ctx_dec: float | np.ndarray, w: StepWork) -> float | np.ndarray:
        rows = n_dec * self.q_rows + w.pf_tokens
        sampled = n_dec * self.q_rows + w.n_pf
        device: float | np.ndarray = self._dense(rows, sampled) + self._moe(rows)
        device = device + self._comm(rows)
        device = device + self._attention(n_dec, ctx_dec, w)
        device = device + self._fixed(rows, w.pf_tokens) + self._device_draft(n_dec)
        device = np.maximum(device, self._host_launch())
        cpu = self._cpu(n_dec + w.n_pf)
        total = np.maximum(device, cpu) + 2e-4 if self.k.async_scheduling else device + cpu
        return total * self.speed

    def _dense(self, rows: int, sampled: int) -> float:
        d, wb = self.devices, self.p.model.weight_bytes
        o = self.p.overheads
        eff = o.deep_gemm_dense_eff if self.k.deep_gemm_dense and rows >= 128 else o.dense_eff
        # Same padding model as the MoE GEMMs: rows cost as rows + dense_half_rows.
        padded = rows + o.dense_half_rows
        flops = 2 * (self.dense_params * padded + self.lm_params * (sampled + 1)) / d
        read = (self.dense_params * wb + self.lm_params * 2) / d / (self.bw * 0.85)
        return max(read, flops / (self.peak8 * eff)) if rows else 0.0

    def _moe(self, rows: int) -> float:
        if rows == 0:
            return 0.0
        m = self.p.model
        per_expert = rows * m.top_k / m.experts
        be = self._moe_kernel(per_expert)
        hit = 1 - (1 - m.top_k / m.experts) ** rows  # chance an expert gets >= 1 row
        touched = m.experts / self.devices * hit
        read = touched * self.expert_params * m.weight_bytes / (self.bw * be.bw_eff)
        # Each touched expert runs a GEMM of rows_t rows that costs as if it had
        # rows_t + half_rows rows at the kernel's peak efficiency (tile padding, launch tail).
        rows_t = per_expert / hit
        flops = 2 * touched * self.expert_params * (rows_t + be.half_rows)
        # Without expert parallel every expert is split N/TP ways (1536/4 = 384 columns):
        # narrow tiles run at a lower fraction of peak.
        shard = 1.0 if self.k.expert_parallel or self.devices == 1 else TP_SHARD_MOE_EFF
        compute = flops / (self.peak8 * be.gemm_eff * shard)
        return max(read / shard, compute) + m.layers * be.layer_us * 1e-6

    def _moe_kernel(self, per_expert: float) -> MoeBackend:
        if self.k.moe == "deep_gemm" and per_expert < DEEP_GEMM_MIN_ROWS:
            return self.fallback
        return self.moe

    def _attention(
        self, n_dec: int, ctx_dec: float | np.ndarray, w: StepWork
    ) -> float | np.ndarray:
        """The prefill chunks' attention plus the decode rows', which a backend running one
        varlen kernel for a mixed batch serves with its prefill kernel."""
        if w.pf_tokens and self.attn.varlen_decode_rows:
            return self._varlen_decode(n_dec, ctx_dec) + self._attn_prefill(w)
        return self._attn_decode(n_dec, ctx_dec) + self._attn_prefill(w)

    def _attn_decode(self, n_dec: int, ctx_dec: float | np.ndarray) -> float | np.ndarray:
        if n_dec == 0:
            return 0.0
        a = self.attn
        eff = a.decode_eff * n_dec / (n_dec + a.decode_half_seqs)
        verify = 1 + 0.05 * self.k.spec_tokens  # extra query rows reuse the KV they read
        return self._kv_read(ctx_dec) * verify / (self.bw * eff)

    def _kv_read(self, ctx: float | np.ndarray) -> float | np.ndarray:
        return ctx * self.k.kv_bytes_per_token / self.kv_shards

    def _varlen_decode(self, n_dec: int, ctx_dec: float | np.ndarray) -> float | np.ndarray:
        """Decode rows inside a varlen prefill kernel: each sequence's query (1 + k tokens)
        fills a query tile of ``varlen_decode_rows`` rows per head, computed against its whole
        context, and no split-KV pass spreads its KV over the device: one tile streams the
        whole context (``varlen_decode_eff`` of 16-bit peak)."""
        if n_dec == 0:
            return 0.0
        m, a = self.p.model, self.attn
        heads = m.q_heads / self.devices
        flops = 4 * a.varlen_decode_rows * m.head_dim * heads * ctx_dec * m.layers
        compute = flops / (self.peak16 * a.varlen_decode_eff)
        read = self._kv_read(ctx_dec) / (self.bw * a.decode_eff)
        return np.maximum(compute, read)

    def _attn_prefill(self, w: StepWork) -> float:
        if w.pf_tokens == 0:
            return 0.0
        m = self.p.model
        flops = 4 * m.q_heads * m.head_dim * w.pf_pairs * m.layers / self.devices
        read = w.pf_ctx * self.k.kv_bytes_per_token / self.kv_shards / (self.bw * 0.7)
        return flops / (self.peak16 * self.attn.prefill_eff) + read

    def _comm(self, rows: int) -> float:
        hw, m, a = self.p.hardware, self.p.model, self.p.ascend
        lat = hw.collective_us * 1e-6 * (a.aiv_collective_factor if self.k.hccl_aiv else 1.0)
        nbytes = rows * m.hidden * 2 * 2 * (self.devices - 1) / self.devices
        if self.k.flashcomm1:
            nbytes *= a.flashcomm1_comm_factor
        one = lat + nbytes / (hw.link_gbs * 1e9)
        moe_exposed = a.mc2_moe_comm_factor if self._mc2_active(rows) else 1.0
        moe_ops = 2 if self.k.expert_parallel else 1  # dispatch + combine, or one all-reduce
        return m.layers * one * (1 + moe_ops * moe_exposed)

    def _mc2_active(self, rows: int) -> bool:
        # Mode 2 fuses decode steps only; a step is "decode" when it is small.
        mc2 = self.k.fused_mc2
        return mc2 == 1 or (mc2 == 2 and rows <= 512)

    def _fixed(self, rows: int, pf_tokens: int) -> float:
        o, m = self.p.overheads, self.p.model
        fused = self.p.ascend.fused_ops_factor if self.k.fused_mc2 else 1.0
        layer = m.layers * o.layer_us * 1e-6 * fused
        elementwise = m.layers * rows * m.hidden * 2 * 12 / self.devices / self.bw
        # A step holding prefill runs outside the full decode graph: its launch cost does not
        # depend on how many tokens the chunk holds.
        launch = o.decode_graph_ms + (o.mixed_step_ms if pf_tokens else 0.0)
        return layer + elementwise + launch * 1e-3 + self._eager(rows, pf_tokens)

    def _eager(self, rows: int, pf_tokens: int) -> float:
        """Launch costs of kernels a step runs outside graphs, relative to the profile's
        default cudagraph mode (which its calibrated fixed costs already hold)."""
        mine = self._eager_us(self.k.cudagraph_mode, rows, pf_tokens, self.k.max_capture)
        # The calibration's decode batches were all within the captured sizes.
        default = self._eager_us(self.p.defaults.cudagraph_mode, rows, pf_tokens, rows)
        return self.p.model.layers * (mine - default) * 1e-6

    def _eager_us(self, mode: str, rows: int, pf_tokens: int, capture: int) -> float:
        """Per layer, us: FULL_AND_PIECEWISE replays a full graph for decode-only steps up to
        the largest captured size and piecewise graphs (attention eager) for the rest;
        PIECEWISE leaves attention eager in every step; FULL_DECODE_ONLY runs mixed steps
        fully eager; NONE runs everything eager (vLLM's CUDA graphs design notes) and, with
        nothing compiled, each op the compiler fuses reads and writes the step's activations on
        its own: a cost per batched token, so a step holding a long prompt pays the most. A
        mixed step's piecewise cost is in ``mixed_step_ms``."""
        o = self.p.overheads
        full_graph = pf_tokens == 0 and rows <= capture
        attn = 0.0 if pf_tokens else o.eager_attn_us
        if mode == "NONE":
            return o.eager_attn_us + o.eager_rest_us + o.eager_token_us * rows
        if mode == "PIECEWISE" or (mode == "FULL_AND_PIECEWISE" and not full_graph):
            return attn
        return 0.0 if full_graph else o.eager_rest_us + attn  # FULL_DECODE_ONLY, FULL

    def _host_launch(self) -> float:
        o = self.p.overheads
        factor = self.p.ascend.task_queue_launch_factor[self.k.task_queue]
        if self.k.cpu_binding:
            factor *= self.p.ascend.cpu_binding_launch_factor
        return o.host_launch_ms * factor * 1e-3

    def _cpu(self, seqs: int) -> float:
        o = self.p.overheads
        cpu = o.sched_ms * 1e-3 + o.sched_us_per_seq * 1e-6 * seqs
        spec = self._spec()
        if spec is not None and not spec[1]:
            cpu += spec[0] * self.k.spec_tokens * 1e-3
        return cpu

    def _device_draft(self, n_dec: int) -> float:
        spec = self._spec()
        if spec is None or not spec[1] or n_dec == 0:
            return 0.0
        return spec[0] * self.k.spec_tokens * 1e-3

    def _spec(self) -> tuple[float, bool] | None:
        if not self.k.spec_method:
            return None
        s = self.p.speculative[self.k.spec_method]
        return s.draft_ms_per_token, s.draft_on_device

    def prompt_lookup(self) -> bool:
        """Whether drafts come from matching the context (n-gram, suffix decoding)."""
        return self.k.spec_method in PROMPT_LOOKUP

    def acceptance(self) -> float:
        """Probability each successive draft token is accepted (0 without spec decoding)."""
        if not self.k.spec_method:
            return 0.0
        return self.p.speculative[self.k.spec_method].acceptance
