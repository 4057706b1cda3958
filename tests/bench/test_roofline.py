"""The simulated H200 at short prompts never beats what its hardware allows (bench/roofline.py)."""

from __future__ import annotations

import pytest

from bench import roofline as rl
from launchers.simengine.profile import load_profile


@pytest.mark.parametrize("config", sorted(rl.CONFIGS))
@pytest.mark.parametrize("conc", [1, 8, 64])
def test_no_simulated_figure_beats_its_roofline(config: str, conc: int) -> None:
    row = rl.tier_row(config, conc)
    assert row["ttft_ms"] >= row["ttft_roof_ms"]
    assert row["tpot_ms"] >= row["tpot_roof_ms"]
    assert row["throughput"] <= row["throughput_roof"]
    assert row["step_ratio"] >= 1.0  # not one engine step shorter than the work it holds


def test_the_roofline_is_the_datasheet_applied_to_the_model_shape() -> None:
    roof = rl.Roofline(load_profile("h200x4"), kv_bytes_per_token=253_952)
    # One 1K-token prompt touches every expert: reading 229 GB of FP8 weights over four
    # GPUs' 4.8 TB/s (11.9 ms) outlasts its FLOPs at the FP8 and BF16 peaks.
    assert roof.step_s(rl.prompt_work(1024)) == pytest.approx(229e9 / (4 * 4.8e12), rel=0.01)
    # A long prompt is compute bound: attention alone is 4 x 48 heads x 128 x pairs x 62 layers.
    attention = 4 * 48 * 128 * (65_536 * 65_537 / 2) * 62 / (4 * 989e12)
    assert roof.step_s(rl.prompt_work(65_536)) > attention
    assert roof.step_s(rl.decode_work(64, 1152)) > roof.step_s(rl.decode_work(1, 1152))
