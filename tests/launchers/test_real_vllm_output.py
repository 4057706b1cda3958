"""What tune reads from vLLM, checked against real vLLM 0.32.0 output (tests/fixtures), and
the simulated engine's output read the same way."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from launchers._knobs import UNKNOWN_ENV_WARNING, check_knobs
from launchers._startup import ExitInfo, exit_error
from launchers.simengine import SimEngine
from launchers.simengine.errors import EngineRefused
from launchers.simengine.metrics_text import prometheus_text
from objectives import prom
from objectives.records import BenchRequest
from tests.launchers.helpers import loopback_config
from tuner.errors import FailureKind

FIXTURES = Path(__file__).parents[1] / "fixtures" / "vllm-0.32.0-cpu"


@pytest.mark.parametrize(
    ("name", "needle"),
    [
        ("long_ctx", "ModelConfig: Value error, User-specified max_model_len (100000)"),
        ("kv_short", "ValueError: To serve at least one request"),
        ("spec_bad", "SpeculativeConfig: num_speculative_tokens: Input should be greater than 0"),
        ("mnbt_lt_seqs", "max_num_batched_tokens (16) must be greater than or equal to"),
        ("suffix_async", "ImportError: Arctic Inference is required for suffix decoding"),
    ],
)
def test_real_start_up_refusals_are_refused_with_vllms_reason(name: str, needle: str) -> None:
    log = (FIXTURES / f"refused_{name}.log").read_text()
    err = exit_error(ExitInfo(1), "\n".join(log.splitlines()[-200:]))
    assert err.kind is FailureKind.REFUSED
    assert needle in str(err)


def test_knob_check_reads_the_real_non_default_args_line() -> None:
    log = (FIXTURES / "startup_ready.log").read_text()
    config = loopback_config(
        18400,  # the port the logged server listened on
        "--max-num-seqs",
        "8",
        "--max-model-len",
        "4096",  # the log says 2048: evidence that it was not applied
        "--enforce-eager",
        env={"VLLM_USE_V1": "1"},
        tuned_env=frozenset(),
    )
    report = check_knobs(config, log)
    assert {"--max-num-seqs", "--enforce-eager"} <= set(report.applied)
    assert set(report.ignored) == {"--max-model-len"}
    assert report.warnings == [f"base env VLLM_USE_V1: {UNKNOWN_ENV_WARNING}"]


def test_the_engine_config_line_gives_resolved_values() -> None:
    log = (FIXTURES / "startup_ready.log").read_text()
    config = loopback_config(18400, "--dtype", "bfloat16", "--no-enable-prefix-caching")
    report = check_knobs(config, log)
    assert "--dtype" in report.applied  # printed as torch.bfloat16: the same value
    assert "enable_prefix_caching=True" in report.ignored["--no-enable-prefix-caching"]


def test_a_sampled_env_knob_vllm_does_not_know_is_ignored() -> None:
    log = (FIXTURES / "startup_ready.log").read_text()
    report = check_knobs(loopback_config(18400, env={"VLLM_USE_V1": "1"}), log)
    assert report.ignored == {"VLLM_USE_V1": UNKNOWN_ENV_WARNING}


def test_real_metrics_text_gives_running_waiting_kv_and_counters() -> None:
    snapshot = prom.parse((FIXTURES / "metrics_under_load.txt").read_text())
    assert snapshot["vllm:num_requests_running"] == 4.0
    assert snapshot["vllm:num_requests_waiting"] == 0.0
    assert 0 < snapshot["vllm:kv_cache_usage_perc"] < 0.01
    assert snapshot["vllm:prompt_tokens"] == 276.0
    tier = prom.tier_counters({}, snapshot)
    assert tier["num_preemptions"] == 0.0
    assert tier["generation_tokens"] == 723.0
    assert tier["num_requests_running_peak"] == 4.0
    assert tier["prefix_cache_hit_rate"] == 0.0  # 276 queried prompt tokens, none cached


# The simulated engine, given the flags the fixture's server ran with, must read the same to
# every parser above: its log lines and /metrics are in real vLLM's forms.
SIM_BASE = ["-tp", "4", "--enable-expert-parallel"]
FIXTURE_FLAGS = [  # what startup_ready.log's server was started with
    *("--port", "18400", "--max-model-len", "2048", "--served-model-name", "tiny"),
    *("--max-num-seqs", "8", "--enforce-eager"),
]


def test_the_simulated_start_up_log_gives_the_knob_check_the_real_verdicts() -> None:
    sim = SimEngine.from_argv([*SIM_BASE, *FIXTURE_FLAGS], {}, "h200x4", 0)
    asked = ("--max-num-seqs", "8", "--max-model-len", "4096", "--enforce-eager")
    config = loopback_config(18400, *asked, "--no-enable-prefix-caching")
    real = check_knobs(config, (FIXTURES / "startup_ready.log").read_text())
    simulated = check_knobs(config, "\n".join(sim.lines))
    assert simulated.applied == real.applied
    assert (
        set(simulated.ignored)
        == set(real.ignored)
        == {
            "--max-model-len",
            "--no-enable-prefix-caching",
        }
    )
    assert simulated.unverified == real.unverified


def test_simulated_metrics_give_the_tier_the_figures_real_metrics_give() -> None:
    sim = SimEngine.from_argv([*SIM_BASE, *FIXTURE_FLAGS], {}, "h200x4", 0)
    sim.run([BenchRequest("", 500, 20) for _ in range(8)], concurrency=4)
    text = prometheus_text(sim.server_counters(), "tiny")
    real_text = (FIXTURES / "metrics_under_load.txt").read_text()
    assert set(prom.tier_counters({}, prom.parse(text))) == set(
        prom.tier_counters({}, prom.parse(real_text))
    )
    # Families both expose are of one kind (a real server without drafts shows no spec ones).
    real_kinds = {f.name: f.type for f in text_string_to_metric_families(real_text)}
    kinds = {f.name: f.type for f in text_string_to_metric_families(text)}
    shared = set(real_kinds) & set(kinds)
    assert {"vllm:num_preemptions", "vllm:kv_cache_usage_perc"} <= shared
    assert all(kinds[name] == real_kinds[name] for name in shared)


@pytest.mark.parametrize(
    ("name", "flags"),
    [
        ("long_ctx", ["--max-model-len", "300000"]),
        ("spec_bad", ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 0}']),
        ("mnbt_lt_seqs", ["--max-num-batched-tokens", "16", "--max-num-seqs", "32"]),
    ],
)
def test_simulated_refusals_classify_as_the_real_ones(name: str, flags: list[str]) -> None:
    real = exit_error(ExitInfo(1), (FIXTURES / f"refused_{name}.log").read_text())
    with pytest.raises(EngineRefused) as refused:
        SimEngine.from_argv([*SIM_BASE, *flags], {}, "h200x4", 0)
    line = f"ERROR {refused.value}"  # what the simulated server prints before it exits
    assert exit_error(ExitInfo(refused.value.exit_code), line).kind is real.kind
