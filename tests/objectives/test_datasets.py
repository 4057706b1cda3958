from __future__ import annotations

import json
from pathlib import Path

import pytest

from objectives.datasets import build_requests, build_warmup
from objectives.workload import WorkloadSpec
from tuner.errors import DatasetError


def spec(dataset: dict[str, object], **kw: object) -> WorkloadSpec:
    body: dict[str, object] = {"dataset": dataset, "num_prompts": 6, "tiers": [1]}
    body.update(kw)
    return WorkloadSpec.model_validate(body)


def test_random_exact_lengths_as_token_ids() -> None:
    reqs = build_requests(spec({"kind": "random", "input_len": 300, "output_len": 7}))
    assert len(reqs) == 6
    for r in reqs:
        assert isinstance(r.prompt, list) and len(r.prompt) == r.prompt_len == 300
        assert r.output_len == 7 and r.prefix_key is None and r.prefix_len == 0
        assert all(100 <= t < 32000 for t in r.prompt)


def test_random_range_ratio_and_shared_prefix() -> None:
    ds = {
        "kind": "random",
        "input_len": 100,
        "output_len": 20,
        "range_ratio": 0.5,
        "prefix_len": 16,
    }
    reqs = build_requests(spec(ds, num_prompts=200))
    ins = [r.prompt_len - 16 for r in reqs]
    outs = [r.output_len for r in reqs]
    assert min(ins) >= 50 and max(ins) <= 150 and len(set(ins)) > 20
    assert min(outs) >= 10 and max(outs) <= 30
    assert all(len(r.prompt) == r.prompt_len for r in reqs)
    assert len({tuple(r.prompt[:16]) for r in reqs}) == 1
    assert len({r.prefix_key for r in reqs}) == 1 and reqs[0].prefix_len == 16


def test_same_seed_same_requests_and_rounds_change_content_only() -> None:
    s = spec(
        {"kind": "random", "input_len": 50, "output_len": 5, "range_ratio": 0.3, "prefix_len": 4}
    )
    a, b = build_requests(s), build_requests(s.model_copy(deep=True))
    assert a == b
    c = build_requests(s, round=1)
    assert [r.prompt_len for r in c] == [r.prompt_len for r in a]
    assert [r.prompt for r in c] != [r.prompt for r in a]
    assert c[0].prefix_key != a[0].prefix_key
    other = build_requests(spec(s.dataset.model_dump(), seed=1))
    assert [r.prompt for r in other] != [r.prompt for r in a]


def test_warmup_shares_no_content_with_measured_requests() -> None:
    s = spec({"kind": "random", "input_len": 50, "output_len": 5, "prefix_len": 8}, warmup=3)
    warm, measured = build_warmup(s), build_requests(s)
    assert len(warm) == 3 and warm[0].prompt_len == measured[0].prompt_len
    assert warm[0].prompt[:8] != measured[0].prompt[:8]
    assert build_warmup(spec({"kind": "random", "input_len": 5, "output_len": 5}, warmup=0)) == []


def test_chat_endpoint_gets_text_of_one_word_per_token() -> None:
    reqs = build_requests(
        spec({"kind": "random", "input_len": 40, "output_len": 5}, endpoint="chat")
    )
    assert isinstance(reqs[0].prompt, str)
    assert len(reqs[0].prompt.split()) == reqs[0].prompt_len == 40


def test_prefix_repetition_sends_each_prompt_repeats_times() -> None:
    ds = {
        "kind": "prefix_repetition",
        "num_prefixes": 4,
        "prefix_len": 32,
        "suffix_len": 8,
        "repeats": 3,
        "output_len": 9,
    }
    reqs = build_requests(spec(ds, num_prompts=None))
    assert len(reqs) == 12
    by_key: dict[str | None, list[list[int]]] = {}
    for r in reqs:
        assert r.prompt_len == len(r.prompt) == 40 and r.prefix_len == 32 and r.output_len == 9
        by_key.setdefault(r.prefix_key, []).append(list(r.prompt))
    assert len(by_key) == 4
    for prompts in by_key.values():
        assert len(prompts) == 3 and len({tuple(p[:32]) for p in prompts}) == 1
        assert len({tuple(p[32:]) for p in prompts}) == 3
    assert [r.prefix_key for r in reqs] != sorted(r.prefix_key or "" for r in reqs)  # shuffled


