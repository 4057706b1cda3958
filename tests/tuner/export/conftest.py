"""A study built by hand with Optuna's API and the attrs ``tune run`` stores.

The figures come from a small closed-form model of the three knobs, so every expectation in the
tests (the best config per tier, the front, the failures) follows from the numbers here.
"""

from __future__ import annotations

import copy
import math
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import optuna
import pytest
import yaml
from optuna.distributions import CategoricalDistribution
from optuna.trial import TrialState

from tests.tuner.conftest import SMALL_SPACE
from tuner.space.render import render_engine_config
from tuner.space.schema import Space

NAME = "hand"
TIERS = (1, 4)
CONFIGS: list[tuple[int, int, int]] = [  # (max_num_batched_tokens, max_num_seqs, lptt)
    (8192, 64, 0),  # baseline
    (2048, 4, 0), (2048, 16, 1024), (2048, 64, 0), (8192, 4, 1024), (8192, 16, 4096),
    (8192, 64, 1024), (32768, 4, 0), (32768, 16, 1024), (32768, 16, 4096), (2048, 16, 0),
    (8192, 16, 0), (32768, 4, 4096),
]  # fmt: skip


def figures(mnbt: int, seqs: int, lptt: int, c: int) -> dict[str, float]:
    """Bigger chunks: more throughput, worse TPOT; a prefill cap helps TPOT at high load."""
    cap = 0.8 if lptt else 1.0
    median = 8.0 + c * math.sqrt(mnbt / 2048) * cap * (1.0 + min(seqs, c) / 64)
    p99 = median * (1.3 + seqs / 256)
    throughput = min(seqs, c) * 1000.0 / median * (1.0 + mnbt / 65536)
    ttft = 400.0 * 8192 / mnbt + 50.0 * c
    return {
        "completed": 8,
        "failed": 0,
        "median_tpot_ms": median,
        "mean_tpot_ms": median * 1.05,
        "p99_tpot_ms": p99,
        "median_ttft_ms": ttft * 0.6,
        "p99_ttft_ms": ttft,
        "output_throughput": throughput,
        "request_throughput": throughput / 32,
        "ttft_samples": 8,  # so every p99 shown is the maximum of its 8 requests
        "tpot_samples": 8,
    }


def space_dict(**changes: Any) -> dict[str, Any]:
    data = copy.deepcopy(SMALL_SPACE)
    data.update(changes)
    return data


DISTS = {
    "max_num_batched_tokens": CategoricalDistribution([2048, 8192, 32768]),
    "max_num_seqs": CategoricalDistribution([4, 16, 64]),
    "long_prefill_token_threshold": CategoricalDistribution([0, 1024, 4096]),
}


def build_study(results: Path, space: dict[str, Any] | None = None, name: str = NAME) -> str:
    """Create ``results/<name>/study.db`` holding a study as ``tune run`` would leave it."""
    space = space or space_dict()
    text = yaml.safe_dump(space, sort_keys=False)  # as a hand-written file: order kept
    parsed = Space.model_validate(space)
    (results / name).mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{results / name / 'study.db'}"
    study = optuna.create_study(study_name=name, storage=url, directions=["minimize"] * 2)
    attrs = {
        "objective": "p99_tpot", "tiers": list(TIERS), "space_digest": "test",
        "space_path": "small.yaml", "space_yaml": text, "target_kind": "sim",
        "hardware": parsed.hardware, "engine": parsed.engine.model_dump(), "created": 1.7e9,
    }  # fmt: skip
    for key, value in attrs.items():
        study.set_user_attr(key, value)
    for i, (mnbt, seqs, lptt) in enumerate(CONFIGS):
        study.add_trial(_trial(parsed, mnbt, seqs, lptt, baseline=i == 0))
    _add_failures(study, parsed)
    return url


def _params(mnbt: int, seqs: int, lptt: int) -> dict[str, int]:
    return {
        "max_num_batched_tokens": mnbt,
        "max_num_seqs": seqs,
        "long_prefill_token_threshold": lptt,
    }


def _launch_attrs(space: Space, params: dict[str, int]) -> dict[str, Any]:
    config = render_engine_config(space, params)
    return {"fingerprint": config.fingerprint(), "engine_command": config.shell_command()}


