"""The simulated start-up: a compile key per compiled shape, and a kept cache that shortens it."""

from __future__ import annotations

from pathlib import Path

from launchers._compile_log import compile_cache
from launchers.simengine import SimEngine
from launchers.simengine.profile import load_profile

H200 = ["-tp", "4", "--enable-expert-parallel"]


def engine(args: list[str], cache: Path | None, env: dict[str, str] | None = None) -> SimEngine:
    return SimEngine.from_argv([*H200, *args], env or {}, "h200x4", 0, cache)


def test_the_key_follows_what_is_compiled_not_where_it_serves() -> None:
    base = engine([], None).compiled.key
    assert engine(["--port", "9000", "--gpu-memory-utilization", "0.85"], None).compiled.key == base
    assert engine(["--max-num-batched-tokens", "16384"], None).compiled.key != base
    assert engine(["--attention-backend", "FLASHINFER"], None).compiled.key != base
    assert engine([], None, {"VLLM_USE_DEEP_GEMM": "0"}).compiled.key != base


def test_a_kept_cache_shortens_the_second_start_up_of_a_key(tmp_path: Path) -> None:
    o = load_profile("h200x4").overheads
    assert o.compile_cached_s is not None and o.compile_cached_s < o.compile_s
    first, second = engine([], tmp_path), engine([], tmp_path)
    other = engine(["--max-num-batched-tokens", "16384"], tmp_path)
    assert (first.compiled.cached, second.compiled.cached, other.compiled.cached) == (
        False,
        True,
        False,
    )
    assert second.startup_s == first.startup_s - (o.compile_s - o.compile_cached_s)
    assert other.startup_s == first.startup_s


def test_without_a_cache_every_launch_compiles() -> None:
    first, second = engine([], None), engine([], None)
    assert not first.compiled.cached and not second.compiled.cached
    assert second.startup_s == first.startup_s


def test_the_log_says_it_in_vllms_words(tmp_path: Path) -> None:
    cold = engine([], tmp_path)
    warm = engine([], tmp_path)
    assert compile_cache("\n".join(cold.lines)) == (cold.compiled.key, False)
    assert compile_cache("\n".join(warm.lines)) == (cold.compiled.key, True)
    assert compile_cache("\n".join(engine([], None).lines)) == (None, False)
