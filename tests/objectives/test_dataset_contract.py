"""The dataset contract (objectives/datasets/_base.py), checked for every registered kind.

Parametrised over ``DATASET_KINDS``, so a newly registered kind is checked as soon as it has an
entry in ``EXAMPLES`` (and fails until it has one).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, get_args

import pytest

from objectives.datasets import (
    DATASET_KINDS,
    WARMUP_ROUND,
    Draw,
    build_requests,
    build_warmup,
    dataset,
)
from objectives.records import BenchRequest
from objectives.workload import WorkloadSpec
from tuner.errors import DatasetError

N = 6  # measured requests per tier
WARMUP = 3
TIERS = [1, 2, 4]


def _sharegpt(tmp_path: Path) -> dict[str, Any]:
    # Three times the conversations a tier and its warm-up take: none needs to repeat.
    reply = {"from": "gpt", "value": "ok " * 9}
    count = 3 * (N + WARMUP)
    turns = [[{"from": "human", "value": f"question {i} " * (i + 2)}, reply] for i in range(count)]
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([{"conversations": t} for t in turns]), encoding="utf-8")
    return {"kind": "sharegpt", "path": path.name}


EXAMPLES: dict[str, Callable[[Path], dict[str, Any]]] = {
    "random": lambda _: {
        "kind": "random",
        "input_len": 24,
        "output_len": 4,
        "range_ratio": 0.5,
        "prefix_len": 4,
    },
    "sharegpt": _sharegpt,
    "prefix_repetition": lambda _: {
        "kind": "prefix_repetition",
        "num_prefixes": 3,
        "prefix_len": 16,
        "suffix_len": 2,
        "repeats": N // 3,
        "output_len": 4,
    },
    "code_edit": lambda _: {
        "kind": "code_edit",
        "num_files": 3,
        "file_len": 48,
        "range_ratio": 0.25,
        "edits": N // 3,
        "request_len": 4,
        "output_len": 4,
    },
    "long_prompt": lambda _: {"kind": "long_prompt", "input_len": 64, "output_len": 4},
}


def workload(kind: str, tmp_path: Path, **kw: Any) -> WorkloadSpec:
    if kind not in EXAMPLES:
        pytest.fail(f"dataset kind {kind!r} has no example settings: add one to EXAMPLES")
    body = {"dataset": EXAMPLES[kind](tmp_path), "num_prompts": N, "warmup": WARMUP, "tiers": TIERS}
    return WorkloadSpec.model_validate({**body, **kw})


def draw(spec: WorkloadSpec, tmp_path: Path, round: int = 0) -> Draw:
    as_ids = spec.endpoint == "completions"
    return Draw(spec.seed, round, spec.requests_per_tier, as_ids, tmp_path, spec.requests_per_tier)


def prompts(requests: Sequence[BenchRequest]) -> set[object]:
    return {tuple(r.prompt) if isinstance(r.prompt, list) else r.prompt for r in requests}


kinds = pytest.mark.parametrize("kind", DATASET_KINDS)
endpoints = pytest.mark.parametrize("endpoint", ["completions", "chat"])


@kinds
@endpoints
def test_builds_the_count_asked(kind: str, endpoint: str, tmp_path: Path) -> None:
    spec = workload(kind, tmp_path, endpoint=endpoint)
    for round in range(len(TIERS)):
        measured = build_requests(spec, tmp_path, round=round)
        assert len(measured) == N
        if endpoint == "completions" and kind != "sharegpt":
            assert all(isinstance(r.prompt, list) for r in measured)
        assert all(len(r.prompt) == r.prompt_len for r in measured if isinstance(r.prompt, list))
    assert len(build_warmup(spec, tmp_path)) == WARMUP


@kinds
@endpoints
def test_same_seed_gives_the_same_requests(kind: str, endpoint: str, tmp_path: Path) -> None:
    # The implementation itself, twice: build_requests' cache would hide a draw that is not seeded.
    spec, impl = workload(kind, tmp_path, endpoint=endpoint), dataset(kind)
    for round in (0, 1):
        first = impl.requests(spec.dataset, draw(spec, tmp_path, round))
        assert impl.requests(spec.dataset, draw(spec, tmp_path, round)) == first
    warm = draw(spec, tmp_path, WARMUP_ROUND)
    assert impl.warmup(spec.dataset, warm) == impl.warmup(spec.dataset, warm)


@kinds
def test_another_seed_gives_other_requests(kind: str, tmp_path: Path) -> None:
    # Every registered kind has a seeded choice to make: content, lengths or order.
    a = build_requests(workload(kind, tmp_path, seed=0), tmp_path)
    b = build_requests(workload(kind, tmp_path, seed=1), tmp_path)
    assert a != b


@kinds
@endpoints
def test_warmup_prompts_are_never_measured(kind: str, endpoint: str, tmp_path: Path) -> None:
    spec = workload(kind, tmp_path, endpoint=endpoint)
    warm = prompts(build_warmup(spec, tmp_path))
    for round in range(len(TIERS)):
        assert not warm & prompts(build_requests(spec, tmp_path, round=round))


def test_registry_covers_every_dataset_kind_a_workload_accepts() -> None:
    union = get_args(WorkloadSpec.model_fields["dataset"].annotation)
    accepted = {get_args(m.model_fields["kind"].annotation)[0] for m in union}
    assert accepted == set(DATASET_KINDS)


def test_unknown_kind_names_the_valid_ones() -> None:
    with pytest.raises(DatasetError, match="unknown dataset kind 'nope'") as err:
        dataset("nope")
    assert all(kind in str(err.value) for kind in DATASET_KINDS)