def test_long_prompt() -> None:
    s = spec({"kind": "long_prompt", "input_len": 150_000, "output_len": 64}, num_prompts=None)
    (r,) = build_requests(s)
    assert r.prompt_len == len(r.prompt) == 150_000 and r.output_len == 64


def write(tmp_path: Path, name: str, body: object) -> Path:
    path = tmp_path / name
    path.write_text(body if isinstance(body, str) else json.dumps(body))
    return path


def conv(prompt: str, reply: str, **counts: int) -> dict[str, object]:
    human: dict[str, object] = {"from": "human", "value": prompt}
    gpt: dict[str, object] = {"from": "gpt", "value": reply}
    if counts:
        human["token_count"], gpt["token_count"] = counts["p"], counts["r"]
    return {"conversations": [{"from": "system", "value": "be brief"}, human, gpt]}


def test_sharegpt_json_first_human_turn_and_reply_length(tmp_path: Path) -> None:
    data = [conv("a" * 400, "b" * 80), conv("c" * 40, "d" * 800), conv("hi", "x" * 400)]
    write(tmp_path, "sg.json", data)
    s = spec({"kind": "sharegpt", "path": "sg.json"}, num_prompts=2)
    reqs = build_requests(s, tmp_path)
    got = sorted((r.prompt_len, r.output_len, r.prompt[0]) for r in reqs)
    assert got == [(10, 200, "c"), (100, 20, "a")]  # 4 chars/token; "hi" is too short
    assert build_requests(s, tmp_path) == reqs


def test_sharegpt_jsonl_roles_token_counts_and_caps(tmp_path: Path) -> None:
    lines = [
        {
            "messages": [
                {"role": "user", "content": "history " * 10},
                {"role": "assistant", "content": "ok", "token_count": 900},
            ]
        },
        conv("q", "r", p=50_000, r=300),
    ]
    write(tmp_path, "sg.jsonl", "\n".join(json.dumps(x) for x in lines) + "\n\n")
    s = spec(
        {"kind": "sharegpt", "path": str(tmp_path / "sg.jsonl"), "max_output_len": 500},
        num_prompts=2,
    )
    got = sorted((r.prompt_len, r.output_len) for r in build_requests(s))
    assert got == [(20, 500), (50_000, 300)]
    fixed = spec(
        {
            "kind": "sharegpt",
            "path": str(tmp_path / "sg.jsonl"),
            "output_len": 7,
            "max_prompt_len": 1000,
        },
        num_prompts=1,
    )
    assert [(r.prompt_len, r.output_len) for r in build_requests(fixed)] == [(20, 7)]


def test_sharegpt_warmup_takes_other_conversations(tmp_path: Path) -> None:
    write(tmp_path, "sg.json", [conv(f"{i}" * 40, "r" * 40) for i in range(5)])
    s = spec({"kind": "sharegpt", "path": "sg.json"}, num_prompts=3, warmup=2)
    measured = {r.prompt for r in build_requests(s, tmp_path)}
    warm = {r.prompt for r in build_warmup(s, tmp_path)}
    assert len(measured) == 3 and len(warm) == 2 and not measured & warm


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("{not json\n", "sg.json:1: not JSON or JSONL"),
        ('"a string"', "expected a JSON list or JSONL"),
        ([{"id": 1}], "entry 0 has no 'conversations'"),
        ([conv("hi", "yo")], "no usable conversation"),
        ([conv("a" * 100, "b" * 100)], "1 usable conversations, the workload needs 6"),
    ],
)
def test_sharegpt_bad_files(tmp_path: Path, body: object, message: str) -> None:
    write(tmp_path, "sg.json", body)
    with pytest.raises(DatasetError, match=message):
        build_requests(spec({"kind": "sharegpt", "path": "sg.json"}), tmp_path)


def test_sharegpt_missing_file(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="cannot read dataset"):
        build_requests(spec({"kind": "sharegpt", "path": "nope.json"}), tmp_path)


def recurring_share(ids: object) -> float:
    """Share of 3-grams that occur more than once (what a prompt-lookup drafter can match)."""
    assert isinstance(ids, list)
    grams = [tuple(ids[i : i + 3]) for i in range(len(ids) - 2)]
    seen: dict[tuple[int, ...], int] = {}
    for g in grams:
        seen[g] = seen.get(g, 0) + 1
    return sum(seen[g] > 1 for g in grams) / len(grams)


