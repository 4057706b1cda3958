from __future__ import annotations

from pathlib import Path
from typing import Any

import optuna
import pytest

from objectives.metrics import compute_metrics
from objectives.objective import get_objective
from objectives.records import RequestRecord
from objectives.result import TierResult
from tests.objectives.servers import tiny_model, vllm_like_server
from tuner.errors import InfraError
from tuner.record.trial import TrialRecord, write_outcome
from tuner.run.trial import TrialRunner
from tuner.space.render import render_engine_config
from tuner.space.schema import Space


def endpoint_space(url: str) -> Space:
    body: dict[str, Any] = {
        "description": "a running vLLM-like server",
        "hardware": "loopback",
        "engine": {"name": "vllm", "version": "0.32.0", "model": "tiny"},
        "target": {"kind": "endpoint", "url": url},
        "workload": {
            "dataset": {"kind": "random", "input_len": 256, "output_len": 4},  # no vocab_size
            "num_prompts": 8,
            "warmup": 1,
            "tiers": [1, 4],
            # The vocabulary is judged here, not timing: the client shares the cores.
            "client_lag_limit_ms": 1000,
        },
        "study": {"objective": "output_throughput", "trials": 1},
    }
    return Space.model_validate(body)


def test_a_trial_draws_ids_inside_the_vocabulary_of_the_model_the_server_loaded(
    tmp_path: Path,
) -> None:
    model = tiny_model(tmp_path / "model")
    with vllm_like_server("--vocab", "961", "--root", str(model)) as url:
        space = endpoint_space(url)
        runner = TrialRunner(space, get_objective("output_throughput"), ready_timeout_s=20)
        outcome = runner.run(render_engine_config(space, {}), tmp_path / "trial")
    assert outcome.failure is None, outcome.failure
    assert outcome.constraints["failed_requests"] == 0.0


def test_a_trial_failure_names_the_servers_message_once() -> None:
    runner = TrialRunner(
        endpoint_space("http://127.0.0.1:9"), get_objective("output_throughput"), 1.0
    )
    metrics = {"completed": 0, "failed": 8, "output_throughput": 0.0}
    tiers = [
        TierResult(1, dict(metrics), {"HTTP 400: Token id 31991 is out of vocabulary": 8}),
        TierResult(
            4,
            dict(metrics),
            {"HTTP 400: Token id 31987 is out of vocabulary": 7, "timeout": 1},
        ),
    ]
    outcome = runner.outcome(tiers)
    assert outcome.failure == (
        "16 of 16 requests failed (15x HTTP 400: Token id 31991 is out of vocabulary, 1x timeout)"
    )
    assert outcome.failure_kind == "failed_requests"


def test_a_tier_the_client_limited_is_an_infrastructure_fault_naming_the_tier() -> None:
    runner = TrialRunner(endpoint_space("http://127.0.0.1:9"), get_objective("p99_tpot"), 1.0)
    metrics = {"completed": 8, "failed": 0, "p99_tpot_ms": 10.0, "output_throughput": 400.0}
    ok = TierResult(1, dict(metrics), client={"p99_loop_lag_ms": 1.0})
    client = {"p50_loop_lag_ms": 3.0, "p99_loop_lag_ms": 40.0, "cpu_share": 0.9}
    bad = TierResult(4, dict(metrics), client_saturated=True, client=client)
    assert runner.outcome([ok, ok]).failure is None
    with pytest.raises(InfraError, match=r"limited a tier \(c4: its event loop 40 ms late at P99 "
                       r"with 90% of a core\): the client itself was busy"):  # fmt: skip
        runner.outcome([ok, bad])


def test_the_count_each_tail_rests_on_is_kept_in_the_trial_record() -> None:
    runner = TrialRunner(endpoint_space("http://127.0.0.1:9"), get_objective("p99_tpot"), 1.0)
    records = [
        RequestRecord(8, 4, i, [i + 0.1, i + 0.2, i + 0.3], 4, success=True) for i in range(3)
    ]
    tiers = [TierResult(c, compute_metrics(records, 3.0)) for c in (1, 4)]
    study = optuna.create_study(directions=["minimize", "minimize"])
    trial = study.ask()
    outcome = runner.outcome(tiers)
    write_outcome(trial, outcome)
    study.tell(trial, outcome.values)
    stored = TrialRecord.of(study.trials[0])
    assert stored.value("tpot_samples", 4) == 3 and stored.value("itl_samples", 4) == 6
    assert stored.value("ttft_samples", 1) == 3 and stored.value("e2el_samples", 1) == 3


@pytest.mark.parametrize(("objective", "factor"), [("p99_tpot", 2.0), ("output_throughput", 0.5)])
def test_the_sampler_is_told_a_tier_charged_for_the_users_its_server_held(
    objective: str, factor: float
) -> None:
    """4 of 8 users held back: the sampler sees the value as if each user had a seat's share
    (P99 TPOT twice as long, throughput half); the record keeps the measured figure."""
    runner = TrialRunner(endpoint_space("http://127.0.0.1:9"), get_objective(objective), 1.0)
    metrics = {"completed": 8, "failed": 0, "p99_tpot_ms": 10.0, "output_throughput": 400.0}
    held = TierResult(4, dict(metrics), server={"users_held": 2.0})  # 2 of 4 held
    seated = TierResult(1, dict(metrics), server={"users_held": 0.0})
    outcome = runner.outcome([seated, held])
    key = get_objective(objective).key
    assert outcome.values == [metrics[key], metrics[key] * factor]
    assert outcome.tiers["4"][key] == metrics[key]  # what recommendations read
