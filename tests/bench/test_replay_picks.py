"""bench/replay_picks.py replays each pick on the simulated engine under another draw."""

from __future__ import annotations

import json
from pathlib import Path

from bench.replay_picks import main, replay_workload
from objectives.workload import CodeEditDataset
from tuner.space import load_space

H200 = Path(__file__).resolve().parents[2] / "search_spaces" / "minimax_h200.yaml"


def test_the_replay_draws_other_requests_with_answers_spread_as_the_write_up() -> None:
    space = load_space(H200)
    spec = replay_workload(space, 7, 0.6)
    assert spec.seed == 7 and spec.seed != space.workload.seed
    assert isinstance(spec.dataset, CodeEditDataset) and spec.dataset.output_range_ratio == 0.6


def test_a_pick_that_stalls_its_streams_fails_the_replay(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    # One user and the engine's defaults keep every gap short; a 262144-token chunk at four
    # users holds their streams for seconds, past the space's 2 s limit on the longest gap.
    stall = {"max_num_batched_tokens": 262144, "long_prefill_token_threshold": 0}
    tiers = [
        {"concurrency": 1, "trial": 0, "params": {}},
        {"concurrency": 4, "trial": 3, "params": stall},
    ]
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "recommendations.json").write_text(json.dumps({"tiers": tiers}))
    code = main(["--space", str(H200), "--results-dir", str(tmp_path), "--study", "s"])
    out = capsys.readouterr().out
    assert code == 1 and "max_itl_ms" in out.splitlines()[-1] and "within limits" in out


def test_draws_counts_the_draws_each_pick_held_on(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    tiers = [{"concurrency": 1, "trial": 0, "params": {}}]
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "recommendations.json").write_text(json.dumps({"tiers": tiers}))
    args = ["--space", str(H200), "--results-dir", str(tmp_path), "--study", "s", "--draws", "3"]
    code = main(args)
    last = capsys.readouterr().out.splitlines()[-1].split()
    assert code == 0 and last[:3] == ["c1", "0", "3/3"] and len(last) == 6  # a gap per draw