def test_code_edit_shares_each_file_and_repeats_its_idioms() -> None:
    """Each file is the shared prefix of its edit requests, and its lines recur enough for a
    prompt-lookup drafter (a random prompt of the same length has almost no recurring 3-gram)."""
    spec = WorkloadSpec.model_validate(
        {
            "dataset": {
                "kind": "code_edit",
                "num_files": 4,
                "file_len": 6000,
                "edits": 3,
                "request_len": 50,
                "output_len": 8,
            },
            "tiers": [1],
        }
    )
    reqs = build_requests(spec)
    assert len(reqs) == 12 and spec.num_prompts == 12
    files: dict[str | None, list[list[int]]] = {}
    for r in reqs:
        assert r.prompt_len == 6050 and r.prefix_len == 6000
        files.setdefault(r.prefix_key, []).append(list(r.prompt))
    assert len(files) == 4
    for prompts in files.values():
        assert all(p[:6000] == prompts[0][:6000] for p in prompts)
        assert len({tuple(p[6000:]) for p in prompts}) == 3  # three different edits
    assert recurring_share(reqs[0].prompt) > 0.5
    random = WorkloadSpec.model_validate(
        {
            "dataset": {"kind": "random", "input_len": 6050, "output_len": 8},
            "num_prompts": 1,
            "tiers": [1],
        }
    )
    assert recurring_share(build_requests(random)[0].prompt) < 0.01


def test_code_edit_output_lengths_spread_by_their_own_ratio_and_move_nothing_else() -> None:
    base = {"kind": "code_edit", "num_files": 5, "file_len": 3000, "range_ratio": 0.2}
    base |= {"edits": 3, "output_len": 100}
    exact = build_requests(spec(base, num_prompts=15))
    spread = build_requests(spec({**base, "output_range_ratio": 0.5}, num_prompts=15))
    assert {r.output_len for r in exact} == {100}
    outs = [r.output_len for r in spread]
    assert all(50 <= n <= 150 for n in outs) and len(set(outs)) > 5
    # The same files and edits in the same order: only the answers' lengths differ.
    assert [r.prompt for r in spread] == [r.prompt for r in exact]
    again = build_requests(spec({**base, "output_range_ratio": 0.5}, num_prompts=15), round=2)
    assert [r.output_len for r in again] == outs  # every tier sends the same shapes


def _spec_of(dataset: dict, num_prompts: int = 12) -> WorkloadSpec:
    return WorkloadSpec.model_validate(
        {"dataset": dataset, "num_prompts": num_prompts, "tiers": [1], "seed": 3}
    )


def test_every_kind_can_draw_output_lengths_without_moving_a_prompt(tmp_path: Path) -> None:
    fixed = {"kind": "prefix_repetition", "num_prefixes": 3, "prefix_len": 32}
    fixed |= {"repeats": 4, "output_len": 100}
    plain = build_requests(_spec_of(fixed))
    spread = build_requests(_spec_of({**fixed, "output_range_ratio": 0.5}))
    assert [r.prompt for r in plain] == [r.prompt for r in spread]
    assert {r.output_len for r in plain} == {100}
    assert len({r.output_len for r in spread}) > 3
    assert all(50 <= r.output_len <= 150 for r in spread)
    (tmp_path / "lengths.txt").write_text("# reply lengths\n7\n900\n\n40\n")
    long = {"kind": "long_prompt", "input_len": 64, "output_len": 10}
    drawn = build_requests(_spec_of({**long, "output_lengths_file": "lengths.txt"}), tmp_path)
    assert {r.output_len for r in drawn} <= {7, 900, 40} and len({r.output_len for r in drawn}) > 1


def test_a_bad_output_lengths_file_names_its_line(tmp_path: Path) -> None:
    (tmp_path / "lengths.txt").write_text("12\nlots\n")
    spec = _spec_of(
        {"kind": "random", "input_len": 8, "output_len": 8, "output_lengths_file": "lengths.txt"}
    )
    with pytest.raises(DatasetError, match=r"lengths.txt, line 2: 'lots' is not a positive"):
        build_requests(spec, tmp_path)
