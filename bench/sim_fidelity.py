"""How closely the simulated engine reproduces published vLLM figures (domain.md section 5).

For each scenario it runs the simulated engine in virtual time, computes the ``vllm bench
serve`` metric set with the project's one metrics function, and prints the published figure,
the simulated one, the error, its bar and the mechanism of the engine the figure comes out of;
then the per-tier conclusions (which batching config wins median TPOT at low concurrency and
P99 TPOT at high concurrency), the spread of one 150K-token prompt's TTFT across S0..S3 (one
long prefill is bound by its context) and the factors each profile lists as fitted. It exits 0
when every required figure is within 15 % and every required check holds. Reported only, with
the reason printed: scenario 2's P99 TPOTs (bar 25 %: a 60-request P99 is where two short
answers fall against the prefill steps; ``bench/scenario2_readings.py`` scores every reading
of that workload) and 1b S3's P99 TPOT. ``--json`` prints one object keyed by scenario
(``s1a_S0`` ... ``ascend_opt``), each the full metric set.

Workloads whose lengths the sources do not publish are fixed here (seeded) and documented:
scenario 1b draws 60 prompts from the 10K/16K/32K/64K/96K buckets the authors use; scenario
2's answers mostly run to a 500-token cap, two of them stop within a few tokens.

    python -m bench.sim_fidelity [--json] [--seed N] [--draws N]

``--draws N`` instead runs scenario 2 at c=20 on N draws of its unpublished workload details
and prints, per batching config, the median TPOT, the P99 TPOT's quartiles across draws and
in how many draws it had the best P99: the published P99 figures are one such draw.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

if __package__ in (None, ""):  # run as a file, `python bench/x.py`: the repository root too
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.fidelity_report import P99_TOLERANCE, Row, fitted_lines, print_checks, print_table
from launchers.simengine import SimEngine
from objectives.metrics import compute_metrics
from objectives.race import request_series
from objectives.records import BenchRequest, RequestRecord
from objectives.runner import tier_duration

H200 = ("-tp", "4", "--enable-expert-parallel", "--max-model-len", "196608")
FLASHINFER_MOE = {
    "VLLM_USE_FLASHINFER_MOE_FP8": "1",
    "VLLM_USE_FLASHINFER_MOE_FP16": "1",
    "VLLM_FLASHINFER_MOE_BACKEND": "throughput",
}
DEEP_GEMM_DENSE_ONLY = {"VLLM_USE_DEEP_GEMM": "1", "VLLM_MOE_USE_DEEP_GEMM": "0"}
S1_ARGS = (*H200, "--attention-backend", "FLASHINFER")
S2_ENV = FLASHINFER_MOE | DEEP_GEMM_DENSE_ONLY
SEQS = ("--max-num-seqs", "40")
SMALL = ("--max-num-batched-tokens", "64000", "--long-prefill-token-threshold", "6000")
MEDIUM = ("--max-num-batched-tokens", "131072", "--long-prefill-token-threshold", "32768")
LARGE = ("--max-num-batched-tokens", "262144")


@dataclass(frozen=True)
class Config:
    args: tuple[str, ...]
    env: dict[str, str] = field(default_factory=dict)
    profile: str = "h200x4"


CONFIGS = {
    "S0": Config(H200),
    "S1": Config(S1_ARGS, FLASHINFER_MOE),
    "S2": Config(S1_ARGS, S2_ENV),
    "S3": Config((*S1_ARGS, *MEDIUM, *SEQS), S2_ENV),
    "small": Config((*S1_ARGS, *SMALL, *SEQS), S2_ENV),
    "medium": Config((*S1_ARGS, *MEDIUM, *SEQS), S2_ENV),
    "large": Config((*S1_ARGS, *LARGE, *SEQS), S2_ENV),
    "ascend_base": Config(("-tp", "16", "--enable-expert-parallel"), {}, "910c"),
    "ascend_opt": Config(
        (
            "-tp", "16", "--enable-expert-parallel",
            "--speculative-config", '{"method": "suffix", "num_speculative_tokens": 3}',
        ),
        {
            "HCCL_OP_EXPANSION_MODE": "AIV",
            "VLLM_ASCEND_ENABLE_FUSED_MC2": "1",
            "VLLM_ASCEND_ENABLE_FLASHCOMM1": "1",
            "TASK_QUEUE_ENABLE": "2",
            "HCCL_BUFFSIZE": "1024",
        },
        "910c",
    ),
}  # fmt: skip


def workload_1a() -> list[BenchRequest]:
    """One 150K-token prompt, 2000 output tokens: a generation long enough that whole 10-s
    stats windows fall inside it wherever they start (the write-up reads peak generation off
    the engine's stats lines)."""
    return [BenchRequest("", 150_000, 2000)]


def workload_1b(seed: int = 0) -> list[BenchRequest]:
    """60 coding prompts: 10K-96K buckets (shorter ones likelier), outputs 90-3000 tokens.

    Coding answers are either short (a fix, a tool call) or long (a file): a wide lognormal
    clipped at both ends.
    """
    rng = np.random.default_rng(1000 + seed)
    buckets = np.array([10_240, 16_384, 32_768, 65_536, 98_304])
    lens = rng.choice(buckets, 60, p=[0.25, 0.2, 0.2, 0.2, 0.15]) - rng.integers(0, 2000, 60)
    outs = rng.lognormal(np.log(1700), 1.8, 60).astype(int).clip(90, 3000)
    return [BenchRequest("", int(p), int(o)) for p, o in zip(lens, outs, strict=True)]


def workload_2(
    seed: int = 0, order: str = "in-a-row", outputs: str = "per-request", cap: int = 500
) -> list[BenchRequest]:
    """20 prompts of 50K-60K tokens, each sent 3 times (prefix-cache reuse).

    Outputs: answers of lognormal length around 750 tokens, cut at the client's ``cap``
    (max_tokens), so most run to the cap; two of them 2-7-token answers. The defaults are the
    reading this bench scores; ``bench/scenario2_readings.py`` tries the others: ``order``
    ``in-a-row`` (a prompt's three sends back to back), ``rounds`` (three passes over the 20
    prompts) or ``shuffled``; ``outputs`` ``per-request`` or ``per-prompt`` (the three sends of
    a prompt give the same answer).
    """
    rng = np.random.default_rng(2027 + seed)
    lens = rng.integers(50_000, 60_000, 20)
    n = 20 if outputs == "per-prompt" else 60
    outs = rng.lognormal(np.log(750), 0.5, n).astype(int).clip(60, cap)
    short = rng.choice(n, 2, replace=False)
    outs[short] = rng.integers(2, 8, 2)
    prompts = np.arange(60) // 3
    if order == "rounds":
        prompts = np.arange(60) % 20
    elif order == "shuffled":
        prompts = rng.permutation(prompts)
    return [
        BenchRequest("", int(lens[k]), int(outs[k if n == 20 else i]), f"doc{k}", int(lens[k]))
        for i, k in enumerate(prompts)
    ]


def workload_ascend() -> list[BenchRequest]:
    """100K-token prompts, 1K outputs, 10 requests (one round at concurrency 10)."""
    return [BenchRequest("", 100_000, 1000) for _ in range(10)]


@dataclass(frozen=True)
class Scenario:
    name: str
    config: str
    workload: list[BenchRequest]
    concurrency: int
    published: dict[str, float]  # metric key -> published figure the simulator must meet
    reported: dict[str, float] = field(default_factory=dict)  # printed, not required


def scenarios() -> list[Scenario]:
    one = workload_1a()
    coding = workload_1b()
    reuse = workload_2()
    return [
        Scenario("s1a_S0", "S0", one, 1, {"peak_generation_throughput": 46}),
        Scenario("s1a_S1", "S1", one, 1, {}),
        Scenario("s1a_S2", "S2", one, 1, {}),
        Scenario("s1a_S3", "S3", one, 1, {"peak_generation_throughput": 80}),
        Scenario("s1b_S0", "S0", coding, 20, {"output_throughput": 200, "p99_tpot_ms": 1019}),
        Scenario("s1b_S1", "S1", coding, 20, {}),
        Scenario("s1b_S2", "S2", coding, 20, {"output_throughput": 289.96, "p99_tpot_ms": 484}),
        Scenario("s1b_S3", "S3", coding, 20, {}, {"p99_tpot_ms": 261.75}),
        Scenario("s2_small", "small", reuse, 20, {"median_tpot_ms": 80.1}),
        Scenario("s2_medium", "medium", reuse, 20, {"median_tpot_ms": 63.7}, {"p99_tpot_ms": 518}),
        Scenario("s2_large", "large", reuse, 20, {"median_tpot_ms": 48}, {"p99_tpot_ms": 2271}),
        Scenario("ascend_base", "ascend_base", workload_ascend(), 10, {"median_tpot_ms": 102}),
        Scenario("ascend_opt", "ascend_opt", workload_ascend(), 10, {"median_tpot_ms": 65}),
    ]


def measure(config: str, workload: list[BenchRequest], concurrency: int, seed: int) -> dict:
    c = CONFIGS[config]
    engine = SimEngine.from_argv(c.args, c.env, c.profile, seed)
    records = engine.run(workload, concurrency)
    metrics: dict = compute_metrics(records, tier_duration(records))
    metrics["peak_generation_throughput"] = peak_generation(records)
    metrics["stalls"] = stalls(records)
    return metrics


def stalls(records: list[RequestRecord]) -> dict[str, float]:
    """What sets a P99 TPOT over few requests: the slowest request's answer length and longest
    gap, beside the longest gap of the run and the answer length of the request that met it."""
    series = request_series(records)  # per request, seconds; None where it has no such figure
    tpot, gap = ([v or 0.0 for v in series[k]] for k in ("tpot", "max_gap"))
    slow, stalled = int(np.argmax(tpot)), int(np.argmax(gap))
    return {
        "slowest_tokens": records[slow].output_tokens,
        "slowest_gap_ms": gap[slow] * 1000,
        "longest_gap_ms": gap[stalled] * 1000,
        "longest_gap_tokens": records[stalled].output_tokens,
    }


def stall_lines(results: dict[str, dict]) -> list[str]:
    """Scenario 2's P99s in terms of their mechanism: whether its short answers met the
    longest prefill steps."""
    lines = []
    for name in ("s2_small", "s2_medium", "s2_large"):
        st = results[name]["stalls"]
        slow, longest = st["slowest_gap_ms"] / 1000, st["longest_gap_ms"] / 1000
        lines.append(
            f"{name}: slowest request by TPOT answered {st['slowest_tokens']:.0f} tokens and "
            f"met a {slow:.1f} s gap; the run's longest gap, {longest:.1f} s, fell in a "
            f"{st['longest_gap_tokens']:.0f}-token answer"
        )
    return lines


def peak_generation(records: list[RequestRecord], window: float = 10.0) -> float:
    """Highest generated tokens/s over the engine's 10-s stats windows."""
    times = np.concatenate([np.asarray(r.chunk_times) for r in records if r.chunk_times])
    if times.size == 0:
        return 0.0
    start = min(r.send_time for r in records)
    bins = np.floor((times - start) / window).astype(int)
    full = bins < bins.max()  # the last window is partial
    counts = np.bincount(bins[full]) if full.any() else np.bincount(bins)
    return float(counts.max() / window)


def run_all(seed: int) -> tuple[dict[str, dict], list[Row]]:
    results: dict[str, dict] = {}
    rows: list[Row] = []
    for s in scenarios():
        m = results[s.name] = measure(s.config, s.workload, s.concurrency, seed)
        rows += [Row(s.name, k, v, m[k]) for k, v in s.published.items()]
        rows += [Row(s.name, k, v, m[k], False, _bar(s.name, k)) for k, v in s.reported.items()]
    base, s1 = results["s1b_S0"], results["s1b_S1"]
    ratio = s1["total_token_throughput"] / base["total_token_throughput"]
    rows.append(Row("s1b_S1", "total_token_throughput vs S0", 1.37, ratio))
    return results, rows


def _bar(scenario: str, metric: str) -> float:
    return P99_TOLERANCE if scenario.startswith("s2_") and metric == "p99_tpot_ms" else 0.15


BATCHING = ("small", "medium", "large")  # scenario 2's three chunking configs


def conclusions(seed: int) -> list[tuple[str, str, str, bool]]:
    """Which batching config wins at low and high concurrency: (tier, expected, simulated,
    required); the c=20 P99 one rests on scenario 2's P99 figures, so it is reported only."""
    reuse = workload_2()
    out = []
    for conc, key, want, required in ((4, "median_tpot_ms", "large", True),
                                      (20, "p99_tpot_ms", "small", False)):  # fmt: skip
        got = {c: measure(c, reuse, conc, seed)[key] for c in BATCHING}
        out.append((f"c={conc} best {key}", want, min(got, key=got.__getitem__), required))
    return out


def over_draws(draws: int, seed: int) -> dict[str, list[tuple[float, float]]]:
    """Scenario 2 at c=20 over ``draws`` draws of the workload details the sources leave out
    (output lengths, which answers are short): (median TPOT, P99 TPOT) per batching config.

    P99 of a 60-request run is set by its two or three slowest requests, here the short
    answers and whatever stalls fall inside them, so one draw says little about a config."""
    out: dict[str, list[tuple[float, float]]] = {c: [] for c in BATCHING}
    for w in range(draws):
        reuse = workload_2(w)
        for c in BATCHING:
            m = measure(c, reuse, 20, seed)
            out[c].append((m["median_tpot_ms"], m["p99_tpot_ms"]))
    return out


def draws_lines(runs: dict[str, list[tuple[float, float]]]) -> list[str]:
    """One line per config: medians and P99 quartiles across draws, and how often it has the
    best P99 of the three."""
    p99 = np.array([[p for _, p in runs[c]] for c in BATCHING])
    wins = np.bincount(p99.argmin(axis=0), minlength=len(BATCHING))
    lines = [f"scenario 2 at c=20 over {p99.shape[1]} workload draws"]
    lines.append(
        f"{'config':<8} {'median TPOT':>12} {'P99 TPOT q1 / median / q3':>28} {'best P99':>9}"
    )
    for i, c in enumerate(BATCHING):
        med = float(np.median([m for m, _ in runs[c]]))
        q1, q2, q3 = np.percentile(p99[i], [25, 50, 75])
        lines.append(f"{c:<8} {med:>12.1f} {q1:>10.0f} / {q2:>5.0f} / {q3:>5.0f} {wins[i]:>9d}")
    return lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print every scenario's metric set")
    ap.add_argument("--seed", type=int, default=0, help="engine noise seed")
    ap.add_argument(
        "--draws",
        type=int,
        default=0,
        help="instead, run scenario 2 at c=20 on this many workload draws",
    )
    opts = ap.parse_args(argv)
    if opts.draws:
        print("\n".join(draws_lines(over_draws(opts.draws, opts.seed))))
        return 0
    results, rows = run_all(opts.seed)
    if opts.json:
        print(json.dumps(results, indent=1, sort_keys=True))
        return 0
    ok = print_table(rows)
    print("\n".join(stall_lines(results)))
    ok &= print_checks(results, conclusions(opts.seed))
    print("\n".join(fitted_lines()))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
