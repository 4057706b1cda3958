"""What ``bench.sim_vs_real`` measures: the workloads, the calibration and held-out configs of
search_spaces/vllm_cpu.yaml, and one fresh engine's figures (real, or simulated on a profile)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from bench.llamacpp_recommendation import run_fresh
from objectives.objective import get_objective
from tuner.errors import TunerError
from tuner.run.trial import TrialRunner
from tuner.space import Space
from tuner.space.render import render_engine_config
from tuner.space.schema import TargetSpec

ROOT = Path(__file__).resolve().parents[1]
SPACE = ROOT / "search_spaces" / "vllm_cpu.yaml"
PROFILE = ROOT / "launchers" / "simengine" / "profiles" / "cpu.yaml"
CLIENT_LAG_LIMIT_MS = 400
ACCEPTANCE = "spec_decode_acceptance_rate"
FIT_KEYS = ("median_tpot_ms", "median_ttft_ms", "output_throughput", ACCEPTANCE)
SHOWN = ("median_tpot_ms", "p99_tpot_ms", "median_ttft_ms", "output_throughput")
# name -> (input_len, output_len, tiers, prompts)
WORKLOADS = {
    "short": (192, 32, [1, 4, 16], 16),
    "long": (1024, 32, [1, 4], 8),
    "held": (384, 64, [2, 6, 12], 12),
}
CALIBRATION: list[tuple[str, str, dict[str, Any]]] = [
    ("defaults", "short", {}),
    ("eager", "short", {"execution": "eager"}),
    ("defaults", "long", {}),
    ("ngram2", "short", {"num_speculative_tokens": 2}),
    # Eager at a second prompt length (its cost grows with the tokens a step holds), and a
    # prompt chunked beside decodes (256-token steps of 1024-token prompts, at c4).
    ("eager", "long", {"execution": "eager"}),
    ("budget256", "long", {"max_num_batched_tokens": 256}),
]
HELD_OUT: list[tuple[str, dict[str, Any]]] = [
    ("defaults", {}),
    ("seqs4", {"max_num_seqs": 4}),
    ("budget256", {"max_num_batched_tokens": 256}),
    ("cap64", {"max_num_batched_tokens": 512, "long_prefill_token_threshold": 64}),
    ("block32-eager", {"block_size": 32, "execution": "eager"}),
    ("O0", {"optimization_level": 0}),
    ("ngram2", {"num_speculative_tokens": 2}),
    ("kv2-budget1024", {"kv_cache_space": "2", "max_num_batched_tokens": 1024}),
]


def workload_space(space: Space, name: str) -> Space:
    """The space serving workload ``name`` (prompt and output lengths, tiers, prompt count)."""
    input_len, output_len, tiers, prompts = WORKLOADS[name]
    w = space.workload
    dataset = w.dataset.model_copy(update={"input_len": input_len, "output_len": output_len})
    # The client shares its core with vLLM's API server: at c16 its event loop was up to 200 ms
    # late in 3 of 3 runs with the machine idle; the server's own figures are what is compared.
    update = {"dataset": dataset, "tiers": tiers, "num_prompts": prompts}
    workload = w.model_copy(update={**update, "client_lag_limit_ms": CLIENT_LAG_LIMIT_MS})
    return space.model_copy(update={"workload": workload, "slos": []})


def simulated(space: Space, profile_file: Path) -> Space:
    target = TargetSpec(kind="sim", profile_file=profile_file, compile_cache=False)
    return space.model_copy(update={"target": target})


def measure(space: Space, params: dict[str, Any], run_dir: Path) -> dict[str, dict[str, float]]:
    """Per tier, the SHOWN metrics of one fresh engine serving ``params``."""
    runner = TrialRunner(space, get_objective("p99_tpot"), space.study.ready_timeout_s, ROOT)
    outcome = run_fresh(
        runner, render_engine_config(space, {**space.defaults(), **params}), run_dir
    )
    if outcome is None or outcome.failure:
        raise TunerError(f"{run_dir.name}: {outcome.failure if outcome else 'infra faults'}")
    return {t: tier_figures(m) for t, m in outcome.tiers.items()}


def tier_figures(metrics: dict[str, Any]) -> dict[str, float]:
    """The SHOWN metrics of a tier, and the server's draft acceptance where it drafted."""
    out = {k: float(metrics[k]) for k in SHOWN if k in metrics}
    rate = (metrics.get("server") or {}).get(ACCEPTANCE)
    if rate:
        out[ACCEPTANCE] = float(rate)
    return out


def measure_all(space: Space, out: Path, real: dict[str, Any]) -> dict[str, Any]:
    """The real engine's figures for the calibration configs, the held-out configs, the held
    workload's defaults once more on a fresh engine (the run-to-run spread) and the calibration
    configs again; what ``real`` already holds is kept, not measured again."""
    cal = [(f"{lb}/{wl}", wl, ps, f"cal-{lb}-{wl}") for lb, wl, ps in CALIBRATION]
    jobs = [("calibration", *job) for job in cal]
    jobs += [("held", label, "held", params, label) for label, params in HELD_OUT]
    jobs.append(("again", "defaults", "held", {}, "defaults-again"))
    # Measured again after the held-out configs: the fit takes both passes, so a machine
    # that got slower or faster during the sitting moves calibration and held-out alike.
    jobs += [("calibration_after", key, wl, ps, f"{run}-after") for key, wl, ps, run in cal]
    for part, key, wl, params, run in jobs:
        if key in real.setdefault(part, {}):
            continue
        print(f"real: {part} {key}", file=sys.stderr)
        real[part][key] = measure(workload_space(space, wl), params, out / "real" / run)
        (out / "measured.json").write_text(json.dumps(real, indent=1))
    return real
