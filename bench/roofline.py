"""The simulated H200 at short prompts against what the hardware allows at all.

Away from the long-context figures its profile was fitted to, is the simulated engine still
physically possible? For 1K-token prompts and 128 output tokens at c1-c64 it serves the
MiniMax-M2.5 space's engine (vLLM's defaults, and FlashInfer attention + MoE) in virtual time
and sets each figure beside its roofline, computed here from the model's shape (domain.md
section 1) and the H200's datasheet (989 dense BF16 / 1979 FP8 TFLOP/s and 4.8 TB/s of HBM per
GPU, 4 GPUs), with every efficiency at 1 and nothing else on the GPUs:

- TTFT >= one prompt's prefill alone: its GEMM FLOPs at the FP8 peak plus its attention FLOPs
  at the BF16 peak, or the weights it touches read once, whichever is longer;
- TPOT >= one decode step of a single sequence (the cheapest step a token can come from);
- output throughput <= c tokens per decode step of c sequences (weights touched by c rows,
  their KV, their FLOPs), so c / that step's time.

The engine's own steps are checked too: no simulated step is shorter than the roofline of the
work it holds (``step_ratio``, the smallest simulated / roofline over every step, must be >= 1).

    python -m bench.roofline [--tiers 1,2,4,8,16,32,64]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass

import numpy as np

from launchers.simengine import SimEngine
from launchers.simengine.model import StepWork
from launchers.simengine.profile import Profile
from objectives.metrics import compute_metrics
from objectives.records import BenchRequest
from objectives.runner import tier_duration

H200 = ("-tp", "4", "--enable-expert-parallel", "--max-model-len", "196608")
FLASHINFER = ("--attention-backend", "FLASHINFER")
FLASHINFER_MOE = {"VLLM_USE_FLASHINFER_MOE_FP8": "1", "VLLM_FLASHINFER_MOE_BACKEND": "throughput"}
CONFIGS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "defaults": (H200, {}),
    "flashinfer": ((*H200, *FLASHINFER), FLASHINFER_MOE),
}
PROMPT, OUTPUT = 1024, 128


@dataclass(frozen=True)
class Roofline:
    """Datasheet bounds of one profile's node: FLOP/s and bytes/s summed over its devices."""

    profile: Profile
    kv_bytes_per_token: int  # as the launch stores its KV cache (BF16, or FP8: half)

    def step_s(self, w: StepWork) -> float:
        """The least time any step holding ``w`` can take."""
        m, hw = self.profile.model, self.profile.hardware
        rows = w.n_dec + w.pf_tokens
        flops_8 = 2 * rows * self._active_params()
        pairs = w.pf_pairs + w.ctx_dec  # a decode row attends to its whole context
        flops_16 = 4 * m.q_heads * m.head_dim * pairs * m.layers
        read = self._weights_read(rows) + (w.ctx_dec + w.pf_ctx) * self.kv_bytes_per_token
        devices = hw.devices
        compute = flops_8 / (hw.tflops_8bit * 1e12) + flops_16 / (hw.tflops_16bit * 1e12)
        return max(compute, read / (hw.hbm_tbs * 1e12)) / devices

    def _active_params(self) -> float:
        """Weights one token multiplies: attention projections, router, its top_k experts."""
        m = self.profile.model
        attn = m.hidden * (m.q_heads + 2 * m.kv_heads) * m.head_dim
        attn += m.q_heads * m.head_dim * m.hidden + m.hidden * m.experts
        return m.layers * (attn + 3 * m.hidden * m.expert_ffn * m.top_k)

    def _weights_read(self, rows: int) -> float:
        """Bytes of weights ``rows`` tokens touch: all but the experts none of them chose."""
        m = self.profile.model
        expert = 3 * m.hidden * m.expert_ffn * m.layers * m.experts
        rest = m.total_params_b * 1e9 - expert
        hit = 1 - (1 - m.top_k / m.experts) ** rows
        return (rest + expert * hit) * m.weight_bytes


def prompt_work(tokens: int) -> StepWork:
    return StepWork(n_pf=1, pf_tokens=tokens, pf_pairs=tokens * (tokens + 1) / 2, pf_ctx=tokens)


def decode_work(seqs: int, ctx: int) -> StepWork:
    return StepWork(n_dec=seqs, ctx_dec=float(seqs * ctx))


def tier_row(config: str, conc: int, seed: int = 0) -> dict[str, float]:
    """One tier: the simulated figures, their rooflines, and the engine's closest step."""
    args, env = CONFIGS[config]
    engine = SimEngine.from_argv(list(args), env, "h200x4", seed)
    roof = Roofline(engine.profile, engine.model.k.kv_bytes_per_token)
    ratios: list[float] = []
    _watch_steps(engine, roof, ratios)
    count = max(16, 4 * conc)
    records = engine.run([BenchRequest("", PROMPT, OUTPUT) for _ in range(count)], conc)
    m = compute_metrics(records, tier_duration(records))
    decode_c = roof.step_s(decode_work(conc, PROMPT + OUTPUT))
    return {
        "ttft_ms": float(m["median_ttft_ms"]),
        "ttft_roof_ms": roof.step_s(prompt_work(PROMPT)) * 1e3,
        "tpot_ms": float(m["median_tpot_ms"]),
        "tpot_roof_ms": roof.step_s(decode_work(1, PROMPT)) * 1e3,
        "tpot_roof_c_ms": decode_c * 1e3,
        "throughput": float(m["output_throughput"]),
        "throughput_roof": conc / decode_c,
        "step_ratio": min(ratios),
    }


def _watch_steps(engine: SimEngine, roof: Roofline, ratios: list[float]) -> None:
    """Every step the engine times, set against its roofline (single steps and stretches)."""
    model = engine.model
    step_s, decode_s = model.step_s, model.decode_s

    def one(w: StepWork) -> float:
        t = step_s(w)
        ratios.append(t / roof.step_s(w))
        return t

    def stretch(n_dec: int, ctx_dec: np.ndarray) -> np.ndarray:
        ts = decode_s(n_dec, ctx_dec)
        bound = np.array([roof.step_s(StepWork(n_dec=n_dec, ctx_dec=float(c))) for c in ctx_dec])
        ratios.append(float(np.min(ts / bound)))
        return ts

    model.step_s = one  # type: ignore[method-assign]
    model.decode_s = stretch  # type: ignore[method-assign]


def table(tiers: list[int]) -> list[str]:
    head = (
        f"{'config':<11} {'tier':>4} {'TTFT ms':>8} {'roof':>6} {'TPOT ms':>8} {'roof 1':>6} "
        f"{'roof c':>6} {'out tok/s':>9} {'roof':>7} {'step/roof':>9}"
    )
    lines = [head]
    for config in CONFIGS:
        for conc in tiers:
            r = tier_row(config, conc)
            lines.append(
                f"{config:<11} {'c' + str(conc):>4} {r['ttft_ms']:>8.1f} {r['ttft_roof_ms']:>6.1f} "
                f"{r['tpot_ms']:>8.2f} {r['tpot_roof_ms']:>6.2f} {r['tpot_roof_c_ms']:>6.2f} "
                f"{r['throughput']:>9.0f} {r['throughput_roof']:>7.0f} {r['step_ratio']:>9.2f}"
            )
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tiers", default="1,2,4,8,16,32,64", help="concurrency tiers")
    opts = ap.parse_args(argv)
    print("\n".join(table([int(t) for t in opts.tiers.split(",")])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
