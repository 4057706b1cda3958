"""Wall time of a fixed trial budget on 1, 2 and 4 slots of one node, and the speed-up.

Each run is ``tune run`` (``run_study``) on the simulated engine with the same space, seed and
budget, in a fresh results folder; only ``--slots`` changes. The simulated engine spends wall
time like a real one, scaled down: ``wall_startup_s`` stands for the engine's start-up (weights,
compile, CUDA graphs: minutes on 4x H200, here ``--startup-s``) and ``wall_time_scale`` makes
each tier's benchmark take its virtual duration times ``--scale``. Rule breakers and repeats
of a measured launch cost no launch and do not count toward the budget, as in real studies.

Printed side by side: wall seconds, launches per minute, speed-up against 1 slot, and the
ideal (min(slots, budget) for trials that all cost the same). Process start-up of the slot
workers and the simulator's own CPU (a real engine computes on its accelerators, the
simulator on this machine's cores) keep the measured speed-up below the ideal.

Usage, from the repository root:
    python -m bench.parallel_speedup [--trials 8] [--slots 1,2,4] [--startup-s 10] [--scale 0.05]
"""

from __future__ import annotations

import argparse
import copy
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import optuna
import yaml

from tuner.run.slots import SlotRequest
from tuner.run.study import RunOptions, run_study

SPACE: dict[str, Any] = {
    "description": "parallel-slot benchmark: the simulated 4x H200 engine, wall time scaled",
    "hardware": "simulated 4x H200",
    "engine": {"name": "vllm", "version": "0.17.1", "model": "org/model"},
    "target": {"kind": "sim", "profile": "h200x4"},
    "base": {"args": {"tensor-parallel-size": 4, "enable-expert-parallel": True}},
    "parameters": {
        "max_num_batched_tokens": {
            "type": "categorical",
            "choices": [2048, 4096, 8192, 16384, 32768],
            "default": 8192,
            "flag": "--max-num-batched-tokens",
        },
        "max_num_seqs": {
            "type": "categorical",
            "choices": [8, 16, 32, 64, 128],
            "default": 64,
            "flag": "--max-num-seqs",
        },
    },
    "workload": {
        "dataset": {"kind": "random", "input_len": 2000, "output_len": 128, "range_ratio": 0.5},
        "num_prompts": 8,
        "warmup": 1,
        "tiers": [1, 8],
        "seed": 3,
    },
    "study": {"objective": "p99_tpot", "seed": 1},
}


def run_once(slots: int, trials: int, startup_s: float, scale: float, root: Path) -> float:
    """Seconds ``tune run`` takes for ``trials`` launches on ``slots`` slots."""
    space = copy.deepcopy(SPACE)
    space["target"].update(wall_startup_s=startup_s, wall_time_scale=scale)
    path = root / f"space_{slots}.yaml"
    path.write_text(yaml.safe_dump(space))
    opts = RunOptions(
        space_path=path,
        trials=trials,
        study=f"speedup_{slots}",
        results_dir=root / f"results_{slots}",
        parallel=SlotRequest(slots=slots),
    )
    start = time.perf_counter()
    summary = run_study(opts, report=lambda _line: None)
    elapsed = time.perf_counter() - start
    if summary.finished_trials != trials:
        raise SystemExit(f"{slots} slot(s): {summary.finished_trials} launches, not {trials}")
    return elapsed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8, help="launches in the budget")
    ap.add_argument("--slots", default="1,2,4", help="slot counts to compare, first = baseline")
    # A start-up of ~10 min and tiers of a few minutes, at about 1/60: start-up still dominates.
    ap.add_argument("--startup-s", type=float, default=10.0, help="wall seconds per start-up")
    ap.add_argument("--scale", type=float, default=0.05, help="wall seconds per virtual second")
    args = ap.parse_args()
    counts = [int(n) for n in args.slots.split(",")]
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as the tune CLI does
    print(
        f"budget {args.trials} launches; start-up {args.startup_s:g} s; benchmark at "
        f"{args.scale:g} x virtual time; {os.cpu_count()} CPU cores on this machine"
    )
    walls: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="tune-speedup-") as tmp:
        for n in counts:
            walls[n] = run_once(n, args.trials, args.startup_s, args.scale, Path(tmp))
    base = walls[counts[0]]
    print(f"{'slots':>5}  {'wall s':>7}  {'launches/min':>12}  {'speed-up':>8}  {'ideal':>5}")
    for n in counts:
        rate = 60 * args.trials / walls[n]
        ideal = min(n, args.trials) / min(counts[0], args.trials)
        print(f"{n:>5}  {walls[n]:>7.1f}  {rate:>12.1f}  {base / walls[n]:>7.2f}x  {ideal:>4.0f}x")


if __name__ == "__main__":
    main()
