"""``--warm-start``: an earlier study's picks queued first, valid in the new space; its
measurements the sampler's prior, never trials of the new study; the source recorded."""

from __future__ import annotations

import copy
import json
import shutil
from pathlib import Path
from typing import Any

import optuna
import pytest

from tests.tuner.conftest import SMALL_SPACE, write_yaml
from tuner.errors import StudyError
from tuner.run.context import open_study, prepare
from tuner.run.join import WorkerOptions, join_study
from tuner.run.study import RunOptions, run_study
from tuner.samplers.additive import AdditiveSampler
from tuner.space import load_space
from tuner.space.translate import queued

QUIET = {"report": lambda _: None}


def new_space(data: dict[str, Any]) -> dict[str, Any]:
    """A neighbouring space: the prefill cap gone, other seat counts, a knob the earlier
    study did not have."""
    params = data["parameters"]
    del params["long_prefill_token_threshold"]
    data["rules"] = []
    params["max_num_seqs"].update(choices=[8, 32, 128], default=128)
    params["gpu_memory_utilization"] = {
        "type": "categorical",
        "choices": [0.9, 0.92],
        "default": 0.9,
        "flag": "--gpu-memory-utilization",
    }
    return data


@pytest.fixture(scope="module")
def earlier(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished 6-trial study 'old' of the small space; returns its results folder."""
    root = tmp_path_factory.mktemp("warm")
    path = write_yaml(root / "old.yaml", copy.deepcopy(SMALL_SPACE))
    run_study(RunOptions(space_path=path, results_dir=root, study="old", confirm=0), **QUIET)
    return root


def options(results: Path, **kw: Any) -> RunOptions:
    path = write_yaml(results / "new.yaml", new_space(copy.deepcopy(SMALL_SPACE)))
    kw.setdefault("study", "new")
    return RunOptions(space_path=path, results_dir=results, confirm=0, **kw)


def load(results: Path, name: str) -> optuna.Study:
    return optuna.load_study(study_name=name, storage=f"sqlite:///{results / name / 'study.db'}")


def test_the_earlier_picks_come_first_after_the_baseline_and_are_valid_here(
    earlier: Path, tmp_path: Path
) -> None:
    results = _copy(earlier, tmp_path)
    run_study(options(results, warm_start="old", trials=5), **QUIET)
    picks = json.loads((results / "old" / "recommendations.json").read_text())["tiers"]
    space = load_space(results / "new.yaml")
    expected = []
    for rec in picks:
        config = queued(rec["params"], space)
        if config is not None and config != space.defaults() and config not in expected:
            expected.append(config)
    assert expected  # the earlier study picked something other than the defaults
    trials = load(results, "new").trials
    assert trials[0].user_attrs["baseline"] is True
    queued_trials = trials[1 : 1 + len(expected)]
    assert [t.params for t in queued_trials] == expected
    assert all(t.user_attrs["warm_start_from"]["study"] == "old" for t in queued_trials)
    for t in queued_trials:  # every value one the new space takes
        assert all(space.parameters[n].contains(v) for n, v in t.params.items())
        assert set(t.params) == set(space.parameters)


def test_the_earlier_measurements_are_never_trials_of_the_new_study(
    earlier: Path, tmp_path: Path
) -> None:
    results = _copy(earlier, tmp_path)
    summary = run_study(options(results, warm_start="old", trials=4), **QUIET)
    new, old = load(results, "new"), load(results, "old")
    assert len(new.trials) == 4  # its own launches, nothing copied in
    assert all(t.user_attrs.get("fingerprint") for t in new.trials)  # each launched here
    own = {t.number: t.values for t in new.trials}
    for rec in summary.recommendations:
        assert set(rec.runs) <= set(own)
    assert new.user_attrs["warm_start"] == {"study": "old", "storage": None}
    assert "warm_start" not in old.user_attrs or old.user_attrs["warm_start"] is None


def test_the_sampler_gets_the_earlier_measurements_as_its_prior(
    earlier: Path, tmp_path: Path
) -> None:
    results = _copy(earlier, tmp_path)
    ctx = prepare(options(results, warm_start="old"))
    assert ctx.warm is not None
    measured = [t for t in load(results, "old").trials if t.user_attrs.get("fingerprint")]
    assert ctx.warm.prior.values.shape == (len(measured), 2)
    assert all("long_prefill_token_threshold" not in p for p in ctx.warm.prior.points)
    assert all(p["gpu_memory_utilization"] is None for p in ctx.warm.prior.points)
    sampler = open_study(ctx).sampler
    assert isinstance(sampler, AdditiveSampler) and sampler.prior is not None


def test_a_launch_on_another_draw_of_the_workload_is_not_in_the_prior(
    earlier: Path, tmp_path: Path
) -> None:
    results = _copy(earlier, tmp_path)
    old = load(results, "old")
    first = next(t for t in old.trials if t.user_attrs.get("fingerprint"))
    attrs = {**first.user_attrs, "confirm_of": first.number, "draw_seed": 99, "draw_for": 1}
    old.add_trial(
        optuna.trial.create_trial(
            params=first.params,
            distributions=first.distributions,
            values=[v * 3 for v in first.values],
            user_attrs=attrs,
        )
    )
    ctx = prepare(options(results, warm_start="old"))
    assert ctx.warm is not None
    own = [
        t for t in old.trials if t.user_attrs.get("fingerprint") and "draw_seed" not in t.user_attrs
    ]
    assert ctx.warm.prior.values.shape == (len(own), 2)


def test_a_worker_joining_a_warm_started_study_samples_with_its_prior(
    earlier: Path, tmp_path: Path
) -> None:
    results = _copy(earlier, tmp_path)
    run_study(options(results, warm_start="old", trials=2), **QUIET)
    url = f"sqlite:///{results / 'new' / 'study.db'}"
    joined = join_study(WorkerOptions(study="new", storage=url, results_dir=results), **QUIET)
    assert joined.ctx.warm is not None and joined.ctx.warm.study == "old"
    sampler = joined.study.sampler
    assert isinstance(sampler, AdditiveSampler) and sampler.prior is not None


@pytest.mark.parametrize(
    ("kw", "says"),
    [
        ({"warm_start": "nope"}, "--warm-start nope: no study 'nope' under"),
        ({"warm_start": "new"}, "cannot warm-start itself"),
        ({"warm_start": "old", "objective": "p99_ttft"}, "it optimised p99_tpot, not p99_ttft"),
        ({"warm_start_storage": "sqlite:///x.db"}, "give both"),
    ],
)
def test_a_warm_start_that_cannot_be_read_is_refused_before_anything_runs(
    earlier: Path, tmp_path: Path, kw: dict[str, Any], says: str
) -> None:
    results = _copy(earlier, tmp_path)
    with pytest.raises(StudyError, match=says):
        prepare(options(results, **kw))
    assert not (results / "new").exists()


def test_a_resumed_study_keeps_the_warm_start_it_was_created_with(
    earlier: Path, tmp_path: Path
) -> None:
    results = _copy(earlier, tmp_path)
    run_study(options(results, trials=1), **QUIET)  # created cold
    with pytest.raises(StudyError, match="was not warm-started; a warm start seeds a new study"):
        run_study(options(results, warm_start="old", trials=2), **QUIET)


def _copy(earlier: Path, tmp_path: Path) -> Path:
    """A results folder holding the earlier study, for one test to write into."""
    shutil.copytree(earlier / "old", tmp_path / "old")
    return tmp_path
