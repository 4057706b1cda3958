"""Verification that the engine applied the sampled knobs, from its log and /server_info."""

from __future__ import annotations

from launchers._knobs import UNKNOWN_ENV_WARNING, check_knobs, requested_flags
from tests.launchers.helpers import loopback_config
from tuner.errors import FailureKind

LOG = (
    "(APIServer pid=1) INFO 07-02 21:58:11 [utils.py:253] non-default args: {'model': 'm', "
    "'max_num_batched_tokens': 65536, 'max_num_seqs': 8, 'async_scheduling': True, "
    "'speculative_config': {'method': 'mtp', 'num_speculative_tokens': 2}, "
    "'attention_backend': <AttentionBackendEnum.FLASHINFER: 'x.y.FlashInferBackend'>, "
    "'max_model_len': 196608}\n"
    "WARNING 07-02 21:58:11 [envs.py:2027] Unknown vLLM environment variable detected: "
    "VLLM_ATTENTION_BACKEND\n"
)


def test_requested_flag_forms() -> None:
    flags = requested_flags(
        [
            "--max-num-seqs",
            "8",
            "--no-async-scheduling",
            "--enforce-eager",
            '--speculative-config={"method": "mtp"}',
            "--attention-backend",
            "FLASHINFER",
        ]
    )
    assert flags == {
        "--max-num-seqs": ("max_num_seqs", 8),
        "--no-async-scheduling": ("async_scheduling", False),
        "--enforce-eager": ("enforce_eager", True),
        "--speculative-config": ("speculative_config", {"method": "mtp"}),
        "--attention-backend": ("attention_backend", "FLASHINFER"),
    }


def test_applied_ignored_and_unverified() -> None:
    config = loopback_config(
        1,
        "--max-num-seqs",
        "8",
        "--max-num-batched-tokens",
        "32768",
        "--async-scheduling",
        "--speculative-config",
        '{"method": "mtp", "num_speculative_tokens": 2}',
        "--attention-backend",
        "FLASHINFER",
        "--max-model-len",
        "192K",
        "--block-size",
        "16",
        env={"VLLM_ATTENTION_BACKEND": "FLASHINFER", "VLLM_USE_DEEP_GEMM": "0", "HCCL_X": "1"},
    )
    report = check_knobs(config, LOG)
    assert set(report.ignored) == {"--max-num-batched-tokens", "VLLM_ATTENTION_BACKEND"}
    assert "65536" in report.ignored["--max-num-batched-tokens"]
    assert {
        "--max-num-seqs",
        "--async-scheduling",
        "--speculative-config",
        "--attention-backend",
        "VLLM_USE_DEEP_GEMM",
    } <= set(report.applied)
    # 192K vs 196608: another form, not evidence; --block-size absent: maybe its default.
    assert {"--max-model-len", "--block-size", "HCCL_X"} <= set(report.unverified)
    error = report.error()
    assert error is not None and error.kind is FailureKind.KNOB_IGNORED


def test_server_info_wins_over_the_log() -> None:
    config = loopback_config(1, "--max-num-batched-tokens", "32768", "--max-num-seqs", "8")
    info = {"vllm_config": {"scheduler_config": {"max_num_batched_tokens": 32768}}}
    report = check_knobs(config, LOG, info)
    assert "--max-num-batched-tokens" in report.applied and not report.ignored
    text_info = "model='m', max_num_seqs=16, enforce_eager=False"
    assert set(check_knobs(config, "", text_info).ignored) == {"--max-num-seqs"}


def test_no_report_means_nothing_is_called_ignored() -> None:
    config = loopback_config(1, "--max-num-seqs", "8", env={"VLLM_USE_DEEP_GEMM": "0"})
    report = check_knobs(config, "INFO starting\n")
    assert not report.ignored and report.error() is None
    assert {"--max-num-seqs", "VLLM_USE_DEEP_GEMM"} <= set(report.unverified)


def test_key_value_report_form() -> None:
    log = "INFO non-default args: model='m', max_num_seqs=16, async_scheduling=True\n"
    config = loopback_config(1, "--max-num-seqs", "64", "--async-scheduling")
    report = check_knobs(config, log)
    assert list(report.ignored) == ["--max-num-seqs"] and "--async-scheduling" in report.applied


def test_base_env_is_a_warning_never_an_ignored_knob() -> None:
    log = "WARNING [interface.py:1458] Unknown vLLM environment variable detected: VLLM_USE_V1\n"
    env = {"VLLM_USE_V1": "1", "VLLM_USE_DEEP_GEMM": "0"}
    config = loopback_config(1, env=env, tuned_env=frozenset({"VLLM_USE_DEEP_GEMM"}))
    report = check_knobs(config, LOG + log)
    assert not report.ignored and report.error() is None
    assert report.warnings == [f"base env VLLM_USE_V1: {UNKNOWN_ENV_WARNING}"]
    assert "VLLM_USE_DEEP_GEMM" in report.applied


def test_vllm_ascend_reads_its_own_variables_core_vllm_warns_about() -> None:
    log = "WARNING Unknown vLLM environment variable detected: VLLM_ASCEND_ENABLE_FUSED_MC2\n"
    env = {"VLLM_ASCEND_ENABLE_FUSED_MC2": "1"}
    config = loopback_config(1, env=env, engine="vllm-ascend")
    assert not check_knobs(config, LOG + log).ignored
    assert check_knobs(loopback_config(1, env=env), LOG + log).ignored  # core vLLM: ignored
