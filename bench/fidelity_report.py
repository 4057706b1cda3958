"""Scoring and printing for ``bench/sim_fidelity.py``: which figures and checks are required,
the mechanism of the simulated engine each figure comes out of, why a figure is reported only,
the spread of one long prompt's TTFT across configs, and each profile's fitted factors."""

from __future__ import annotations

from dataclasses import dataclass

from launchers.simengine.profile import factor_value, load_profile

TOLERANCE = 0.15
P99_TOLERANCE = 0.25  # a 60-request P99 is its two slowest requests: scenario 2's P99s
TTFT_CONFIGS = ("S0", "S1", "S2", "S3")  # scenario 1a's configs: one 150K-token prompt each
# What each figure comes out of in the step-time model and the scheduler (launchers/simengine).
MECHANISMS = {
    ("s1a", "peak_generation_throughput"): "one 150K context's KV reads, split-KV occupancy",
    ("s1b", "output_throughput"): "8K chunks beside decodes: attention over context + GEMMs",
    ("s1b", "p99_tpot_ms"): "short answers decoding through a backlog of prefill chunk steps",
    ("s1b", "total_token_throughput vs S0"): "FLASH_ATTN's varlen decode tiles, MoE kernels",
    ("s2", "median_tpot_ms"): "closed-loop waves: a wave's prefill steps hold its decodes",
    ("s2", "p99_tpot_ms"): "stall: a prefill step holding a 2-7-token answer's decode",
    ("ascend", "median_tpot_ms"): "100K-token KV reads, host launch, fused MC2 (fitted)",
}
# Figures printed but not required, and why.
REPORTED_WHY = {
    ("s1b_S3", "p99_tpot_ms"): "a backlog holds a decode as long in S3's 32K chunks as in "
    "S2's 8K ones (the same work); the write-up's halving would need a cost per mixed step "
    "that a small chunk pays as a big one does",
    ("s2_medium", "p99_tpot_ms"): "the two slowest of 60 requests: where the short answers "
    "fall against the prefill steps (--draws shows the spread)",
    ("s2_large", "p99_tpot_ms"): "as medium's",
}


@dataclass(frozen=True)
class Row:
    scenario: str
    metric: str
    published: float
    simulated: float
    required: bool = True
    tolerance: float = TOLERANCE

    @property
    def error(self) -> float:
        return self.simulated / self.published - 1

    @property
    def within(self) -> bool:
        return abs(self.error) <= self.tolerance

    @property
    def mechanism(self) -> str:
        return MECHANISMS.get((self.scenario.split("_")[0], self.metric), "")


def ttft_spread(results: dict[str, dict]) -> tuple[list[float], float]:
    """One 150K-token prompt's TTFT (s) in each of S0..S3, and max / min - 1."""
    ttft = [results[f"s1a_{c}"]["mean_ttft_ms"] / 1000 for c in TTFT_CONFIGS]
    return ttft, max(ttft) / min(ttft) - 1


def fitted_lines(profiles: tuple[str, ...] = ("h200x4", "910c")) -> list[str]:
    """Each profile's fitted factors: path = value, and the figures it moves."""
    lines = ["fitted factors (set only to match the figures named; all others cite a source)"]
    for name in profiles:
        prof = load_profile(name)
        for path, moves in prof.fitted.items():
            lines.append(f"  {name} {path} = {factor_value(prof, path)}: {moves}")
    return lines


def print_table(rows: list[Row]) -> bool:
    """The figures, their errors and mechanisms; True when every required one is within its
    tolerance. Then why each reported-only figure is not required."""
    print(
        f"{'scenario':<12} {'metric':<30} {'published':>9} {'simulated':>9} {'error':>7} "
        f"{'bar':>4}  mechanism"
    )
    for r in rows:
        note = "" if r.required else "  (reported only)"
        mark = "ok" if r.within else "MISS"
        print(
            f"{r.scenario:<12} {r.metric:<30} {r.published:>9.2f} {r.simulated:>9.2f} "
            f"{r.error:>+7.1%} {r.tolerance:>4.0%}  {mark:<4} {r.mechanism}{note}"
        )
    required = [r for r in rows if r.required]
    worst = max(abs(r.error) for r in required)
    print(f"worst error of required figures: {worst:.1%} (limit {TOLERANCE:.0%})")
    for r in rows:
        if not r.required:
            print(f"reported only, {r.scenario} {r.metric}: {REPORTED_WHY[(r.scenario, r.metric)]}")
    return all(r.within for r in required)


def print_checks(results: dict[str, dict], tiers: list[tuple[str, str, str, bool]]) -> bool:
    """Conclusions, rankings and the TTFT spread; True when every required one holds."""
    ok = True
    for tier, want, got, required in tiers:
        ok &= want == got or not required
        verdict = ("ok" if want == got else "MISMATCH") + ("" if required else " (reported only)")
        print(f"{tier:<32} expected {want:<7} simulated {got:<7} {verdict}")
    return print_ranking(results) & print_ttft(results) & ok


def print_ranking(results: dict[str, dict]) -> bool:
    # S1 and S2 run the same kernels: the FlashInfer MoE env wins over DeepGEMM MoE, and
    # VLLM_USE_DEEP_GEMM is 1 by default; the write-up's +37 % / +45 % are two runs. S2 > S3
    # at P99 rests on S3's P99, reported only: printed, not required.
    tput = [results[f"s1b_{c}"]["output_throughput"] for c in ("S0", "S1", "S2")]
    p99 = [results[f"s1b_{c}"]["p99_tpot_ms"] for c in ("S0", "S2", "S3")]
    ranked = tput[0] < tput[1] <= tput[2] and p99[0] > p99[1]
    print(f"ranking S0<S1<=S2 throughput, S0>S2 p99 TPOT: {'ok' if ranked else 'MISMATCH'}")
    s3 = "ok" if p99[1] > p99[2] else "MISMATCH"
    print(f"ranking S2>S3 p99 TPOT: {s3} (reported only)")
    return ranked


def print_ttft(results: dict[str, dict]) -> bool:
    ttft, spread = ttft_spread(results)
    shown = " ".join(f"{c} {t:.2f}" for c, t in zip(TTFT_CONFIGS, ttft, strict=True))
    verdict = "ok" if spread <= TOLERANCE else "MISMATCH"
    print(f"150K-token TTFT s: {shown}; spread {spread:.1%} (limit {TOLERANCE:.0%}) {verdict}")
    return spread <= TOLERANCE
