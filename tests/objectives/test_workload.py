from __future__ import annotations

import pytest
from pydantic import ValidationError

from objectives.workload import PrefixRepetitionDataset, RandomDataset, WorkloadSpec

RANDOM = {"kind": "random", "input_len": 100, "output_len": 10}


def spec(**kw: object) -> WorkloadSpec:
    body: dict[str, object] = {"dataset": RANDOM, "num_prompts": 4, "tiers": [1, 8]}
    body.update(kw)
    return WorkloadSpec.model_validate(body)


def test_defaults_and_discriminated_dataset() -> None:
    s = spec()
    assert isinstance(s.dataset, RandomDataset)
    assert (s.warmup, s.seed, s.endpoint, s.request_rate, s.burstiness) == (
        1,
        0,
        "completions",
        None,
        1.0,
    )


def test_every_field_is_described() -> None:
    from objectives import workload

    models = [
        workload.WorkloadSpec,
        workload.RandomDataset,
        workload.ShareGPTDataset,
        workload.PrefixRepetitionDataset,
        workload.LongPromptDataset,
    ]
    for model in models:
        for name, info in model.model_fields.items():
            assert info.description, f"{model.__name__}.{name}"


@pytest.mark.parametrize(
    ("tiers", "message"),
    [([], "at least one"), ([0, 4], "positive"), ([4, 8, 4], "unique; repeated: [4]")],
)
def test_tier_rules(tiers: list[int], message: str) -> None:
    with pytest.raises(ValidationError, match=message.replace("[", r"\[").replace("]", r"\]")):
        spec(tiers=tiers)


def test_prefix_repetition_derives_num_prompts() -> None:
    ds = {
        "kind": "prefix_repetition",
        "num_prefixes": 20,
        "prefix_len": 50,
        "repeats": 3,
        "output_len": 8,
    }
    s = spec(dataset=ds, num_prompts=None)
    assert isinstance(s.dataset, PrefixRepetitionDataset)
    assert s.num_prompts == 60
    with pytest.raises(ValidationError, match=r"num_prompts \(59\) must equal .* \(60\)"):
        spec(dataset=ds, num_prompts=59)


def test_long_prompt_defaults_to_one_request() -> None:
    s = spec(
        dataset={"kind": "long_prompt", "input_len": 150_000, "output_len": 100}, num_prompts=None
    )
    assert s.requests_per_tier == 1


def test_num_prompts_required_for_random() -> None:
    with pytest.raises(ValidationError, match="num_prompts is required for dataset kind 'random'"):
        spec(num_prompts=None)


def test_burstiness_needs_a_rate() -> None:
    with pytest.raises(ValidationError, match=r"burstiness .* needs workload.request_rate"):
        spec(burstiness=0.5)
    assert spec(burstiness=0.5, request_rate=4.0).burstiness == 0.5


@pytest.mark.parametrize(
    "bad",
    [
        {"colour": "red"},
        {"dataset": {**RANDOM, "extra": 1}},
        {"dataset": {"kind": "zipf"}},
        {"endpoint": "responses"},
        {"dataset": {**RANDOM, "range_ratio": 1.0}},
        {"request_timeout_s": 0},
    ],
)
def test_rejects_bad_values(bad: dict[str, object]) -> None:
    with pytest.raises(ValidationError):
        spec(**bad)


def test_sharegpt_caps_must_agree() -> None:
    ds = {"kind": "sharegpt", "path": "x.json", "output_len": 500, "max_output_len": 100}
    with pytest.raises(ValidationError, match=r"output_len \(500\) exceeds"):
        spec(dataset=ds)