def _trial(space: Space, mnbt: int, seqs: int, lptt: int, **extra: Any) -> Any:
    params = _params(mnbt, seqs, lptt)
    tiers = {str(c): figures(mnbt, seqs, lptt, c) for c in TIERS}
    attrs = {"tiers": tiers, "feasible": True, "failure": None, "failure_kind": None, **extra}
    attrs.update(_launch_attrs(space, params))
    return optuna.trial.create_trial(
        params=params, distributions=DISTS, user_attrs=attrs,
        values=[tiers[str(c)]["p99_tpot_ms"] for c in TIERS],
        constraints={"rules": 0.0, "engine": 0.0, "failed_requests": 0.0, "slo": 0.0},
    )  # fmt: skip


def _add_failures(study: optuna.Study, space: Space) -> None:
    inf = [math.inf, math.inf]
    rule = {
        "feasible": False, "failure": "breaks rule 'long_prefill_token_threshold <= "
        "max_num_batched_tokens'", "failure_kind": "rules", "tiers": {},
    }  # fmt: skip
    study.add_trial(optuna.trial.create_trial(
        params=_params(2048, 4, 4096), distributions=DISTS, values=inf, user_attrs=rule,
        constraints={"rules": 1.0, "engine": 0.0, "failed_requests": 0.0, "slo": 0.0}))  # fmt: skip
    oom = {
        "feasible": False, "failure_kind": "oom", "tiers": {},
        "failure": "out of memory at start-up | torch.OutOfMemoryError: CUDA out of memory",
        **_launch_attrs(space, _params(32768, 64, 0)),
    }  # fmt: skip
    study.add_trial(optuna.trial.create_trial(
        params=_params(32768, 64, 0), distributions=DISTS, values=inf, user_attrs=oom,
        constraints={"rules": 0.0, "engine": 1.0, "failed_requests": 0.0, "slo": 0.0}))  # fmt: skip
    slo_tiers = {str(c): {**figures(32768, 64, 1024, c), "p99_ttft_ms": 9e5} for c in TIERS}
    slo = {
        "feasible": False, "failure": "missed an SLO", "failure_kind": "slo", "tiers": slo_tiers,
        **_launch_attrs(space, _params(32768, 64, 1024)),
    }  # fmt: skip
    study.add_trial(optuna.trial.create_trial(
        params=_params(32768, 64, 1024), distributions=DISTS, user_attrs=slo,
        values=[slo_tiers[str(c)]["p99_tpot_ms"] for c in TIERS],
        constraints={"rules": 0.0, "engine": 0.0, "failed_requests": 0.0, "slo": 7.5}))  # fmt: skip
    infra = {"failure": "infrastructure: docker daemon unreachable", "failure_kind": "infra"}
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.FAIL, params=_params(2048, 64, 1024), distributions=DISTS,
        user_attrs=infra))  # fmt: skip
    dup = study.trials[1]
    study.add_trial(optuna.trial.create_trial(
        params=dict(dup.params), distributions=DISTS, values=dup.values,
        user_attrs={**dup.user_attrs, "duplicate_of": dup.number},
        constraints={"rules": 0.0, "engine": 0.0, "failed_requests": 0.0, "slo": 0.0}))  # fmt: skip


@pytest.fixture(scope="session")
def hand_study_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Built once per session (SQLite writes are the slow part); copied for each test."""
    results = tmp_path_factory.mktemp("hand") / "results"
    build_study(results)
    return results


@pytest.fixture
def hand_results(hand_study_dir: Path, tmp_path: Path) -> Path:
    """A private copy of the hand-built study: a test may export into it or change it."""
    results = tmp_path / "results"
    shutil.copytree(hand_study_dir, results)
    return results


SERVE_HOST = "0.0.0.0"  # engine.serve_host's default: what every export binds


def deployed(args: Sequence[str], host: str = SERVE_HOST) -> list[str]:
    """A trial's ``args`` as the exports write them: ``--host`` is the serve host."""
    out = list(args)
    out[out.index("--host") + 1] = host
    return out
