"""How fast the simulated engine serves a study's tiers in virtual time.

Workload of the ``tune run`` foundation: 60 requests of 10K-96K prompt tokens and 500-1000
output tokens per tier, tiers 1, 4, 8, 20, 40. For a few configs it times each tier with the
bulk decode stretches (the default) and, as the baseline in the same run, with every step
simulated alone; it prints seconds per tier, the speed-up, and whether both paths produced the
same median TPOT (they must: the stretches are the same steps).

    python -m bench.sim_speed
"""

from __future__ import annotations

import sys
import time

import numpy as np

from launchers.simengine import SimEngine
from objectives.metrics import compute_metrics
from objectives.records import BenchRequest
from objectives.runner import tier_duration

H200 = ["-tp", "4", "--enable-expert-parallel"]
CONFIGS = {
    "default": H200,
    "128K/32K chunks": [*H200, "--max-num-batched-tokens", "131072",
                        "--long-prefill-token-threshold", "32768", "--max-num-seqs", "40"],
    "eagle3 k=3": [*H200, "--speculative-config",
                   '{"method": "eagle3", "num_speculative_tokens": 3}'],
}  # fmt: skip
TIERS = (1, 4, 8, 20, 40)


def workload(seed: int = 0) -> list[BenchRequest]:
    rng = np.random.default_rng(seed)
    prompts = rng.choice([10_240, 16_384, 32_768, 65_536, 98_304], 60)
    outs = rng.integers(500, 1001, 60)
    return [BenchRequest("", int(p), int(o)) for p, o in zip(prompts, outs, strict=True)]


def time_tier(args: list[str], conc: int, bulk: bool) -> tuple[float, float]:
    engine = SimEngine.from_argv(args, {}, "h200x4", 0)
    engine.core.bulk = bulk
    start = time.perf_counter()
    records = engine.run(workload(), conc)
    elapsed = time.perf_counter() - start
    return elapsed, float(compute_metrics(records, tier_duration(records))["median_tpot_ms"])


def main() -> int:
    print(f"{'config':<16} {'tier':>4} {'bulk s':>8} {'step s':>8} {'speed-up':>8} {'same':>5}")
    worst = 0.0
    for name, args in CONFIGS.items():
        for conc in TIERS:
            fast, tpot_fast = time_tier(args, conc, bulk=True)
            slow, tpot_slow = time_tier(args, conc, bulk=False)
            # Same steps; the noise (and draft acceptance) draws come in a different order.
            same = abs(tpot_fast / tpot_slow - 1) < 0.05
            worst = max(worst, fast)
            print(
                f"{name:<16} {conc:>4} {fast:>8.3f} {slow:>8.3f} {slow / fast:>7.1f}x "
                f"{'yes' if same else 'NO':>5}"
            )
    print(f"slowest tier with bulk stretches: {worst:.3f} s (target well under 0.3 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
