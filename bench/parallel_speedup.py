"""Wall time of a fixed trial budget on 1, 2 and 4 slots of one node, and the speed-up.

Each run is ``tune run`` (``run_study``) on the simulated engine with the same space, seed and
budget, in a fresh results folder; only ``--slots`` changes. The simulated engine spends wall
time like a real one, scaled down: ``wall_startup_s`` stands for the engine's start-up (weights,
compile, CUDA graphs: minutes on 4x H200, here ``--startup-s``) and ``wall_time_scale`` makes
each tier's benchmark take its virtual duration times ``--scale``. Rule breakers and repeats
of a measured launch cost no launch and do not count toward the budget, as in real studies.

Every slot count is measured alike, so that no run pays a cost another reuses:

- exactly the budget's launches: confirmations are off (a one-slot ``tune run`` confirms the
  leaders after its budget and slot workers do not, which once made the one-slot baseline
  launch more engines and the speed-up look super-linear), and each run's launches are counted;
- an untimed warm-up run of every slot count first (imports, bytecode, the page cache, the
  workers' interpreters);
- then ``--repeats`` rounds in alternating order (1,2,4 then 4,2,1 ...), so drift on a shared
  machine falls on every count alike; each count's median is quoted, with its spread.

Printed side by side: median wall seconds and the runs' range, launches per minute, the speed-up
of the medians against the first count (and its range over the runs), and the ideal
(min(slots, budget) for trials that all cost the same). Process start-up of the slot workers
and the simulator's own CPU (a real engine computes on its accelerators, the simulator on this
machine's cores) keep the measured speed-up below the ideal.

Usage, from the repository root:
    python -m bench.parallel_speedup [--trials 8] [--slots 1,2,4] [--startup-s 10] [--scale 0.05]
        [--repeats 2]
"""

from __future__ import annotations

import argparse
import copy
import os
import statistics
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import optuna
import yaml

from tuner.record.trial import TrialRecord
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
    """Seconds ``tune run`` takes for exactly ``trials`` launches on ``slots`` slots."""
    space = copy.deepcopy(SPACE)
    space["target"].update(wall_startup_s=startup_s, wall_time_scale=scale)
    root.mkdir(parents=True)
    path = root / "space.yaml"
    path.write_text(yaml.safe_dump(space))
    opts = RunOptions(
        space_path=path,
        trials=trials,
        study="speedup",
        results_dir=root,
        parallel=SlotRequest(slots=slots),
        confirm=0,  # a one-slot run would confirm its leaders, a slot worker does not
    )
    start = time.perf_counter()
    run_study(opts, report=lambda _line: None)
    elapsed = time.perf_counter() - start
    if (n := launches(root)) != trials:
        raise SystemExit(f"{slots} slot(s): {n} launches, not {trials}")
    return elapsed


def launches(root: Path) -> int:
    """Engine launches the run's study holds (confirmations and failed launches too)."""
    url = f"sqlite:///{root / 'speedup' / 'study.db'}"
    trials = optuna.load_study(study_name="speedup", storage=url).get_trials(deepcopy=False)
    return sum(TrialRecord.of(t).times is not None for t in trials)


def schedule(counts: list[int], repeats: int) -> Iterator[int]:
    """``repeats`` rounds over ``counts``, every other one reversed: 1,2,4,4,2,1,1,2,4 ..."""
    for r in range(repeats):
        yield from counts if r % 2 == 0 else reversed(counts)


def measure(args: argparse.Namespace, counts: list[int], tmp: Path) -> dict[int, list[float]]:
    settings = (args.startup_s, args.scale)
    for n in counts:  # untimed: whatever a first run pays, every timed run finds paid
        run_once(n, min(n, args.trials), *settings, tmp / f"warmup_{n}")
    walls: dict[int, list[float]] = {n: [] for n in counts}
    for i, n in enumerate(schedule(counts, args.repeats)):
        walls[n].append(run_once(n, args.trials, *settings, tmp / f"run_{i}_{n}"))
    return walls


def table(walls: dict[int, list[float]], counts: list[int], trials: int) -> list[str]:
    base = walls[counts[0]]
    head = f"{'slots':>5}  {'median s':>8}  {'range s':>13}  {'launches/min':>12}  "
    lines = [head + f"{'speed-up':>8}  {'range':>11}  {'ideal':>5}"]
    for n in counts:
        mid = statistics.median(walls[n])
        lo, hi = min(walls[n]), max(walls[n])
        ideal = min(n, trials) / min(counts[0], trials)
        speed = statistics.median(base) / mid
        spread = f"{min(base) / hi:.2f}-{max(base) / lo:.2f}x" if n != counts[0] else "-"
        lines.append(
            f"{n:>5}  {mid:>8.1f}  {f'{lo:.1f}-{hi:.1f}':>13}  {60 * trials / mid:>12.1f}  "
            f"{speed:>7.2f}x  {spread:>11}  {ideal:>4.0f}x"
        )
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=8, help="launches in the budget")
    ap.add_argument("--slots", default="1,2,4", help="slot counts to compare, first = baseline")
    # A start-up of ~10 min and tiers of a few minutes, at about 1/60: start-up still dominates.
    ap.add_argument("--startup-s", type=float, default=10.0, help="wall seconds per start-up")
    ap.add_argument("--scale", type=float, default=0.05, help="wall seconds per virtual second")
    ap.add_argument("--repeats", type=int, default=2, help="timed runs of each slot count")
    args = ap.parse_args()
    counts = [int(n) for n in args.slots.split(",")]
    optuna.logging.set_verbosity(optuna.logging.WARNING)  # as the tune CLI does
    print(
        f"budget {args.trials} launches; start-up {args.startup_s:g} s; benchmark at "
        f"{args.scale:g} x virtual time; {os.cpu_count()} CPU cores on this machine; "
        f"order {','.join(map(str, schedule(counts, args.repeats)))} after an untimed warm-up"
    )
    with tempfile.TemporaryDirectory(prefix="tune-speedup-") as tmp:
        walls = measure(args, counts, Path(tmp))
    print("\n".join(table(walls, counts, args.trials)))


if __name__ == "__main__":
    main()
