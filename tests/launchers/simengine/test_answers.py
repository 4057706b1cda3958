"""The simulated engine's greedy answers: the same for every launch but where a profile says a
lossy setting changes them, over HTTP as in virtual time."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from pydantic import ValidationError

from launchers.simengine import SimEngine, load_profile
from launchers.simengine.answers import greedy_answer
from launchers.simengine.profile import Profile
from objectives.agreement import agreement
from objectives.endpoint import Endpoint
from objectives.probes import answer_probes, probe_set
from tests.launchers.simengine.conftest import BASE

PROMPTS = [list(range(100 + i, 132 + i)) for i in range(200)]


def test_answers_are_a_function_of_the_prompt_alone() -> None:
    one = greedy_answer(PROMPTS[0], 16, 5000, {})
    assert one == greedy_answer(PROMPTS[0], 16, 5000, {}) and len(one) == 16
    assert one != greedy_answer(PROMPTS[1], 16, 5000, {})
    assert all(100 <= t < 5000 for t in one)


def test_a_lossy_setting_changes_about_its_share_of_answers_from_some_token_on() -> None:
    plain = [greedy_answer(p, 16, 5000, {}) for p in PROMPTS]
    lossy = [greedy_answer(p, 16, 5000, {"kv_cache_dtype=fp8": 0.375}) for p in PROMPTS]
    a = agreement(lossy, plain)
    assert 0.3 < 1 - a.exact < 0.45
    assert a.first_diff is not None and 4 < a.first_diff < 12  # uniform over 16 tokens
    never = [greedy_answer(p, 16, 5000, {"kv_cache_dtype=fp8": 0.0}) for p in PROMPTS]
    assert never == plain


def test_a_launch_with_fp8_kv_answers_otherwise_and_a_lossless_one_does_not() -> None:
    probes = probe_set(None)
    base = SimEngine.from_argv(BASE, {}, "h200x4")
    fp8 = SimEngine.from_argv([*BASE, "--kv-cache-dtype", "fp8"], {}, "h200x4", seed=7)
    seqs = SimEngine.from_argv([*BASE, "--max-num-seqs", "16"], {}, "h200x4", seed=9)

    def ask(e: SimEngine) -> list[Any]:
        return answer_probes(Endpoint(model="m", virtual=e), probes)

    assert fp8.answer_changes() == {"kv_cache_dtype=fp8": 0.375}
    assert agreement(ask(fp8), ask(base)).identical < len(probes.prompts)
    assert agreement(ask(seqs), ask(base)).exact == 1.0


def test_a_profile_naming_a_setting_the_engine_does_not_read_is_refused() -> None:
    data = load_profile("h200x4").model_dump()
    data["answers"] = {"kv_dtype": {"fp8": {"changed": 0.5, "source": "assumed"}}}
    with pytest.raises(ValidationError, match=r"answers\.kv_dtype: not a setting"):
        Profile(**data)


def test_the_server_names_answer_token_ids_as_vllm_does(sim_server: Callable[..., str]) -> None:
    probes = probe_set(None, count=3)
    url = sim_server(["--kv-cache-dtype", "fp8"])
    over_http = answer_probes(Endpoint(model="m", base_url=url), probes)
    engine = SimEngine.from_argv([*BASE, "--kv-cache-dtype", "fp8"], {}, "h200x4")
    assert over_http == answer_probes(Endpoint(model="m", virtual=engine), probes)
