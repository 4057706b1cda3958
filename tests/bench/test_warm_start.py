"""The warm-start bench: its truth is sample_efficiency's, its priors are what they claim, and
its warm search goes through tune run's own warm-start path."""

from __future__ import annotations

import importlib
import math
from pathlib import Path
from types import ModuleType

import pytest
import yaml

from bench import sweep
from bench import warm_start_priors as priors
from tuner.samplers.additive import AdditiveSampler
from tuner.space.schema import Space

# Two attention backends x two MoE backends x two seat counts: 8 launches at 2 prompts a tier.
NARROW = {
    "attention_backend": ["FLASH_ATTN", "FLASHINFER"],
    "moe_backend": ["triton", "flashinfer_cutlass"],
    "deep_gemm_dense": ["1"],
    "deep_gemm_moe": ["1"],
    "max_num_batched_tokens": [8192],
    "long_prefill_token_threshold": [0],
    "max_num_seqs": [16, 256],
    "spec_method": ["ngram"],
    "num_speculative_tokens": [0],
}


@pytest.fixture(scope="module")
def ws() -> ModuleType:
    return importlib.import_module("bench.warm_start")


def test_the_truth_is_the_sample_efficiency_benchmarks_space(
    ws: ModuleType, se: ModuleType
) -> None:
    """Same space, so the same cache key: either bench's sweep serves the other."""
    assert Space.model_validate(priors.space_data(20, 3)) == se.bench_space(sweep.SPACE, 20, 3)


def test_the_misleading_profile_swaps_the_kernels_and_the_helpful_one_is_slower(
    ws: ModuleType, tmp_path: Path
) -> None:
    shipped = yaml.safe_load(priors.PROFILE.read_text())
    bad = yaml.safe_load(priors.perturbed_profile("misleading", tmp_path).read_text())
    moe, attn = shipped["moe_backends"], shipped["attention_backends"]
    assert bad["moe_backends"]["triton"]["bw_eff"] == moe["flashinfer_cutlass"]["bw_eff"]
    overflow = "fails_above_tokens"  # no efficiency: stays triton's
    assert bad["moe_backends"]["triton"][overflow] == moe["triton"][overflow]
    assert bad["attention_backends"]["FLASHINFER"] == attn["FLASH_ATTN"]
    good = yaml.safe_load(priors.perturbed_profile("helpful", tmp_path).read_text())
    assert good["hardware"]["hbm_tbs"] < shipped["hardware"]["hbm_tbs"]
    assert good["moe_backends"] == moe and good["attention_backends"] == attn


def test_rank_correlation_reads_order_and_ties(ws: ModuleType) -> None:
    assert ws.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert ws.spearman([1, 2, 3, 4], [40, 30, 20, 10]) == pytest.approx(-1.0)
    assert ws.spearman([1, 1, 2, 3], [5, 5, 6, 7]) == pytest.approx(1.0)
    assert math.isnan(ws.spearman([1, 2], [1, 2]))


def test_the_table_has_a_row_per_tier_and_one_for_every_tier(ws: ModuleType) -> None:
    result = ws.PriorResult(
        name="helpful",
        cold=[[4, 6, None], [5, 9, 12]],
        warm=[[2, 3, 4], [5, None, 3]],
        agreement=[[(0.9, 1.0), (0.8, 1.1)]] * 3,
        queued=[2, 3, 2],
        earlier_launches=[30, 31, 30],
        weights=[[1.0, 0.5]] * 3,
    )
    lines = ws.render(result, [1, 4], 60).splitlines()
    assert "30-31 launches" in lines[0] and "2-3 picks" in lines[0]
    assert lines[-3].split() == ["c1", "6", "3", "0.50", "4..>60", "2..4"]
    assert lines[-2].split() == ["c4", "9", "5", "0.56", "5..12", "3..>60"]
    assert lines[-1].split() == ["all", "9", "5", "0.56", "5..>60", "4..>60"]


@pytest.fixture(scope="module")
def small(ws: ModuleType, tmp_path_factory: pytest.TempPathFactory) -> object:
    """A small bench: the narrow space's truth, one real earlier study on the helpful
    profile (4 trials)."""
    folder = tmp_path_factory.mktemp("warm_bench")
    data = priors.space_data(2, 0, NARROW)
    table: dict = {}
    ws.measure_all(Space.model_validate(data), table, ["a"], 1)
    priors.perturbed_profile("helpful", folder)
    setup = ws.Setup(data, table, ("a",), 4, 4, folder)
    ws.earlier_study((setup, "helpful", 0))
    return setup


def test_the_warm_search_queues_the_earlier_picks_and_samples_with_its_prior(
    ws: ModuleType, small: object
) -> None:
    warm = ws.warm_start(small, "helpful", 0)
    assert warm.queue and len(warm.prior.points) >= 2
    launches, study = ws.search_table(small, 0, warm)
    assert isinstance(study.sampler, AdditiveSampler) and study.sampler.prior is not None
    assert study.sampler.prior.prior is warm.prior
    trials = study.trials
    assert trials[0].user_attrs["baseline"] is True
    queued = trials[1 : 1 + len(warm.queue)]
    assert [t.user_attrs["warm_start_from"]["study"] for t in queued] == ["helpful-0"] * len(
        warm.queue
    )
    assert [t.params for t in queued] == [config for _, config in warm.queue]
    assert len(launches) == 4  # the queued picks are launches of the budget


def test_a_cold_search_has_no_prior_and_nothing_queued(ws: ModuleType, small: object) -> None:
    _, study = ws.search_table(small, 0, None)
    assert study.sampler.prior is None
    assert not any("warm_start_from" in t.user_attrs for t in study.trials)
