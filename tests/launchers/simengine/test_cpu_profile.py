"""The cpu profile: vLLM's CPU build as search_spaces/vllm_cpu.yaml starts it, simulated.

Its start-up lines are checked against the real engine's (tests/fixtures), its KV cache against
what the real one sizes from VLLM_CPU_KVCACHE_SPACE, and its knob effects against the mechanism
each stands for: a fixed cost per step plus a cost per sequence, prefill time growing with the
prompt, eager execution paying per layer and per batched token, -O0 compiling nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from launchers.simengine import EngineRefused, SimEngine
from launchers.simengine.core import even_acceptance
from launchers.simengine.model import StepWork
from objectives.records import BenchRequest

FIXTURES = Path(__file__).parents[2] / "fixtures" / "vllm-0.32.0-cpu"
SERVE = [".cache/models/tiny-llama-8x512", "--served-model-name", "tiny", "--max-model-len", "2048"]
KV1 = {"VLLM_CPU_KVCACHE_SPACE": "1"}


def engine(args: list[str] | None = None, env: dict[str, str] | None = None) -> SimEngine:
    e = SimEngine.from_argv([*SERVE, *(args or [])], KV1 if env is None else env, "cpu", 0)
    e.model.speed = 1.0  # compare configurations, not noise draws
    return e


def shape(line: str) -> str:
    """A log line with its numbers blanked: the form, not the values."""
    return re.sub(r"\d[\d,.]*", "#", line.split("] ", 1)[-1])


def start_up_lines(e: SimEngine) -> list[str]:
    return list(e.lines)


def test_kv_cache_lines_have_the_real_cpu_builds_form_and_size() -> None:
    real = (FIXTURES / "startup_ready.log").read_text().splitlines()
    wanted = [shape(x) for x in real if "GiB for KV cache" in x or "CPU KV cache size" in x]
    lines = start_up_lines(engine())
    mine = [shape(x) for x in lines if "GiB for KV cache" in x or "CPU KV cache size" in x]
    assert mine == wanted
    assert any("CPU KV cache size: 65,536 tokens" in x for x in lines)  # as the real log says


def test_kv_cache_space_sets_the_pool_and_a_bad_value_is_refused() -> None:
    assert engine(env={"VLLM_CPU_KVCACHE_SPACE": "2"}).memory.kv_tokens == 2 * 65_536
    with pytest.raises(EngineRefused, match="could not convert"):
        engine(env={"VLLM_CPU_KVCACHE_SPACE": "lots"})


def test_no_gpu_backend_lines_in_the_cpu_builds_log() -> None:
    lines = start_up_lines(engine())
    assert not [x for x in lines if "attention backend" in x or "MoE kernels" in x]


def test_small_batches_are_bound_by_weight_reads_large_ones_by_compute() -> None:
    m = engine().model

    def decode(n: int) -> float:  # no context: each sequence's KV reads would cost alike
        return m.step_s(StepWork(n_dec=n, ctx_dec=0))

    # One core reads the 56 MB of weights once per step whatever the batch (a GEMV is memory
    # bound), so a second sequence costs little (its scheduling); past the roofline's knee each
    # costs its FLOPs too.
    assert decode(2) / decode(1) < 1.2
    assert (decode(64) - decode(32)) / 32 == pytest.approx((decode(32) - decode(16)) / 16, rel=0.2)
    assert (decode(64) - decode(32)) / 32 > 2 * (decode(2) - decode(1))


def test_single_request_ttft_grows_with_the_prompt() -> None:
    def ttft(tokens: int) -> float:
        (r,) = engine().run([BenchRequest("", tokens, 2)], 1)
        return r.chunk_times[0] - r.send_time

    short, long = ttft(256), ttft(1024)
    assert 2.0 < long / short < 5.0  # compute per token, plus a fixed step cost


def test_eager_pays_per_layer_and_per_token_and_o0_is_eager() -> None:
    work = StepWork(n_dec=4, ctx_dec=800)
    compiled = engine().model.step_s(work)
    eager = engine(["--enforce-eager"]).model.step_s(work)
    o0 = engine(["--optimization-level", "0"]).model.step_s(work)
    assert eager > compiled
    assert o0 == pytest.approx(eager)
    assert engine(["--optimization-level", "1"]).model.step_s(work) == pytest.approx(compiled)

    def extra(prompt: int) -> float:  # what eager adds to a step prefilling one prompt
        w = StepWork(n_dec=4, ctx_dec=800, n_pf=1, pf_tokens=prompt, pf_pairs=prompt**2 / 2)
        return engine(["--enforce-eager"]).model.step_s(w) - engine().model.step_s(w)

    # Unfused ops over the step's activations: a longer prompt, a larger cost, not a flat one.
    assert extra(1024) > 2 * extra(192) > 0


# A prompt with no recurring n-gram: a prompt-lookup drafter finds nothing in it to propose.
UNIQUE_WORDS = " ".join(f"word{i * 7919 % 10007}" for i in range(64))


def test_the_ngram_drafter_finds_a_looping_models_output_whatever_the_prompt() -> None:
    spec = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}']

    def acceptance(output_repeat: float) -> float:
        e = engine(spec)
        shape = e.model.p.model.model_copy(update={"output_repeat": output_repeat})
        e.model.p = e.model.p.model_copy(update={"model": shape})
        e.run([BenchRequest(UNIQUE_WORDS, 64, 32) for _ in range(4)], 4)
        c = e.server_counters()
        return c["vllm:spec_decode_num_accepted_tokens"] / c["vllm:spec_decode_num_draft_tokens"]

    # The real CPU build accepted every draft on random prompts: the model loops, and the
    # drafter looks its own output up; a model that does not repeat itself gets none.
    assert acceptance(1.0) > 0.7
    assert acceptance(0.0) == 0.0


def test_a_wave_drafting_from_a_looping_output_finishes_together() -> None:
    # The real CPU build's c6 waves of n-gram requests end within a millisecond of one
    # another: the loop decides what is accepted, the same for every request. Coin flips
    # would finish some a verification early and stagger the next wave's prefill.
    spec = ["--speculative-config", '{"method": "ngram", "num_speculative_tokens": 2}']
    e = engine(spec)
    records = e.run([BenchRequest(UNIQUE_WORDS, 64, 64) for _ in range(6)], 6)
    ends = sorted(r.send_time + r.e2el for r in records[1:])  # the first decodes alone first
    assert ends[-1] - ends[0] < 0.002
    c = e.server_counters()
    rate = c["vllm:spec_decode_num_accepted_tokens"] / c["vllm:spec_decode_num_draft_tokens"]
    alpha = e.model.acceptance()
    assert rate == pytest.approx((alpha + alpha**2) / 2, abs=0.02)


def test_even_acceptance_keeps_the_mean_and_splits_at_any_step() -> None:
    whole = even_acceptance(0.9, 3, 0, 40)
    assert set(whole.tolist()) <= {0, 1, 2, 3}
    assert whole.sum() == pytest.approx(40 * (0.9 + 0.81 + 0.729), abs=1)
    parts = np.concatenate([even_acceptance(0.9, 3, 0, 13), even_acceptance(0.9, 3, 13, 27)])
    assert parts.tolist() == whole.tolist()  # a stretch cut short resumes where it stopped


def test_a_closed_loops_next_request_misses_the_step_that_starts_as_its_predecessor_ends() -> None:
    """vLLM's engine core starts its next step as soon as it has queued the last one's outputs,
    so the request a client sends on reading a final token reaches it during that step: the
    other request's next token comes from a decode step, and the new prompt's prefill follows
    (the real engine's 1024-token prompts at c4: the replacement's prefill never held the
    request one decode from its end)."""
    work = [BenchRequest("", 384, 8), BenchRequest("", 384, 40), BenchRequest("", 1024, 8)]
    first, other, new = engine().run(work, concurrency=2)
    end = first.chunk_times[-1]
    assert new.send_time == pytest.approx(end)
    after = [t for t in other.chunk_times if t > end]
    assert new.ttft is not None and after[0] - end < 0.2 * new.ttft
    assert after[1] - after[0] > 0.5 * new.ttft  # then the new prompt's prefill holds it


def test_a_lone_request_is_not_held_to_the_long_prefill_cap_in_0_32() -> None:
    capped = ["--max-num-batched-tokens", "512", "--long-prefill-token-threshold", "64"]
    alone = BenchRequest("", 384, 4)
    [plain] = engine().run([alone], concurrency=1)
    [lone] = engine(capped).run([alone], concurrency=1)
    assert lone.ttft == pytest.approx(plain.ttft, rel=0.05)
    old = SimEngine.from_argv([*SERVE, *capped], KV1, "cpu", 0, version="0.31.0")
    old.model.speed = 1.0
    [chunked] = old.run([alone], concurrency=1)
    assert chunked.ttft is not None and lone.ttft is not None
    assert chunked.ttft > lone.ttft + 4 * 0.004  # five more steps, each its fixed cost
