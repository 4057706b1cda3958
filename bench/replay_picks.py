"""Do a study's picks hold under traffic they were not tuned on?

Each tier's pick (``recommendations.json`` of the study) is launched on the simulated engine
and sent the space's workload drawn again with another seed (other files, other edits, other
answer lengths) and, for a code_edit workload, answers spread at least as widely as the
write-up's scenario 2 traffic (``--output-range-ratio``, default 0.5: 300-900 tokens around
600): long prompts, variable outputs. Per tier it prints the pick's longest inter-token gap,
P99 ITL, P99 TTFT and gaps over the long-gap threshold, the baseline's beside it, and whether
the pick stays within every SLO the space sets for that tier; it exits 1 when one does not.

    python -m bench.replay_picks [--space search_spaces/minimax_h200.yaml]
        [--results-dir results] [--study NAME] [--seed 7] [--output-range-ratio 0.5]
        [--draws 1]

With ``--draws N`` it replays seeds ``seed`` .. ``seed + N - 1`` and then prints, per tier, on
how many of those draws the pick stayed within every limit and its longest gap on each.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from launchers.simengine import SimEngine
from objectives.datasets import build_requests
from objectives.metrics import compute_metrics, slo_violations
from objectives.runner import tier_duration
from objectives.workload import CodeEditDataset, WorkloadSpec
from tuner.run.context import REHEARSAL_SUFFIX
from tuner.space import load_space
from tuner.space.render import render_engine_config
from tuner.space.schema import Space

SHOWN = ("max_itl_ms", "p99_itl_ms", "p99_ttft_ms", "long_gaps")


def replay_workload(space: Space, seed: int, ratio: float) -> WorkloadSpec:
    """The space's workload with another seed, and code_edit answers spread by ``ratio``."""
    ds = space.workload.dataset
    if isinstance(ds, CodeEditDataset):
        ds = ds.model_copy(update={"output_range_ratio": max(ds.output_range_ratio, ratio)})
    return space.workload.model_copy(update={"seed": seed, "dataset": ds})


def measure(space: Space, params: dict[str, Any], spec: WorkloadSpec, tier: int) -> dict:
    """One tier of ``params`` on the simulated engine, as a trial measures it."""
    launch = render_engine_config(space, params)
    assert space.sim is not None, "the space names no simulated profile (sim:)"
    engine = SimEngine.from_argv(
        launch.args, launch.env, space.sim["profile"], spec.seed, version=space.engine.version
    )
    records = engine.run(build_requests(spec), tier)
    mine = [s for s in space.slos if s.applies_to(tier)]
    metrics = compute_metrics(records, tier_duration(records), mine, spec.long_gap_s)
    return {**metrics, "violations": slo_violations(metrics, mine, tier)}


def rows(space: Space, recs: list[dict], spec: WorkloadSpec) -> list[dict]:
    out = []
    for rec in recs:
        if rec.get("trial") is None:
            continue
        tier = rec["concurrency"]
        pick = measure(space, rec["params"], spec, tier)
        base = measure(space, {}, spec, tier)
        out.append({"tier": tier, "trial": rec["trial"], "pick": pick, "baseline": base})
    return out


def table(found: list[dict]) -> list[str]:
    head = f"{'tier':>5} {'trial':>5}  " + "  ".join(f"{k:>20}" for k in SHOWN) + "  verdict"
    lines = [head + "   (pick / baseline)", "-" * len(head)]
    for r in found:
        cells = "  ".join(f"{_num(r['pick'][k])} / {_num(r['baseline'][k]):>8}" for k in SHOWN)
        held = (
            "within limits" if not r["pick"]["violations"] else "; ".join(r["pick"]["violations"])
        )
        lines.append(f"{'c' + str(r['tier']):>5} {r['trial']:>5}  {cells}  {held}")
    return lines


def across(space: Space, recs: list[dict], seeds: list[int], ratio: float) -> list[dict]:
    """Per tier, the pick's longest gap on each seed's draw and the draws it held on."""
    out = []
    for rec in recs:
        if rec.get("trial") is None:
            continue
        tier = rec["concurrency"]
        runs = [
            measure(space, rec["params"], replay_workload(space, s, ratio), tier) for s in seeds
        ]
        held = sum(not r["violations"] for r in runs)
        gaps = [r["max_itl_ms"] for r in runs]
        out.append({"tier": tier, "trial": rec["trial"], "held": held, "gaps": gaps})
    return out


def across_table(found: list[dict], seeds: list[int]) -> list[str]:
    lines = [f"{'tier':>5} {'trial':>5}  held  longest gap (ms) on seeds {seeds[0]}..{seeds[-1]}"]
    for r in found:
        gaps = " ".join(f"{g:.0f}" for g in r["gaps"])
        lines.append(
            f"{'c' + str(r['tier']):>5} {r['trial']:>5}  {r['held']:>2}/{len(seeds)}  {gaps}"
        )
    return lines


def _num(x: float) -> str:
    return f"{x:>9.0f}" if abs(x) >= 100 else f"{x:>9.1f}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--space", type=Path, default=Path("search_spaces/minimax_h200.yaml"))
    ap.add_argument("--results-dir", type=Path, default=Path("results"))
    ap.add_argument("--study", help="study name (default: the space's rehearsal, STEM-sim)")
    ap.add_argument("--seed", type=int, default=7, help="the replay's seed (the study's: 42)")
    ap.add_argument("--output-range-ratio", type=float, default=0.5)
    ap.add_argument("--draws", type=int, default=1, help="replay this many seeds from --seed")
    args = ap.parse_args(argv)
    space = load_space(args.space)
    study = args.study or f"{args.space.stem}{REHEARSAL_SUFFIX}"
    recs = json.loads((args.results_dir / study / "recommendations.json").read_text())["tiers"]
    spec = replay_workload(space, args.seed, args.output_range_ratio)
    found = rows(space, recs, spec)
    print(f"study {study!r}, replayed with seed {spec.seed} on the simulated engine:")
    print("\n".join(table(found)))
    broke = any(r["pick"]["violations"] for r in found)
    if args.draws > 1:
        seeds = list(range(args.seed, args.seed + args.draws))
        many = across(space, recs, seeds, args.output_range_ratio)
        print("\n" + "\n".join(across_table(many, seeds)))
        broke = broke or any(r["held"] < len(seeds) for r in many)
    return 1 if broke else 0


if __name__ == "__main__":
    sys.exit(main())
