"""The ``sim`` launcher: start-up log, refusals as LaunchError, virtual endpoint, noise seeds."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from launchers import launcher_class
from launchers.sim import SimLauncher, SimSettings
from launchers.simengine.profile import PROFILE_DIR
from objectives.records import BenchRequest
from tuner.engine import EngineConfig
from tuner.errors import FailureKind, LaunchError

BASE = ("-tp", "4", "--enable-expert-parallel", "--port", "8123", "--host", "127.0.0.1")


def config(*args: str, trial: str = "0", **env: str) -> EngineConfig:
    return EngineConfig(
        command=("vllm", "serve", "MiniMaxAI/MiniMax-M2.5"),
        args=(*BASE, *args),
        env=env,
        model="MiniMaxAI/MiniMax-M2.5",
        port=8123,
        labels={"trial": trial},
    )


WORKLOAD = [BenchRequest("p", 12000 + 1000 * i, 40) for i in range(6)]


def test_registered_and_settings_are_described() -> None:
    assert launcher_class("sim") is SimLauncher
    for name, field in SimSettings.model_fields.items():
        assert field.description, name


def test_start_writes_engine_log_and_serves_in_virtual_time(tmp_path: Path) -> None:
    with SimLauncher(SimSettings()) as launcher:
        launcher.start(config(), tmp_path)
        endpoint = launcher.wait_ready(5.0)
        assert endpoint.virtual is not None and endpoint.base_url is None
        records = endpoint.virtual.run(WORKLOAD, concurrency=2)
    assert all(r.success and r.output_tokens == 40 for r in records)
    assert all(len(r.chunk_times) == 40 for r in records)
    log = (tmp_path / "engine.log").read_text()
    assert "GPU KV cache size" in log and "Application startup complete" in log


def test_refusal_raises_launch_error_with_kind_and_log(tmp_path: Path) -> None:
    launcher = SimLauncher(SimSettings())
    with pytest.raises(LaunchError) as info:
        launcher.start(config("--max-num-partial-prefills", "2"), tmp_path)
    assert info.value.kind is FailureKind.REFUSED
    assert "Concurrent Partial Prefill" in info.value.log_tail
    with pytest.raises(LaunchError):
        launcher.wait_ready(1.0)
    launcher.stop()
    launcher.stop()  # idempotent


def test_oom_at_start_up(tmp_path: Path) -> None:
    launcher = SimLauncher(SimSettings())
    with pytest.raises(LaunchError) as info:
        launcher.start(config("--gpu-memory-utilization", "0.45"), tmp_path)
    assert info.value.kind is FailureKind.OOM


def _tpots(settings: SimSettings, trial: str, tmp_path: Path) -> list[float]:
    launcher = SimLauncher(settings)
    launcher.start(config(trial=trial), tmp_path / trial)
    engine = launcher.wait_ready(1.0).virtual
    assert engine is not None
    recs = engine.run(WORKLOAD, concurrency=3)
    launcher.stop()
    return [(r.chunk_times[-1] - r.chunk_times[0]) / (r.output_tokens - 1) for r in recs]


def test_noise_is_reproducible_per_trial_and_differs_between_trials(tmp_path: Path) -> None:
    s = SimSettings(seed=7)
    a, a2, b = _tpots(s, "1", tmp_path), _tpots(s, "1", tmp_path), _tpots(s, "2", tmp_path)
    assert a == a2
    assert a != b
    assert abs(sum(a) / sum(b) - 1) < 0.1  # noise of a few percent, not a different engine


def _startup(settings: SimSettings, trial_dir: Path, *args: str) -> tuple[float, bool | None]:
    launcher = SimLauncher(settings)
    try:
        launcher.start(config(*args), trial_dir)
        launcher.wait_ready(1.0)
    except LaunchError:
        pass
    startup = launcher.startup(wall_s=0.001)  # the wall clock is not the simulator's
    launcher.stop()
    return startup.seconds, startup.compile_cached


def test_start_up_is_the_hardwares_and_a_studys_cache_shortens_repeats(tmp_path: Path) -> None:
    trials = tmp_path / "trials"
    first = _startup(SimSettings(), trials / "0000")
    again = _startup(SimSettings(), trials / "0001")
    other_study = _startup(SimSettings(), tmp_path / "other" / "0000")
    assert first == (53.0 + 95.0, False)  # weights, then a cold compile
    assert again == (53.0 + 37.0, True)
    assert other_study == first
    assert (trials / ".engine-cache" / "torch_compile_cache").is_dir()


def test_no_kept_cache_and_a_fixed_start_up_when_asked(tmp_path: Path) -> None:
    off = SimSettings(compile_cache=False)
    assert _startup(off, tmp_path / "t" / "0")[1] is False
    assert _startup(off, tmp_path / "t" / "1")[1] is False
    assert _startup(SimSettings(startup_s=5.0), tmp_path / "u" / "0")[0] == 5.0


def test_a_refusal_costs_what_vllm_spent_before_it(tmp_path: Path) -> None:
    flags = _startup(SimSettings(), tmp_path / "a" / "0", "--max-num-partial-prefills", "2")
    memory = _startup(SimSettings(), tmp_path / "b" / "0", "--gpu-memory-utilization", "0.45")
    assert flags[0] == 0.0  # argparse and config checks: before anything loads
    assert memory[0] == 53.0  # the KV cache is sized once the weights are in


def test_a_profile_file_of_ones_own_replaces_the_named_profile(tmp_path: Path) -> None:
    """A copy of h200x4 with slower HBM serves the same launch with a longer TPOT: what a
    neighbouring deployment (or a warm start's earlier engine) looks like to a study."""
    data = yaml.safe_load((PROFILE_DIR / "h200x4.yaml").read_text())
    data["hardware"]["hbm_tbs"] = 1.6
    slow = tmp_path / "h200x4_slow_hbm.yaml"
    slow.write_text(yaml.safe_dump(data))
    shipped = _tpots(SimSettings(seed=7), "1", tmp_path / "a")
    own = _tpots(SimSettings(seed=7, profile_file=slow), "1", tmp_path / "b")
    assert sum(own) > 1.1 * sum(shipped)
    assert "h200x4_slow_hbm.yaml" in (tmp_path / "b" / "1" / "engine.log").read_text()


def test_a_profile_file_that_is_no_profile_is_refused_with_the_settings(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("hardware: {platform: cuda}\n")
    with pytest.raises(ValueError, match=r"bad\.yaml: not a profile"):
        SimSettings(profile_file=bad)
    with pytest.raises(ValueError, match="not a profile"):
        SimSettings(profile_file=tmp_path / "missing.yaml")


def test_the_engine_is_the_release_the_space_pins(tmp_path: Path) -> None:
    pinned = config("--moe-backend", "triton")
    pinned = EngineConfig(**{**pinned.__dict__, "engine_version": "0.17.1"})
    with SimLauncher(SimSettings()) as launcher:
        launcher.start(pinned, tmp_path / "new")
        assert "vLLM API server version 0.17.1" in (tmp_path / "new" / "engine.log").read_text()
    older = EngineConfig(**{**pinned.__dict__, "engine_version": "0.14"})
    with pytest.raises(LaunchError) as info:
        SimLauncher(SimSettings()).start(older, tmp_path / "old")
    assert info.value.kind is FailureKind.REFUSED
    assert "unrecognized arguments: --moe-backend (vLLM 0.14)" in str(info.value)
